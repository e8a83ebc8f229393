"""Is this an Ascend host, and which of its runtime pieces work?

Host detection is cheap and import-free (device files, binaries on PATH, an importable
``torch_npu``), so it can run in every process. Whether ``torch_npu`` actually imports is a
separate, heavier question asked only by patches that are about to touch torch anyway.
"""

import functools
import glob
import importlib.util
import os
import shutil

DEVICE_ENV = "VERL_ASCEND_DEVICE"
CANN_FIX = (
    "source the CANN environment before starting Python or `ray start` on every node, e.g. "
    "`source /usr/local/Ascend/ascend-toolkit/set_env.sh` (and `/usr/local/Ascend/nnal/atb/set_env.sh`), "
    f"or set {DEVICE_ENV}=cpu to run this process without NPUs"
)


class AscendRuntimeError(RuntimeError):
    """This host looks like an Ascend host, but its NPU runtime cannot be used."""


def _forced() -> str:
    return os.environ.get(DEVICE_ENV, "auto").strip().lower()


def ascend_evidence() -> list:
    """What makes this look like an Ascend host; empty when it does not."""
    forced = _forced()
    if forced in ("cpu", "off", "none", "0"):
        return []
    found = []
    if forced == "npu":
        found.append(f"{DEVICE_ENV}=npu")
    if glob.glob("/dev/davinci[0-9]*"):
        found.append("/dev/davinci* present")
    if shutil.which("npu-smi"):
        found.append("npu-smi on PATH")
    try:
        if importlib.util.find_spec("torch_npu") is not None:
            found.append("torch_npu installed")
    except (ImportError, ValueError):
        pass
    return found


def is_ascend_host() -> bool:
    return bool(ascend_evidence())


def not_ascend_reason() -> str:
    if _forced() in ("cpu", "off", "none", "0"):
        return f"{DEVICE_ENV}={_forced()}"
    return "not an Ascend host (no /dev/davinci*, no npu-smi on PATH, no torch_npu installed)"


@functools.lru_cache(maxsize=1)
def torch_npu_error() -> str:
    """'' when ``import torch_npu`` works and provides ``torch.npu``; otherwise the error text."""
    try:
        import torch
        import torch_npu  # noqa: F401
    except Exception as exc:  # ImportError, OSError from a missing libhccl.so, ...
        return f"{type(exc).__name__}: {exc}"
    if not hasattr(torch, "npu"):
        return "torch_npu imported but torch.npu is missing"
    return ""


def require_torch_npu() -> None:
    error = torch_npu_error()
    if error:
        raise AscendRuntimeError(
            f"this host looks like an Ascend host ({', '.join(ascend_evidence()) or 'forced'}) "
            f"but torch_npu cannot be used ({error}). Fix: {CANN_FIX}."
        )


def installed_version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""

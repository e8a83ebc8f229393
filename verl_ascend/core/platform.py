"""Is this an Ascend host, and which of its runtime pieces work?

Host detection is cheap and import-free (device files, binaries on PATH, an importable
``torch_npu``), so it can run in every process. Whether ``torch_npu`` actually imports is a
separate, heavier question asked only by patches that are about to touch torch anyway.
"""

import functools
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys

DEVICE_ENV = "VERL_ASCEND_DEVICE"
AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"
CANN_FIX = (
    "source the CANN environment before starting Python or `ray start` on every node, e.g. "
    "`source /usr/local/Ascend/ascend-toolkit/set_env.sh` (and `/usr/local/Ascend/nnal/atb/set_env.sh`); "
    f"to run a process without NPUs set {AUTOLOAD_ENV}=0 (torch then does not load torch_npu) "
    f"and {DEVICE_ENV}=cpu"
)
_PROBE_TIMEOUT = 180
# Run in a fresh interpreter: after a failed `import torch`, importing it again in the same process
# fails with an unrelated error ("Only a single TORCH_LIBRARY ..."), so the first failure is the
# only one worth reporting. Prints one JSON line last; torch_npu may print warnings before it.
_TORCH_PROBE = r"""
import json
try:
    import torch
    error = ""
except BaseException as exc:
    from verl_ascend.core.platform import describe
    error = describe(exc)
print()
print(json.dumps({"torch_import_error": error}))
"""


def importable(module: str) -> bool:
    """Whether ``module`` can be imported by this interpreter (found on its path), without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing or broken
        return False


class AscendRuntimeError(RuntimeError):
    """This host looks like an Ascend host, but its NPU runtime cannot be used."""


def _forced() -> str:
    from verl_ascend.core import settings

    return settings.get(DEVICE_ENV)


def ascend_evidence() -> list:
    """What makes this look like an Ascend host; empty when it does not."""
    forced = _forced()
    if forced == "cpu":
        return []
    found = []
    if forced == "npu":
        found.append(f"{DEVICE_ENV}=npu")
    if glob.glob("/dev/davinci[0-9]*"):
        found.append("/dev/davinci* present")
    if shutil.which("npu-smi"):
        found.append("npu-smi on PATH")
    if _find("torch_npu") is not None:
        found.append("torch_npu installed")
    return found


def is_ascend_host() -> bool:
    return bool(ascend_evidence())


def not_ascend_reason() -> str:
    if _forced() == "cpu":  # settings parses every off word to "cpu"
        return f"{DEVICE_ENV}={_forced()}"
    return "not an Ascend host (no /dev/davinci*, no npu-smi on PATH, no torch_npu installed)"


def describe(exc: BaseException) -> str:
    """The exception and the causes chained under it (torch wraps torch_npu's loader error)."""
    parts, seen = [], exc
    while seen is not None and len(parts) < 6:
        parts.append(f"{type(seen).__name__}: {seen}".strip())
        seen = seen.__cause__ or seen.__context__
    return parts[0] + "".join(f" (caused by {part})" for part in parts[1:])


_first_failure = []  # the first failed `import torch`/`torch_npu` of this process, never retried


@functools.lru_cache(maxsize=1)
def torch_npu_error() -> str:
    """'' when ``import torch_npu`` works and provides ``torch.npu``; otherwise the error text."""
    if _first_failure and "torch" not in sys.modules:
        return _first_failure[0]
    try:
        import torch
        import torch_npu  # noqa: F401
    except Exception as exc:  # ImportError, OSError from a missing libhccl.so, torch's autoload error
        if not _first_failure:
            _first_failure.append(describe(exc))
        return _first_failure[0]
    if not hasattr(torch, "npu"):
        return "torch_npu imported but torch.npu is missing"
    return ""


@functools.lru_cache(maxsize=1)
def torch_import_problem() -> str:
    """'' when ``import torch`` works in a fresh interpreter with this environment, else the error
    with its causes. Asked only where torch_npu is installed (its autoload entry point is what can
    break ``import torch``) and torch is not imported yet; costs one interpreter start."""
    if "torch" in sys.modules or _find("torch_npu") is None:
        return ""
    try:
        proc = subprocess.run([sys.executable, "-c", _TORCH_PROBE], capture_output=True, text=True,
                              timeout=_PROBE_TIMEOUT, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return f"`import torch` did not finish within {_PROBE_TIMEOUT} s"
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            return json.loads(line)["torch_import_error"]
        except (ValueError, KeyError, TypeError):
            continue
    return f"`import torch` crashed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}"


def _find(name):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def require_torch_npu() -> None:
    error = torch_npu_error()
    if error:
        raise AscendRuntimeError(
            f"this host looks like an Ascend host ({', '.join(ascend_evidence()) or 'forced'}) "
            f"but torch_npu cannot be used ({error}). Fix: {CANN_FIX}."
        )


def installed_version(dist: str) -> str:
    """The installed version of distribution ``dist``, '' when it is not installed: the one helper every
    tool asks (metadata only, nothing is imported)."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def release(version: str):
    """(major, minor, micro) of a version string such as 2.7.1.post1, 2.5.1rc1, 2.13.0+cpu; None when it is none."""
    from packaging.version import InvalidVersion, Version

    try:
        return (Version(version).release + (0, 0, 0))[:3]
    except InvalidVersion:
        return None


def without_local(version: str) -> str:
    """``version`` without its local part: 2.10.0+cpu and 2.10.0 are the same release for a version table."""
    return version.split("+", 1)[0]


def installed_versions(*dists) -> dict:
    """dist -> installed_version(dist), in the order given."""
    return {dist: installed_version(dist) for dist in dists}

"""doctor's torch group: torch, and torch_npu built for its release and importable. Check ids and groups:
:mod:`.checks`. (Inside this package ``import torch`` is still the real torch: imports are absolute.)"""

import importlib.util
import sys

from verl_ascend.core import platform

from .findings import error, ok, skip

release = platform.release  # doctor's checks compare releases (torch vs torch_npu, vllm vs vllm-ascend)


def torch_npu_facts():
    """(installed version or '', import error or '') of torch_npu; imports it only when it is present."""
    if importlib.util.find_spec("torch_npu") is None:
        return "", ""
    # A fresh interpreter first: if `import torch` fails (torch_npu's autoload without CANN), this
    # process must not import it, or every later import of torch fails with an unrelated error.
    problem = platform.torch_import_problem() or platform.torch_npu_error()
    version = platform.installed_version("torch_npu")
    if not version and "torch_npu" in sys.modules:
        version = getattr(sys.modules["torch_npu"], "__version__", "")
    return version or "?", problem


def check_torch(torch_version) -> list:
    if not torch_version:
        return [error(check_torch, "torch is not installed", "install the torch version your torch_npu was built for")]
    return [ok(check_torch, f"torch {torch_version}")]


def check_torch_npu(torch_version, npu_facts, ascend_host) -> list:
    """npu_facts: torch_npu_facts()'s (version, import problem). Not judged without torch (its own error)."""
    npu_version, npu_problem = npu_facts
    if not torch_version:
        return []
    if not npu_version:
        if ascend_host:
            return [error(check_torch_npu, "this is an Ascend node but torch_npu is not installed",
                          f"pip install torch-npu=={'.'.join(map(str, release(torch_version) or ()))}* (same release as torch)")]
        return [skip(check_torch_npu, "torch_npu not installed (not an Ascend node): NPU runtime not checked")]
    if npu_problem:
        return [error(check_torch_npu, f"torch_npu {npu_version} does not import: {npu_problem}", platform.CANN_FIX)]
    t, n = release(torch_version), release(npu_version)
    if t is None or n is None or t != n:
        return [error(check_torch_npu, f"torch_npu {npu_version} does not match torch {torch_version} "
                      "(torch_npu is built for one torch release)",
                      f"install the torch_npu release for torch {torch_version}, or the torch release torch_npu {npu_version} needs")]
    return [ok(check_torch_npu, f"torch_npu {npu_version} matches torch {torch_version} and imports")]

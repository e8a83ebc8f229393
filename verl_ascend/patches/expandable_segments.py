"""Make verl's expandable-segments toggle around sleep/wake act on NPU (verl 0.6.1 to 0.7.x).

Why: verl turns the caching allocator's expandable segments off before the colocated rollout wakes up and
    on again once it sleeps (``set_expandable_segments(False)`` / ``(True)`` in the workers' rollout and
    trainer modes), so the rollout's memory pool maps fixed blocks while training keeps the segments that
    fight fragmentation. Up to 0.7.x that function acts only ``if is_cuda_available``: on NPU it does
    nothing, and a run that exports ``PYTORCH_NPU_ALLOC_CONF=expandable_segments:True`` keeps them on
    through every wake-up; verl issue 6412 reports HBM growing step by step until OOM. verl 0.8 added the
    NPU branch (verl PR 6346).
How: wraps ``verl.utils.device.set_expandable_segments``: after verl's own body (the CUDA call, untouched),
    on an NPU (``is_npu_available`` and no CUDA) it calls torch_npu's allocator,
    ``torch_npu.npu.memory._set_allocator_settings("expandable_segments:<enable>")``. verl's workers import
    the function by name, so verl modules already holding verl's function get the wrapper too. A torch_npu
    that refuses the call at run time logs one warning and training goes on, as verl 0.8 does.
    Acts only where both are true, each probed: verl's function has no NPU branch of its own (its source
    names neither ``npu`` nor verl 0.9's platform layer) and the installed torch_npu has the allocator call
    (present in 2.6.0.post5, 2.7.1.post2, 2.8.0.post2, 2.9.0 and later; absent in 2.5.1.post1, 2.7.1 and
    2.8.0, read from their wheels). Where torch_npu lacks it nothing can toggle the segments at run time:
    keep ``expandable_segments:True`` out of ``PYTORCH_NPU_ALLOC_CONF`` there (``check``'s ``alloc`` rule).
Upstream: verl PR 6346 (verl 0.8.0), issue 6412.
Remove when: verl 0.7.x is out of use.
"""

import inspect
import logging
import sys

from verl_ascend.core import platform
from verl_ascend.core.marks import is_wrapped, unwrap, wrap
from verl_ascend.core.registry import Patch

NAME = "expandable_segments"
TARGET = "verl.utils.device"
FUNCTION = "set_expandable_segments"
SINCE = "2.6.0.post5, 2.7.1.post2, 2.8.0.post2, 2.9.0"
logger = logging.getLogger("verl_ascend")
_rebound = []  # (module, original) whose FUNCTION this patch replaced by name
_warned = []


def verl_handles_npu(function) -> bool:
    """Does verl's own ``set_expandable_segments`` reach an NPU allocator (verl 0.8+)?"""
    try:
        text = inspect.getsource(function)
    except (OSError, TypeError):
        return False
    return "npu" in text or "get_platform" in text  # 0.8: torch.npu's call; 0.9: the platform layer


def allocator_call():
    """torch_npu's runtime allocator setting call, or None where this torch_npu has none."""
    torch_npu = sys.modules.get("torch_npu")
    if torch_npu is None:
        try:
            import torch_npu
        except Exception:
            return None
    memory = getattr(getattr(torch_npu, "npu", None), "memory", None)
    call = getattr(memory, "_set_allocator_settings", None)
    return call if callable(call) else None


def _torch_npu_version() -> str:
    return platform.installed_version("torch_npu") or platform.installed_version("torch-npu") or "?"


def _applies(module):
    if not platform.is_ascend_host():
        return platform.not_ascend_reason()
    function = getattr(module, FUNCTION, None)
    if not callable(function):
        return f"this verl has no {TARGET}.{FUNCTION}: no allocator toggle around sleep/wake to complete"
    if verl_handles_npu(function):
        return f"verl's {FUNCTION} already acts on NPU (verl PR 6346, 0.8+)"
    if allocator_call() is None:
        return (f"torch_npu {_torch_npu_version()} has no torch_npu.npu.memory._set_allocator_settings ({SINCE} and "
                "later have it): nothing can toggle expandable segments at run time; keep expandable_segments:True "
                "out of PYTORCH_NPU_ALLOC_CONF where the rollout sleeps")
    return None


def _wrapper(module):
    def make(original):
        def set_expandable_segments(enable, *args, **kwargs):
            result = original(enable, *args, **kwargs)
            if getattr(module, "is_npu_available", False) and not getattr(module, "is_cuda_available", False):
                call = allocator_call()
                try:
                    call(f"expandable_segments:{bool(enable)}")
                except Exception as exc:  # verl 0.8 warns and goes on; a toggle must not stop training
                    if not _warned:
                        _warned.append(exc)
                        logger.warning("verl-ascend %s: torch_npu refused expandable_segments:%s (%s: %s); the "
                                       "allocator keeps its setting", NAME, bool(enable), type(exc).__name__, exc)
            return result

        return set_expandable_segments

    return make


def _apply(module):
    original = getattr(module, FUNCTION)
    wrap(module, FUNCTION, NAME, _wrapper(module))
    wrapper = getattr(module, FUNCTION)
    rebound = []
    for name, other in list(sys.modules.items()):
        if other is module or not name.startswith("verl.") or getattr(other, FUNCTION, None) is not original:
            continue
        setattr(other, FUNCTION, wrapper)
        _rebound.append((other, original))
        rebound.append(name)
    also = f"; rebound in {', '.join(rebound)}" if rebound else ""
    return (f"{FUNCTION} also sets torch_npu's allocator (expandable_segments:True/False around the rollout's "
            f"wake-up and sleep){also}")


def _revert() -> None:
    module = sys.modules.get(TARGET)
    while _rebound:
        other, original = _rebound.pop()
        if is_wrapped(getattr(other, FUNCTION, None), NAME):
            setattr(other, FUNCTION, original)
    if module is not None:
        unwrap(module, FUNCTION, NAME)


PATCH = Patch(name=NAME, targets=(TARGET,), applies=_applies, apply=_apply, doc=__doc__, revert=_revert)

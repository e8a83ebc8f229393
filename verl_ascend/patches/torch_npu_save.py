"""torch_npu's save leaves ``UntypedStorage.nbytes`` exactly as it found it, even when it fails.

Why: on the affected torch_npu builds, ``torch.save`` goes through a helper that reads
    ``UntypedStorage.nbytes`` as it is at call time, installs a closure for NPU storages around that
    value, saves, then puts the value back, with no try/finally and no lock. A save that raises (an
    unpicklable object, a full disk, Ray pickling a storage) leaves its closure behind and the next
    save wraps it again; two threads saving at once capture and restore each other's closures.
    Every ``nbytes()`` then walks the whole pile and, after about a thousand, fails with
    RecursionError (docs/field-reports.md#7b-recursionerror-while-saving; MindSpeed-RL issue 1). Affected: torch_npu 2.1.0.post4-post11,
    2.2.0, 2.3.1 up to post5, 2.4.0 up to post3, and 2.5.1/2.6.0 dev builds from before April 2025
    (Ascend/pytorch added the swap in January 2024 and removed it on 2025-03-31). Every release on
    the package index from 2.5.1 on is fixed, so the patch is inert on the stacks verl 0.6-0.9 use.
How: when ``torch_npu`` is imported (armed when ``torch`` is), look for the feature: a
    ``utils.serialization._get_npu_save_result`` whose code builds the ``npu_nbytes`` closure. Without
    it: "not applicable: fixed in this torch_npu". With it, wrap the helper: a re-entrant lock
    serialises saves, the outermost save first unwinds any pile already built (so a process that
    hit the bug recovers), and a finally restores the value found on entry. torch_npu's own helper
    still does the work, so NPU storages are sized its way. Nothing is saved to detect the feature.
Upstream: Ascend/pytorch ``torch_npu/utils/serialization.py`` (``_get_npu_save_result``, replaced by
    ``_npu_save`` installed as ``torch.serialization._save`` in "Fix torch.save's bug in multi-thread").
Remove when: no supported stack can have an affected torch_npu (the patch then always reports
    "fixed in this torch_npu").
"""

import sys
import threading

from verl_ascend.core import marks, platform
from verl_ascend.core.registry import Patch, Step

NAME = "torch_npu_save"
GATE = "torch"
STEP = "torch_npu"
HELPER = "_get_npu_save_result"
_CLOSURE_NAME = "npu_nbytes"
_CAPTURED = "cpu_nbytes"

_lock = threading.RLock()  # saves run one at a time; the same thread may nest (Ray pickles storages)
_nesting = [0]


def unchain(func):
    """The ``nbytes`` under any pile of torch_npu's closures, and how many closures there were."""
    depth = 0
    while getattr(func, "__name__", "") == _CLOSURE_NAME:
        code = getattr(func, "__code__", None)
        cells = getattr(func, "__closure__", None)
        if code is None or not cells or _CAPTURED not in code.co_freevars:
            break
        func = cells[code.co_freevars.index(_CAPTURED)].cell_contents
        depth += 1
    return func, depth


def _swaps_nbytes(helper) -> bool:
    """Does this save helper build torch_npu's ``npu_nbytes`` closure (the affected code)?"""
    code = getattr(helper, "__code__", None)
    return code is not None and any(getattr(c, "co_name", "") == _CLOSURE_NAME for c in code.co_consts)


def _serialization():
    return sys.modules.get("torch_npu.utils.serialization")


def fixed_reason() -> str:
    version = platform.installed_version("torch_npu") or getattr(sys.modules.get(STEP), "__version__", "")
    release = f" {version}" if version else ""
    return f"fixed in this torch_npu{release}: its save does not swap UntypedStorage.nbytes"


def _step_applies(module):
    helper = getattr(_serialization(), HELPER, None)
    if helper is None:
        return fixed_reason()
    if marks.is_wrapped(helper, NAME):
        return None
    import torch

    if unchain(torch.storage.UntypedStorage.nbytes)[1]:
        return None  # the bug already struck in this process
    if not _swaps_nbytes(helper):
        return fixed_reason()
    return None


def _safe(helper):
    def save_restoring_nbytes(*args, **kwargs):
        import torch

        storage_cls = torch.storage.UntypedStorage
        with _lock:
            entry = storage_cls.nbytes
            if _nesting[0] == 0:
                entry, _ = unchain(entry)
                storage_cls.nbytes = entry
            _nesting[0] += 1
            try:
                return helper(*args, **kwargs)
            finally:
                _nesting[0] -= 1
                storage_cls.nbytes = entry

    return save_restoring_nbytes


def _step_apply(module):
    import torch

    storage_cls = torch.storage.UntypedStorage
    with _lock:
        original, depth = unchain(storage_cls.nbytes)
        if depth:
            storage_cls.nbytes = original
    marks.wrap(_serialization(), HELPER, NAME, _safe)
    repaired = f"; unwound {depth} stacked nbytes wrappers left by earlier saves" if depth else ""
    return f"torch.save restores UntypedStorage.nbytes on error and across threads{repaired}"


def _applies(module):
    if not platform.is_ascend_host():
        return platform.not_ascend_reason()
    return None


def _revert() -> None:
    module = _serialization()
    if module is not None:
        marks.unwrap(module, HELPER, NAME)


# Gated on `torch` (every process imports it), the change itself lands on torch_npu's save helper.
PATCH = Patch(name=NAME, targets=(GATE,), applies=_applies, doc=__doc__, revert=_revert,
              steps=(Step(STEP, applies=_step_applies, apply=_step_apply),))

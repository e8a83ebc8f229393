"""torch_npu's save leaves ``UntypedStorage.nbytes`` exactly as it found it, even when it fails.

Why: torch_npu replaces ``torch.save``; its helper reads ``UntypedStorage.nbytes`` as it is at call
    time, installs a closure for NPU storages around that value, saves, then puts the value back,
    with no try/finally and no lock. A save that raises (an unpicklable object, a full disk, Ray
    pickling a storage) leaves its closure behind and the next save wraps it again; two threads
    saving at once capture and restore each other's closures. Every ``nbytes()`` then walks the
    whole pile and, after about a thousand, fails with RecursionError (seed 002 bug 1, MindSpeed-RL
    issue 1; users commented the two lines out of site-packages).
How: after ``torch_npu`` is imported (armed when ``torch`` is), probe the installed helper: run it
    on an object that cannot be pickled and see whether ``nbytes`` changed. Only then wrap the
    helper: a re-entrant lock serialises saves, the outermost save first unwinds any pile already
    built (so a process that hit the bug recovers), and a finally restores the value found on
    entry. torch_npu's own helper still does the work, so NPU storages are sized its way.
Upstream: Ascend/pytorch ``torch_npu/utils/serialization.py`` (``_get_npu_save_result``).
Remove when: the installed torch_npu passes the probe (a failing save leaves ``nbytes`` unchanged),
    which this patch then reports as "not applicable".
"""

import io
import sys
import threading

from .. import hooks, platform, registry
from ..registry import Patch
from ._util import wrap

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


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("verl-ascend probe: this object cannot be pickled on purpose")


def _leaks_on_failure(helper) -> bool:
    """Does a save that raises leave ``nbytes`` replaced? Puts it back either way."""
    import torch

    storage_cls = torch.storage.UntypedStorage
    before = storage_cls.nbytes
    try:
        helper(_Unpicklable(), io.BytesIO())
    except Exception:
        pass
    leaked = storage_cls.nbytes is not before
    storage_cls.nbytes = before
    return leaked


def _serialization():
    return sys.modules.get("torch_npu.utils.serialization")


def _step_applies(module):
    serialization = _serialization()
    helper = getattr(serialization, HELPER, None)
    if helper is None:
        return f"torch_npu has no utils.serialization.{HELPER} (its save path changed); nothing to fix"
    if getattr(helper, "__verl_ascend_patch__", None) == NAME:
        return None
    import torch

    if unchain(torch.storage.UntypedStorage.nbytes)[1]:
        return None  # the bug already struck in this process
    if not _leaks_on_failure(helper):
        return f"torch_npu {platform.installed_version('torch_npu') or ''} restores UntypedStorage.nbytes after a failing save".replace("  ", " ")
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
    wrap(_serialization(), HELPER, NAME, _safe)
    repaired = f"; unwound {depth} stacked nbytes wrappers left by earlier saves" if depth else ""
    return f"torch.save restores UntypedStorage.nbytes on error and across threads{repaired}"


_STEP = Patch(name=NAME, targets=(STEP,), applies=_step_applies, apply=_step_apply, doc=__doc__)


def _applies(module):
    if not platform.is_ascend_host():
        return platform.not_ascend_reason()
    return None


def _apply(module):
    hooks.when_imported(STEP, lambda npu: registry.apply_to(_STEP, STEP, npu))
    return "watching torch_npu's save (see the torch_npu row)"


PATCH = Patch(name=NAME, targets=(GATE,), applies=_applies, apply=_apply, doc=__doc__)

"""Distributed-checkpoint shard validation in near-linear time, keeping every error torch reports.

Why: torch validates checkpoint shard layouts with algorithms that are quadratic for Megatron MoE
    expert stacks: ~730 s per call for one ~48k-chunk expert key on torch <= 2.9, ~240 s on
    2.10-2.14, twice per key per rank (``bench/ckpt_validation.py``; verl issue 2860: a 10,480 s
    save). Users stub the checks out (THUDM/slime PR 1342;
    docs/field-reports.md#235b-checkpoint-checks-stubbed) and lose the protection against
    overlapping or out-of-bounds shards; the usual ``return True`` stub breaks torch >= 2.10,
    whose ``_validate_global_plan`` returns a list of errors.
How: ``VERL_ASCEND_CKPT_VALIDATION`` picks the mode (default ``fast``, on any host: the slowness is
    torch's, not Ascend's).
    ``fast`` replaces ``validate_non_overlapping_shards_metadata`` (load side),
    ``default_planner._validate_global_plan`` (save side) and
    ``planner_helpers.create_read_items_for_chunk_list`` (load planning) with versions built on
    ``verl_ascend.patches.ckpt_validation.shard_checks``: same verdicts and the same overlap / out-of-bounds / volume
    errors, found by splitting chunks on their intervals dimension by dimension. The answer form
    of the installed torch (bool or list, when the volume check runs) is probed by calling it; each
    replacement is compared with torch's function on small layouts before it is installed.
    ``skip`` makes both validators answer "valid" in the installed torch's form (logged once per
    process) and still uses the fast read planning, which is exact. ``stock`` changes nothing.
    Replacements are installed on the defining module and on every loaded module holding the
    function by name (``from ... import validate_non_overlapping_shards_metadata``).
    ``status`` looks again each time it is read: when another package has put its own function in
    place since (MindSpeed 26.x with ``--ckpt-acceleration`` stubs both validators), the row reads
    ``overridden`` and names the function now installed and what that means. (MindSpeed 26.1+'s
    TTP adaptor swaps ``_validate_global_plan`` for ``return True`` only during its own plan call,
    which no later look can see.)
Upstream: torch 2.10 replaced the pairwise loops with one-dimension sweep lines, which stay
    quadratic when the swept dimension is split in few pieces (expert stacks).
Remove when: torch validates a ~50k-chunk expert stack in well under a second.
"""

from verl_ascend.core import settings
from verl_ascend.core.marks import is_wrapped
from verl_ascend.core.registry import Patch
from verl_ascend.patches.ckpt_validation import usage
from verl_ascend.patches.ckpt_validation import validators as impl

NAME = "ckpt_validation"
ENV = "VERL_ASCEND_CKPT_VALIDATION"
LOAD = "torch.distributed._shard.sharding_spec._internals"
SAVE = "torch.distributed.checkpoint.default_planner"
READ = "torch.distributed.checkpoint.planner_helpers"
_ATTRS = {
    LOAD: "validate_non_overlapping_shards_metadata",
    SAVE: "_validate_global_plan",
    READ: "create_read_items_for_chunk_list",
}
_installed: list = []  # (attr, replacement, original) in install order, for revert()


def mode(environ=None) -> str:
    """fast, skip or stock (the valid values live in core/settings.py); a bad one raises, naming the fix."""
    return settings.choose(ENV, "a mode", environ)


def _current(module, attr):
    """The function torch defines, even when this patch already replaced it."""
    func = getattr(module, attr)
    while is_wrapped(func, NAME):
        func = func.__wrapped__
    return func


def _applies(module):
    chosen = mode()
    if chosen == "stock":
        return f"{ENV}=stock: torch's own checks"
    attr = _ATTRS[module.__name__]
    if not callable(getattr(module, attr, None)):
        return f"{module.__name__}.{attr} not found in this torch"
    if module.__name__ == READ:
        missing = [h for h in impl.READ_HELPERS if not hasattr(module, h)]
        if missing:
            return f"{READ} lacks {', '.join(missing)}; read planning left to torch"
    return None


def _install(module, attr, replacement) -> int:
    """Replace ``attr`` on its module and on every loaded module that imported it by name."""
    current = getattr(module, attr)
    changed = impl.rebind(attr, current, replacement)
    _installed.append((attr, replacement, current))
    return sum(1 for owner in changed if owner is not module)


def _apply(module):
    chosen = mode()
    attr = _ATTRS[module.__name__]
    if is_wrapped(getattr(module, attr), NAME):
        return f"{chosen}: {attr} already replaced"
    original = _current(module, attr)
    note = ""
    if module.__name__ == LOAD:
        if chosen == "fast":
            replacement = impl.fast_shard_check(original)
            impl.check_shard_replacement(original, replacement)
        else:
            replacement = impl.skip_shard_check(original)
    elif module.__name__ == SAVE:
        contract = impl.probe_plan_contract(original, module)
        note = f"; torch returns {contract['returns']}, checks volume {contract['volume']}"
        if chosen == "fast":
            replacement = impl.fast_plan_check(original, module, contract)
            impl.check_plan_replacement(original, replacement, module)
        else:
            replacement = impl.skip_plan_check(original, contract)
    else:  # read planning is exact in both modes, so skip uses it too
        replacement = impl.fast_read_items(original, module)
        impl.check_read_replacement(original, replacement)
    replacement = usage.counted(attr, replacement)  # after the comparison with torch: only real calls count
    impl.mark(replacement, original, NAME, chosen)
    callers = _install(module, attr, replacement)
    where = f" (+{callers} importing module{'s' if callers != 1 else ''})" if callers else ""
    action = "replaced" if (chosen == "fast" or module.__name__ == READ) else "answers valid, logged once"
    return f"{chosen}: {attr} {action}{where}{note}"


def _who(func) -> str:
    code = getattr(func, "__code__", None)
    where = code.co_filename if code is not None else getattr(type(func), "__module__", "?")
    name = getattr(code, "co_name", None) or getattr(func, "__name__", repr(func))
    return f"{name} from {where}"


def live(target: str):
    """None while our replacement is what callers of ``target``'s function get; else what is there."""
    import sys

    attr = _ATTRS[target]
    ours = [replacement for name, replacement, _ in _installed if name == attr]
    module = sys.modules.get(target)
    if not ours or module is None:
        return None
    current = getattr(module, attr, None)
    if current is ours[-1]:
        return None
    # functools.wraps copies our tag and name onto a wrapper of ours: only the code object tells
    originals = {id(original) for name, _, original in _installed if name == attr}
    if id(current) in originals:
        return f"torch's own {attr} again (someone reverted verl-ascend's)"
    who = _who(current)
    if "mindspeed" in who.lower():
        meaning = ("MindSpeed replaced it after verl-ascend (its --ckpt-acceleration feature, MindSpeed 26.x): "
                   "its stub accepts every layout, so overlapping or out-of-bounds shards go unnoticed; "
                   "drop --ckpt-acceleration to keep the checks (verl-ascend's are fast)")
    else:
        meaning = "another package replaced it after verl-ascend: its answer is the one callers get"
    return f"{who}: {meaning}"


def revert() -> None:
    """Put torch's functions back everywhere they are now held, also by later importers (tests)."""
    while _installed:
        attr, replacement, original = _installed.pop()
        impl.rebind(attr, replacement, original)


PATCH = Patch(name=NAME, targets=(LOAD, SAVE, READ), applies=_applies, apply=_apply, doc=__doc__, live=live,
              revert=revert)

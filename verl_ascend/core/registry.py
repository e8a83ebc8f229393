"""Patch records, their per-process status, and the rules for applying them.

A patch is applied when one of its target modules is imported, at most once per (patch, target)
per process. Whatever a patch does wrong (its probe raises, its apply raises) is recorded as
``failed`` and logged at WARNING with the patch name; it never propagates into the import that
triggered it.
"""

import dataclasses
import logging
import threading
import traceback
from typing import Callable, Optional

from verl_ascend.core import hooks, settings

logger = logging.getLogger("verl_ascend")

APPLIED = "applied"
NOT_APPLICABLE = "not applicable"
DISABLED = "disabled"
FAILED = "failed"
PENDING = "pending"
OVERRIDDEN = "overridden"  # applied, but another package put its own function in place since


@dataclasses.dataclass
class Patch:
    """One runtime fix.

    ``applies(module)`` returns None when the fix is needed for this target, else the reason it is
    not (feature probe, not an Ascend host, ...). ``apply(module)`` changes the target and returns
    an optional detail string for the status. Both are looked up on the record at call time, so
    tests may replace them. ``live(target)``, optional, is asked whenever the status is read for an
    applied target: None while what the patch installed is still what callers get, else a note
    saying what is there instead (the row then reads ``overridden``).
    """

    name: str
    targets: tuple
    applies: Callable
    apply: Callable
    doc: str = ""
    summary: str = ""
    live: Optional[Callable] = None

    def __post_init__(self):
        if not self.summary and self.doc:
            self.summary = self.doc.strip().splitlines()[0]


@dataclasses.dataclass
class Outcome:
    state: str
    target: Optional[str] = None
    detail: str = ""


_lock = threading.RLock()
_patches: dict[str, Patch] = {}
_outcomes: dict[str, dict[str, Outcome]] = {}


def disabled_names(environ=None) -> set:
    """Names switched off by ``VERL_ASCEND_PATCHES=-a,-b`` (a bare name is accepted too)."""
    return set(settings.get("VERL_ASCEND_PATCHES", environ))


def _set_logging() -> None:
    if logger.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s verl-ascend: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel("INFO")  # so that a bad VERL_ASCEND_LOG_LEVEL's own warning is shown
    logger.setLevel(settings.get("VERL_ASCEND_LOG_LEVEL"))


def _warn_unknown(off: set) -> None:
    """One warning for names in VERL_ASCEND_PATCHES that no patch has (a typo switches nothing off)."""
    unknown = sorted(off - set(_patches))
    if unknown:
        logger.warning("VERL_ASCEND_PATCHES names no patch called %s (ignored); the patches are: %s",
                       ", ".join(unknown), ", ".join(sorted(_patches)))


def install(patches) -> None:
    _set_logging()
    off = disabled_names()
    for patch in patches:
        with _lock:
            if patch.name in _patches:
                continue
            _patches[patch.name] = patch
            _outcomes[patch.name] = {}
        if patch.name in off:
            _record(patch, None, Outcome(DISABLED, None, "VERL_ASCEND_PATCHES"))
            continue
        for target in patch.targets:
            hooks.when_imported(target, _applier(patch, target))
    _warn_unknown(off)


def _applier(patch: Patch, target: str):
    def callback(module):
        apply_to(patch, target, module)

    return callback


def apply_to(patch: Patch, target: str, module) -> Outcome:
    with _lock:
        done = _outcomes[patch.name].get(target)
        if done is not None:
            return done
        # Claim the slot first: an apply that imports another target of the same patch must not
        # re-enter this one.
        _outcomes[patch.name][target] = Outcome(PENDING, target, "applying")
    try:
        reason = patch.applies(module)
        if reason:
            outcome = Outcome(NOT_APPLICABLE, target, str(reason))
            logger.debug("patch %r not applicable to %s: %s", patch.name, target, reason)
        else:
            detail = patch.apply(module) or ""
            outcome = Outcome(APPLIED, target, str(detail))
            logger.debug("patched %s (%s)%s", patch.name, target, f": {detail}" if detail else "")
    except Exception as exc:
        outcome = Outcome(FAILED, target, f"{type(exc).__name__}: {exc}")
        logger.warning(
            "patch %r failed on %s and was skipped: %s\n%s",
            patch.name,
            target,
            outcome.detail,
            traceback.format_exc(limit=4),
        )
    _record(patch, target, outcome)
    return outcome


def _record(patch: Patch, target, outcome: Outcome) -> None:
    with _lock:
        _outcomes[patch.name][target] = outcome


def get(name: str) -> Patch:
    return _patches[name]


def names() -> list:
    return list(_patches)


def summarize(name: str) -> dict:
    """Status of one patch: the best per-target state, and every target's outcome."""
    patch = _patches[name]
    with _lock:
        outcomes = dict(_outcomes[name])
    switched_off = outcomes.get(None)
    if switched_off is not None:
        return {"name": name, "state": switched_off.state, "summary": patch.summary,
                "targets": [{"target": None, "state": switched_off.state, "detail": switched_off.detail}]}
    rows = []
    # A patch may record outcomes for modules it watches itself (armed from its own apply), so
    # `status` does not have to import heavy modules just to show them.
    extra = [t for t in outcomes if t is not None and t not in patch.targets]
    for target in (*patch.targets, *extra):
        outcome = outcomes.get(target)
        if outcome is None:
            if target is not None:
                rows.append({"target": target, "state": PENDING, "detail": f"waits for `import {target}`"})
            continue
        row = {"target": target, "state": outcome.state, "detail": outcome.detail}
        if outcome.state == APPLIED and patch.live is not None:
            _live_check(patch, row)
        rows.append(row)
    order = [FAILED, OVERRIDDEN, APPLIED, DISABLED, PENDING, NOT_APPLICABLE]
    states = {row["state"] for row in rows}
    state = next((s for s in order if s in states), PENDING)
    return {"name": name, "state": state, "summary": patch.summary, "targets": rows}


def _live_check(patch: Patch, row: dict) -> None:
    try:
        note = patch.live(row["target"])
    except Exception as exc:  # a status read must not raise
        note = None
        row["detail"] += f"; could not check what is installed now ({type(exc).__name__}: {exc})"
    if note:
        row["state"] = OVERRIDDEN
        row["detail"] = f"{row['detail']}; now {note}" if row["detail"] else f"now {note}"


def snapshot() -> list:
    return [summarize(name) for name in names()]

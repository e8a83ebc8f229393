"""Patch records, their per-process status, and the rules for applying them.

A patch is applied when one of its target modules is imported, at most once per (patch, target)
per process. Whatever a patch does wrong (its probe raises, its apply raises) is recorded as
``failed`` and logged at WARNING with the patch name; it never propagates into the import that
triggered it.

A patch that needs several modules declares ``steps``: its targets are then a gate (is the fix
needed on this host at all?) and, once the gate says yes, the registry arms each step on its own
module, before or after that module's import. The patch's state is what its steps did: a gate that
only armed them reads ``watching`` in its row and is never the headline.

The module-level functions work on one default :class:`Registry`; tests make their own.
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
WATCHING = "watching"  # a gate that armed its patch's steps: says nothing about what they did
REVERTED = "reverted"  # undone by revert() (tests)
# said beside APPLIED where the call the patch wrapped is not made on this trainer path (Patch.inactive; rehearse)
INACTIVE = "inactive on this path"

# The headline of a patch: the first of these among its rows (a watching gate is never one).
_HEADLINE = (FAILED, OVERRIDDEN, APPLIED, REVERTED, DISABLED, PENDING, NOT_APPLICABLE)


@dataclasses.dataclass(frozen=True)
class Step:
    """One module a patch changes once its gate applies.

    ``applies(module)`` and ``apply(module)`` as on :class:`Patch`. ``before_import``: run just
    before ``target`` is first imported (``module`` is then None; if it was imported already, the
    module is passed and ``applies`` says it is too late). ``apply=None``: a step that only
    reports why nothing is done there (its ``applies`` always gives a reason).
    """

    target: str
    applies: Callable
    apply: Optional[Callable] = None
    before_import: bool = False


@dataclasses.dataclass
class Patch:
    """One runtime fix.

    ``applies(module)`` returns None when the fix is needed for this target, else the reason it is
    not (feature probe, not an Ascend host, ...). ``apply(module)`` changes the target and returns
    an optional detail string for the status; a patch with ``steps`` may leave it None (its
    targets only gate the steps). Both are looked up on the record at call time, so tests may
    replace them. ``live(target)``, optional, is asked whenever the status is read for an applied
    target: None while what the patch installed is still what callers get, else a note saying
    what is there instead (the row then reads ``overridden``). ``inactive(target)``, optional, is asked
    the same way: None, or why the call the patch wrapped there is never made on the trainer path this
    verl runs by default (feature-detected; the row stays ``applied`` and carries ``inactive``, and when
    every applied row does, so does the headline). ``revert()``, optional, undoes what the patch changed
    in this process (``registry.revert(name)``, for tests).
    """

    name: str
    targets: tuple
    applies: Callable
    apply: Optional[Callable] = None
    doc: str = ""
    summary: str = ""
    live: Optional[Callable] = None
    inactive: Optional[Callable] = None
    steps: tuple = ()
    revert: Optional[Callable] = None

    def __post_init__(self):
        if not self.summary and self.doc:
            self.summary = self.doc.strip().splitlines()[0]
        if self.apply is None and not self.steps:
            raise ValueError(f"patch {self.name!r} has neither apply nor steps")

    def step(self, target: str) -> Optional[Step]:
        return next((s for s in self.steps if s.target == target), None)


@dataclasses.dataclass
class Outcome:
    state: str
    target: Optional[str] = None
    detail: str = ""


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


class Registry:
    """The patches of one process (or of one test) and what each did to each of its modules."""

    def __init__(self):
        self._lock = threading.RLock()
        self._patches: dict[str, Patch] = {}
        self._outcomes: dict[str, dict] = {}  # name -> {target (None: the whole patch): Outcome}

    # --- arming and applying ---------------------------------------------------------------

    def install(self, patches, environ=None) -> None:
        _set_logging()
        off = disabled_names(environ)
        for patch in patches:
            with self._lock:
                if patch.name in self._patches:
                    continue
                self._patches[patch.name] = patch
                self._outcomes[patch.name] = {}
            if patch.name in off:
                self._record(patch, None, Outcome(DISABLED, None, "VERL_ASCEND_PATCHES"))
                continue
            for target in patch.targets:
                hooks.when_imported(target, self._applier(patch, target))
        unknown = sorted(off - set(self._patches))
        if unknown:  # a typo switches nothing off: say so once
            logger.warning("VERL_ASCEND_PATCHES names no patch called %s (ignored); the patches are: %s",
                           ", ".join(unknown), ", ".join(sorted(self._patches)))

    def _applier(self, patch: Patch, target: str):
        def callback(module):
            self.apply_to(patch, target, module)

        return callback

    def apply_to(self, patch: Patch, target: str, module) -> Outcome:
        """Decide ``target`` (a gate target or a step's) of ``patch`` once; a gate that applies arms the steps."""
        step = None if target in patch.targets else patch.step(target)
        with self._lock:
            done = self._outcomes[patch.name].get(target)
            if done is not None and done.state != REVERTED:
                return done
            # Claim the slot first: an apply that imports another target of the same patch must not
            # re-enter this one.
            self._outcomes[patch.name][target] = Outcome(PENDING, target, "applying")
        applies, apply = (step.applies, step.apply) if step else (patch.applies, patch.apply)
        try:
            reason = applies(module)
            if reason:
                outcome = Outcome(NOT_APPLICABLE, target, str(reason))
                logger.debug("patch %r not applicable to %s: %s", patch.name, target, reason)
            elif apply is None and step is None:
                outcome = Outcome(WATCHING, target, "watching " + ", ".join(_described(s) for s in patch.steps))
            elif apply is None:
                outcome = Outcome(NOT_APPLICABLE, target, "nothing to do here")
            else:
                detail = apply(module) or ""
                outcome = Outcome(APPLIED, target, str(detail))
                logger.debug("patched %s (%s)%s", patch.name, target, f": {detail}" if detail else "")
        except Exception as exc:
            outcome = Outcome(FAILED, target, f"{type(exc).__name__}: {exc}")
            logger.warning("patch %r failed on %s and was skipped: %s\n%s", patch.name, target, outcome.detail,
                           traceback.format_exc(limit=4))
        self._record(patch, target, outcome)
        if step is None and outcome.state in (WATCHING, APPLIED):
            self._arm_steps(patch)
        return outcome

    def _arm_steps(self, patch: Patch) -> None:
        for step in patch.steps:
            with self._lock:
                if step.target in self._outcomes[patch.name]:
                    continue  # armed by another gate target, or decided already
            callback = self._applier(patch, step.target)
            if step.before_import:
                hooks.before_import(step.target, callback)
            else:
                hooks.when_imported(step.target, callback)

    def _record(self, patch: Patch, target, outcome: Outcome) -> None:
        with self._lock:
            self._outcomes[patch.name][target] = outcome

    def revert(self, name: str) -> bool:
        """Undo patch ``name`` in this process (its ``revert``); its applied rows then read ``reverted``
        and may be applied again with :meth:`apply_to`. False when it has no ``revert``."""
        patch = self._patches[name]
        if patch.revert is None:
            return False
        patch.revert()
        with self._lock:
            for target, outcome in self._outcomes[name].items():
                if outcome.state in (APPLIED, OVERRIDDEN):
                    self._outcomes[name][target] = Outcome(REVERTED, target, "registry.revert")
        return True

    # --- reading ---------------------------------------------------------------------------

    def get(self, name: str) -> Patch:
        return self._patches[name]

    def names(self) -> list:
        return list(self._patches)

    def summarize(self, name: str) -> dict:
        """Status of one patch: its headline state and detail, and every target's outcome.

        The headline is the first state of ``_HEADLINE`` among the rows, with that row's detail: for
        a patch with steps, what the steps did (its gate's own row counts only when it said no).
        """
        patch = self._patches[name]
        with self._lock:
            outcomes = dict(self._outcomes[name])
        switched_off = outcomes.get(None)
        if switched_off is not None:
            row = {"target": None, "state": switched_off.state, "detail": switched_off.detail}
            return {"name": name, "state": switched_off.state, "detail": switched_off.detail,
                    "summary": patch.summary, "targets": [row]}
        # The steps have rows once a gate target let them be armed (they wait for their modules).
        armed = any(outcomes.get(t) is not None and outcomes[t].state in (WATCHING, APPLIED) for t in patch.targets)
        rows = [self._row(patch, target, outcomes.get(target)) for target in patch.targets]
        if armed:
            rows += [self._row(patch, step.target, outcomes.get(step.target), step) for step in patch.steps]
        deciding = [row for row in rows if row["state"] != WATCHING]
        state = next((s for s in _HEADLINE if any(row["state"] == s for row in deciding)), PENDING)
        detail = next((row["detail"] for row in deciding if row["state"] == state), "")
        summary = {"name": name, "state": state, "detail": detail, "summary": patch.summary, "targets": rows}
        applied = [row for row in rows if row["state"] == APPLIED]
        if state == APPLIED and applied and all(row.get("inactive") for row in applied):
            summary["inactive"] = "; ".join(dict.fromkeys(row["inactive"] for row in applied))
        return summary

    def _row(self, patch: Patch, target: str, outcome: Optional[Outcome], step: Optional[Step] = None) -> dict:
        if outcome is None:
            before = " (runs before it)" if step is not None and step.before_import else ""
            return {"target": target, "state": PENDING, "detail": f"waits for `import {target}`{before}"}
        row = {"target": target, "state": outcome.state, "detail": outcome.detail}
        if outcome.state == APPLIED and patch.live is not None:
            _live_check(patch, row)
        if row["state"] == APPLIED and patch.inactive is not None:
            _inactive_check(patch, row)
        return row

    def snapshot(self) -> list:
        return [self.summarize(name) for name in self.names()]


def _described(step: Step) -> str:
    return f"{step.target} (before import)" if step.before_import else step.target


def _ask(probe, row: dict, failing: str):
    """``probe(target)`` for a status read, which must not raise: a failure is appended to the row's detail."""
    try:
        return probe(row["target"])
    except Exception as exc:
        row["detail"] += f"; {failing} ({type(exc).__name__}: {exc})"
        return None


def _live_check(patch: Patch, row: dict) -> None:
    note = _ask(patch.live, row, "could not check what is installed now")
    if note:
        row["state"] = OVERRIDDEN
        row["detail"] = f"{row['detail']}; now {note}" if row["detail"] else f"now {note}"


def _inactive_check(patch: Patch, row: dict) -> None:
    why = _ask(patch.inactive, row, "could not tell whether it is on the trainer path")
    if why:
        row["inactive"] = why


# The process's registry, behind the functions the rest of the package calls.
default = Registry()
install = default.install
apply_to = default.apply_to
revert = default.revert
get = default.get
names = default.names
summarize = default.summarize
snapshot = default.snapshot

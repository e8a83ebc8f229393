"""Detectors: each a pure function of a :class:`~.timeline.Snapshot` (and the budgets), returning findings.

- :func:`live_failure` — a failure line while the command still lives. Ray's verdicts (a node or an actor dead,
  a worker killed for host memory) end a verl run whatever follows: verl restarts no actor (Ray's actor
  ``max_restarts`` defaults to 0, and verl sets none), so they count at once. Any other line of a known
  ``diagnose`` family (a collective timeout, an HCCL / CANN error) counts once ``crash_grace`` seconds pass
  without a new step line: the supervisor does not sit out verl's own waits (TransferQueue's 3 x 200 s on a dead
  node's storage unit).
- :func:`hang` — a step (or the start-up) over its budget, and nothing moved over the quiet window: no console
  line, no process of the run busy, no checkpoint byte written; on a cluster, :func:`confirm_hang` then weighs the
  other nodes' CPU (a rank may compute there while the head's processes wait for it; :func:`held_back` says so).
- :func:`exited` — a non-zero exit; an exit 0 before the last step (verl issue 7401: a resume at an epoch
  boundary exits 0 having trained nothing).
- :func:`health` — NaN / inf losses and ``logs``' health flags; a warning, an error only for ``--stop-on``.

Budgets follow nvidia-resiliency-ext's learned section timeouts: a phase may take ``k`` times the longest seen
(``k`` = 5.0, ``FaultToleranceConfig.safety_factor``'s default in its ``fault_tolerance/config.py``), never
less than ``floor``. verl reports phase times only when the step ends, so inside a step the budget is the sum of
its phases' budgets, the save excepted: the save announces its start, and from there has a budget of its own.
"""

import dataclasses
import functools
import math
import re

from verl_ascend.core.findings import ERROR, WARNING, Finding
from verl_ascend.diagnose import context, table
from verl_ascend.logs import health as health_flags
from verl_ascend.logs import parse

from . import timeline

SAFETY_FACTOR = 5.0
# Ray's own verdicts: the run cannot go on after them (verl replaces no actor)
AT_ONCE = ("ray_node_died", "ray_actor_died", "host_oom_killed")
NOT_LIVE = (table.UNRECOGNISED,)  # any "Error" line: too common in a living run to act on; the exit tells
LOSS_WORDS = ("loss", "grad_norm")
HEALTH_CODES = ("nan",) + ("rollout_probs_diff", "reward_collapse", "response_length_collapse", "entropy_blowup",
                           "memory_growth", "throughput_drop")


@dataclasses.dataclass
class Budgets:
    k: float = SAFETY_FACTOR  # a phase may take k x its longest seen
    floor: float = 120.0      # s: no step budget below this (a tiny run's steps take seconds)
    startup: float = 3600.0   # s to the first step when no earlier attempt showed how long it takes
    hang_after: float = None  # --hang-after: this budget for every step and the start-up, instead of learned ones
    quiet: float = 120.0      # s of nothing moving before a hang is called (at most the budget)
    cpu_busy: float = 0.5     # share of a core: a process using as much over the quiet window is working
    crash_grace: float = 60.0  # s a known failure line may be followed by progress before it counts


@functools.lru_cache(maxsize=1)
def _rules():
    compiled = [(r, r.compiled(), r.rejected()) for r in table.RULES if r.family not in NOT_LIVE]
    return compiled, [x for x in compiled if x[0].any_level]


@functools.lru_cache(maxsize=8192)  # the live detector reads the same lines again at every poll
def family_of(text: str):
    """The ``diagnose`` family a console line belongs to (the one nearest a root cause), or None."""
    everything, loud = _rules()
    best = None
    for rule, pattern, unless in loud if context.is_quiet(text) else everything:
        if rule.keywords and not any(k in text for k in rule.keywords):
            continue
        if pattern.search(text) and not (unless and unless.search(text)):
            if best is None or table.FAMILIES[rule.family].order < table.FAMILIES[best].order:
                best = rule.family
    return best


def live_failure(snap: timeline.Snapshot, budgets: Budgets = None):
    """The first failure line that counts while the command lives, as a finding; None."""
    budgets = budgets or Budgets()
    if not snap.alive:
        return None
    step_times = {s.at for s in timeline.steps(snap)}
    for at, text in snap.lines:
        if "step:" in text and at in step_times:
            continue
        family = family_of(text)
        if family is None:
            continue
        later_step = any(t > at for t in step_times)
        if family in AT_ONCE:
            why = "Ray's verdict: the run cannot go on (verl restarts no actor)"
        elif not later_step and snap.now - at >= budgets.crash_grace:
            why = f"no step followed it in {snap.now - at:.0f} s (grace {budgets.crash_grace:.0f} s)"
        else:
            continue
        shown = re.sub(r"\x1b\[[0-9;]*m", "", text).strip()[:200]  # Ray colours its prefixes
        return Finding(ERROR, "crash_line", f"{family} while the command lives: {shown} — {why}",
                       code="crash_line", where={"time": at}, details={"family": family, "failed_at": at})
    return None


def _step_budget(longest: dict, budgets: Budgets, step_seconds: float):
    """(budget, how it was made) for a step without its save."""
    if budgets.hang_after:
        return budgets.hang_after, f"--hang-after {budgets.hang_after:g} s"
    phases = {p: s for p, s in longest.items() if p != timeline.SAVE}
    if phases:
        learned = budgets.k * sum(phases.values())
        parts = ", ".join(f"{p} {s:.0f}" for p, s in phases.items())
        how = f"{budgets.k:g} x the longest phases seen ({parts} s)"
    elif step_seconds:
        learned, how = budgets.k * step_seconds, f"{budgets.k:g} x the longest step seen ({step_seconds:.0f} s)"
    else:
        return budgets.startup, "no step timing yet: the start-up budget"
    if learned < budgets.floor:
        return budgets.floor, how + f", below the floor {budgets.floor:g} s: the floor"
    return learned, how


def _budget(snap, budgets, history, startup_seen):
    """(phase, since, budget, how) of what the attempt is doing now."""
    done = timeline.steps(snap)
    if not done:
        if budgets.hang_after:
            return "start-up", snap.started, budgets.hang_after, f"--hang-after {budgets.hang_after:g} s"
        learned = budgets.k * startup_seen if startup_seen else 0.0
        if learned > budgets.startup:
            return "start-up", snap.started, learned, f"{budgets.k:g} x the longest start-up seen ({startup_seen:.0f} s)"
        return "start-up", snap.started, budgets.startup, f"the start-up budget {budgets.startup:g} s"
    longest = timeline.longest_phases(list(history) + done)
    step_seconds = max((s.seconds or 0.0) for s in done)
    since = done[-1].at
    saving = timeline.save_started(snap, since)
    if saving is not None:
        if budgets.hang_after:
            return timeline.SAVE, saving, budgets.hang_after, f"--hang-after {budgets.hang_after:g} s"
        seen = longest.get(timeline.SAVE)
        if seen:
            return timeline.SAVE, saving, max(budgets.floor, budgets.k * seen), \
                f"{budgets.k:g} x the longest save seen ({seen:.0f} s), floor {budgets.floor:g} s"
        budget, how = _step_budget(longest, budgets, step_seconds)
        return timeline.SAVE, saving, budget, "no save seen yet: " + how
    budget, how = _step_budget(longest, budgets, step_seconds)
    return f"step {done[-1].step + 1}", since, budget, how


def movement(snap: timeline.Snapshot, since: float, cpu_busy: float) -> dict:
    """What moved after ``since``: console lines, busy processes, checkpoint bytes (None: not measured)."""
    lines = sum(1 for at, _ in snap.lines if at > since)
    rates = timeline.cpu_rates(snap, since)
    return {"lines": lines, "busy": {pid: round(r, 3) for pid, r in rates.items() if r >= cpu_busy},
            "cpu_measured": bool(rates), "ckpt_bytes": timeline.ckpt_growth(snap, since)}


def hang(snap: timeline.Snapshot, budgets: Budgets = None, history=(), startup_seen: float = None):
    """A hang finding when the current phase is over its budget and nothing moved in the quiet window.

    ``history``: earlier attempts' step records (their phase times teach the budgets); ``startup_seen``: the
    longest time an earlier attempt took to its first step."""
    budgets = budgets or Budgets()
    if not snap.alive:
        return None
    phase, since, budget, how = _budget(snap, budgets, history, startup_seen)
    elapsed = snap.now - since
    if elapsed < budget:
        return None
    quiet = min(budgets.quiet, budget)
    moved = movement(snap, snap.now - quiet, budgets.cpu_busy)
    if moved["lines"] or moved["busy"] or (moved["ckpt_bytes"] or 0) > 0:
        return None
    last = max([since] + [at for at, _ in snap.lines])
    evidence = (f"no console line for {snap.now - last:.0f} s"
                + (", no process of the run busy" if moved["cpu_measured"] else ", CPU not measured")
                + (", no checkpoint byte written" if moved["ckpt_bytes"] is not None else ""))
    return Finding(ERROR, "hang", f"{phase}: {elapsed:.0f} s, over its budget of {budget:.0f} s ({how}); {evidence} "
                   f"in the last {quiet:.0f} s", code="hang", where={"time": snap.now},
                   details={"family": "hang", "phase": phase, "elapsed_s": round(elapsed, 1), "budget_s": round(budget, 1),
                            "budget_from": how, "quiet_s": quiet, "moved": moved, "failed_at": last})


def busy_elsewhere(others: dict, cpu_busy: float) -> dict:
    """{node: [(pid, name, cores)]} of the other nodes' processes of the run that used at least ``cpu_busy`` cores
    over their sample (``others``: :func:`.evidence_nodes.cpu_elsewhere`'s answer)."""
    found = {}
    for node, got in others.items():
        hot = [(p["pid"], p.get("name", "?"), p["cpu_rate"]) for p in got.get("processes", ())
               if (p.get("cpu_rate") or 0) >= cpu_busy]
        if hot:
            found[node] = sorted(hot, key=lambda x: -x[2])
    return found


def confirm_hang(found: Finding, others: dict, cpu_busy: float):
    """The head's hang ``found``, weighed with the other nodes' CPU (``others``: {node: {processes} or {error}}):
    None when a process of the run works on another node (the phase goes on there; the head's processes wait for
    it), else the finding with what the other nodes showed added to its message and details. A node not reached
    does not hold the call back: it is named, and the relaunch's own steps decide what it means."""
    if busy_elsewhere(others, cpu_busy):
        return None
    if not others:
        return found
    reached = [n for n, got in others.items() if "error" not in got]
    silent = {n: got["error"] for n, got in others.items() if "error" in got}
    said = []
    if reached:
        said.append(f"no process of the run busy on {', '.join(reached)} either")
    if silent:
        said.append(f"not reached: {', '.join(silent)}")
    details = {**found.details, "other_nodes": {"quiet": reached, "not_reached": silent}}
    return dataclasses.replace(found, message=f"{found.message}; {'; '.join(said)}", details=details)


def held_back(found: Finding, hot: dict, recheck_s: float) -> str:
    """What the supervisor says when another node's CPU holds the head's hang ``found`` back (``hot``:
    :func:`busy_elsewhere`'s answer): the phase over its budget (the message's first clause, before the head's
    own quiet evidence, which the other node contradicts), the processes that work (three a node at most), and
    when it looks again."""
    working = "; ".join(f"{node}: pid {pid} ({name}) uses {rate:.2f} core"
                        for node, procs in hot.items() for pid, name, rate in procs[:3])
    return (f"{found.message.partition('; ')[0]}, but the run works on another node: {working}; "
            f"looking again in {recheck_s:.0f} s")


def exited(snap: timeline.Snapshot, total_steps: int = None, tracker_step: int = None):
    """A finding for an exit that is a failure: non-zero, or 0 before the last step; None while alive or done."""
    if snap.alive:
        return None
    at = snap.ended if snap.ended is not None else snap.now
    if snap.exit_code != 0:
        return Finding(ERROR, "exit", f"the command exited with code {snap.exit_code}", code="exit",
                       where={"time": at}, details={"exit_code": snap.exit_code, "failed_at": at})
    last = timeline.last_step(snap)
    reached = max(x for x in (last, tracker_step, -1) if x is not None)
    if total_steps and reached < total_steps:
        return Finding(ERROR, "incomplete_exit",
                       f"exit 0 at step {last if last is not None else 'none'} of {total_steps} (tracker "
                       f"{tracker_step if tracker_step is not None else 'absent'}): the run did not finish",
                       "verl issue 7401: a resume at an epoch boundary exits 0 having trained nothing (fixed by "
                       "verl PRs 5725 / 7974); check trainer.total_epochs and the data's size",
                       code="incomplete_exit", where={"time": at},
                       details={"family": "incomplete_exit", "last_step": last, "failed_at": at})
    return None


def health(snap: timeline.Snapshot, stop_on=()) -> list:
    """NaN / inf losses and ``logs``' health flags over the attempt's steps; errors for the codes in ``stop_on``."""
    done = timeline.steps(snap)
    found = []
    for s in done:
        bad = sorted(k for k, v in s.metrics.items() if any(w in k for w in LOSS_WORDS) and not math.isfinite(v))
        if bad:
            found.append(Finding(WARNING, "nan", f"non-finite {', '.join(bad)} at step {s.step}", code="nan",
                                 where={"step": s.step}))
            break
    parsed = parse.Parsed(steps={s.step: s.metrics for s in done})
    found += health_flags.flags(parsed)
    for f in found:
        if f.code in stop_on:
            f.severity = ERROR
            f.fix = f"stopped because --stop-on names {f.code}; look at the run's curves (verl-ascend logs)"
            f.details = {**f.details, "family": f.code, "failed_at": snap.now}
    return found

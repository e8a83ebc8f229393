"""The run's report: every attempt, what ended it, what was decided, and what the failures cost.

``report.json`` in the run folder is both the report (the project's JSON envelope, ``core.findings``) and the
supervisor's state: written whole after every change (a temp file, then renamed), so a supervisor started again
on the same folder reads which attempt runs (its pid, the process's start time, its mark) and picks it up
instead of starting a second one. Times are wall-clock seconds since the epoch (they must mean the same to
the next supervisor).

Totals: ``time_lost_s`` = wall time - the training time of the kept steps; ``goodput`` = kept training time /
wall time. A step is kept when its training reached a checkpoint (at or before the step the attempt's tracker named
when it ended) and no later attempt trained it again: a step an attempt trained past the checkpoint its successor
resumed from was recomputed, and a step trained after the last save of a run that ends there (the deadline, a stop)
is lost; either way its training time is lost time.
"""

import dataclasses
import datetime
import json
import os

from verl_ascend.core import findings as F
from verl_ascend.core import outfiles

NAME = "report.json"
RUNNING, DONE, STOPPED, GAVE_UP, WATCHED = "running", "done", "stopped", "gave_up", "watched"


class NoReport(F.BadInput):
    """--status on a folder without a report."""


@dataclasses.dataclass
class Attempt:
    number: int
    argv: list
    log: str
    pid: int = None
    pid_start: str = None      # the process's start time in /proc/PID/stat: a reused pid is not the attempt
    mark: str = None           # VAR=value every process of the attempt carries
    started: float = None
    ended: float = None
    exit_code: int = None
    resumed_from: int = None   # the step its trainer loaded (0: from scratch; None: not said)
    first_step_at: float = None
    first_step: int = None
    last_step: int = None
    step_seconds: dict = dataclasses.field(default_factory=dict)  # step -> timing_s/step
    detected: str = None       # crash_line | hang | exit | incomplete_exit | a health code
    family: str = None
    retry_class: str = None
    decision: str = None
    reason: str = None
    fix: str = None
    evidence: str = None       # the folder
    failed_at: float = None    # the last sign of life, or the failure line / exit
    detected_at: float = None
    tracker: int = None        # the checkpoint step when it ended
    health: list = dataclasses.field(default_factory=list)  # health flags seen (codes)

    @property
    def detection_latency_s(self):
        if self.failed_at is None or self.detected_at is None:
            return None
        return round(max(0.0, self.detected_at - self.failed_at), 1)

    @property
    def to_first_step_s(self):
        return None if self.first_step_at is None or self.started is None else round(self.first_step_at - self.started, 1)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["step_seconds"] = {str(k): v for k, v in self.step_seconds.items()}
        d.update(detection_latency_s=self.detection_latency_s, to_first_step_s=self.to_first_step_s,
                 started_iso=_iso(self.started), ended_iso=_iso(self.ended))
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Attempt":
        names = {f.name for f in dataclasses.fields(cls)}
        a = cls(**{k: v for k, v in d.items() if k in names})
        a.step_seconds = {int(k): v for k, v in (a.step_seconds or {}).items()}
        return a


def _iso(t):
    return None if t is None else datetime.datetime.fromtimestamp(t).isoformat(sep=" ", timespec="seconds")


def recomputed(attempts: list) -> list:
    """Per attempt, the steps it trained again that an earlier attempt had already trained."""
    out, seen = [], set()
    for a in attempts:
        mine = set(a.step_seconds)
        out.append(sorted(mine & seen))
        seen |= mine
    return out


def saved(attempt: Attempt, step: int) -> bool:
    """Whether the attempt's training of ``step`` reached a checkpoint: at or before the step its tracker named when
    it ended (none named: nothing saved). A running attempt's steps count until it ends (a save may still come)."""
    if attempt.ended is None:
        return True
    return attempt.tracker is not None and step <= attempt.tracker


def totals(attempts: list, now: float = None) -> dict:
    if not attempts:
        return {"attempts": 0, "restarts": 0, "wall_s": 0.0, "kept_training_s": 0.0, "time_lost_s": 0.0,
                "goodput": None, "steps_recomputed": 0}
    start = attempts[0].started
    end = attempts[-1].ended or now or start
    kept = {}
    for a in attempts:
        for step, seconds in a.step_seconds.items():
            kept.pop(step, None)  # a later attempt's training of a step replaces the earlier one
            if saved(a, step):
                kept[step] = seconds
    kept_s = sum(v for v in kept.values() if v == v)
    wall = max(0.0, end - start)
    again = recomputed(attempts)
    return {"attempts": len(attempts), "restarts": len(attempts) - 1, "wall_s": round(wall, 1),
            "kept_training_s": round(kept_s, 1), "time_lost_s": round(max(0.0, wall - kept_s), 1),
            "goodput": round(kept_s / wall, 3) if wall > 0 else None, "steps_recomputed": sum(map(len, again))}


@dataclasses.dataclass
class Report:
    run_dir: str
    argv: list
    state: str = RUNNING
    exit: int = None          # the supervisor's exit code (decide.EXIT_CODES)
    reason: str = ""
    dry_run: bool = False
    settings: dict = dataclasses.field(default_factory=dict)  # the trainer's, as read from the command
    attempts: list = dataclasses.field(default_factory=list)
    findings: list = dataclasses.field(default_factory=list)  # one per failure and health flag, as seen

    @property
    def path(self) -> str:
        return os.path.join(self.run_dir, NAME)

    def current(self):
        return self.attempts[-1] if self.attempts and self.attempts[-1].ended is None else None

    def envelope(self, now: float = None) -> dict:
        again = recomputed(self.attempts)
        attempts = [dict(a.as_dict(), steps_recomputed=len(r)) for a, r in zip(self.attempts, again)]
        return F.envelope("supervise", self.findings, run_dir=self.run_dir, argv=self.argv, state=self.state,
                          supervisor_exit=self.exit, reason=self.reason, dry_run=self.dry_run, settings=self.settings,
                          attempts=attempts, totals=totals(self.attempts, now))

    def write(self, now: float = None) -> None:
        text = json.dumps(self.envelope(now), ensure_ascii=False, default=F._plain)
        with outfiles.atomic(self.path) as tmp:
            with open(tmp, "w") as fh:
                fh.write(text + "\n")

    def text(self, now: float = None) -> str:
        env = self.envelope(now)
        out = [f"run folder: {self.run_dir}", f"command: {' '.join(self.argv)}"]
        for a in env["attempts"]:
            steps = (f"steps {a['first_step']}..{a['last_step']}" if a["first_step"] is not None else "no step")
            out.append(f"attempt {a['number']}: {a['started_iso']} .. {a['ended_iso'] or 'running'}, {steps}"
                       + (f", resumed from {a['resumed_from']}" if a["resumed_from"] else "")
                       + (f", exit {a['exit_code']}" if a["exit_code"] is not None else ""))
            if a["detected"]:
                out.append(f"    {a['detected']}: {a['family']} ({a['retry_class']}) -> {a['decision']}: {a['reason']}")
                out.append(f"    detected {a['detection_latency_s']} s after the last sign of life; evidence {a['evidence']}")
            if a["to_first_step_s"] is not None:
                out.append(f"    first step {a['to_first_step_s']} s after the start; {a['steps_recomputed']} step(s) "
                           "recomputed")
        t = env["totals"]
        out.append(f"total: {t['attempts']} attempt(s), {t['restarts']} restart(s), wall {t['wall_s']} s, kept training "
                   f"{t['kept_training_s']} s, time lost {t['time_lost_s']} s, goodput {t['goodput']}, "
                   f"{t['steps_recomputed']} step(s) recomputed")
        out += F.lines(self.findings)
        out.append(f"state: {self.state}" + (f" (exit {self.exit})" if self.exit is not None else "")
                   + (f": {self.reason}" if self.reason else ""))
        return "\n".join(out)


def read(run_dir: str) -> Report:
    path = os.path.join(run_dir, NAME)
    try:
        with open(path) as fh:
            d = json.load(fh)
    except FileNotFoundError:
        raise NoReport(f"{path}: no such file; pass the --run-dir a supervisor wrote (it holds {NAME})") from None
    except (OSError, ValueError) as exc:
        raise NoReport(f"{path}: cannot be read ({exc}); pass the --run-dir a supervisor wrote") from None
    found = [F.Finding(**f) for f in d.get("findings", ())]
    return Report(d.get("run_dir", run_dir), d.get("argv", []), d.get("state", RUNNING), d.get("supervisor_exit"),
                  d.get("reason", ""), d.get("dry_run", False), d.get("settings", {}),
                  [Attempt.from_dict(a) for a in d.get("attempts", ())], found)


def status(run_dir: str, as_json: bool = False) -> int:
    """``--status RUN_DIR``: print the report; the exit code is the supervisor's (0 while it runs)."""
    rep = read(run_dir)
    print(json.dumps(rep.envelope(), default=F._plain) if as_json else rep.text())
    return rep.exit if rep.exit is not None else 0

"""One attempt as the supervisor saw it: what arrived when, what moved, how it ended.

Times are seconds on one clock (the supervisor's monotonic clock; a test picks its own numbers). A snapshot is
written into the attempt's folder (``timeline.json``) when the attempt ends, so a decision can be read again,
and argued about, from the recording alone.

verl prints one line per step, at the end of the step, with the seconds of each phase of it (``timing_s/gen``,
``timing_s/old_log_prob``, ``timing_s/ref``, ``timing_s/update_actor``, ``timing_s/save_checkpoint``, ...;
``marked_timer`` in verl's ``ray_trainer.py``): read here with the parser of ``verl-ascend logs``. Inside a step
the console says little; the one phase that announces itself is the save (``_save_checkpoint`` prints
``local_global_step_folder: ...`` as it starts).
"""

import dataclasses
import re

from verl_ascend.logs import parse

# verl 0.9's step phases in the order the loop runs them (ray_trainer.py, fit); a phase a step skips is absent
PHASES = ("gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor",
          "save_checkpoint", "update_weights", "testing")
SAVE = "save_checkpoint"
SAVE_STARTS = re.compile(r"local_global_step_folder: |Saving checkpoint to ")
RESUMED = re.compile(r"Resuming from \S*global_step_(\d+)")
SCRATCH = "Training from scratch"
FORCED_SAVE = "Force saving checkpoint: ESI instance expiration approaching."


@dataclasses.dataclass
class Step:
    at: float       # when its line arrived
    step: int
    metrics: dict

    def phases(self) -> dict:
        return {p: self.metrics[f"timing_s/{p}"] for p in PHASES if f"timing_s/{p}" in self.metrics}

    @property
    def seconds(self):
        return self.metrics.get("timing_s/step")


@dataclasses.dataclass
class Snapshot:
    started: float                 # the attempt's start
    now: float                     # when the snapshot was taken
    lines: list = dataclasses.field(default_factory=list)   # [(arrived, text)]
    cpu: list = dataclasses.field(default_factory=list)     # [(at, {pid: cpu seconds})] of the run's processes
    ckpt: list = dataclasses.field(default_factory=list)    # [(at, bytes under the checkpoint folder)]
    exit_code: int = None          # None while the command lives
    ended: float = None

    @property
    def alive(self) -> bool:
        return self.exit_code is None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Snapshot":
        d = dict(d)
        d["lines"] = [tuple(x) for x in d.get("lines", ())]
        d["cpu"] = [(t, {int(k): v for k, v in s.items()}) for t, s in d.get("cpu", ())]
        d["ckpt"] = [tuple(x) for x in d.get("ckpt", ())]
        return cls(**d)


def recorded(texts, started: float = 0.0, every: float = 1.0, now: float = None) -> Snapshot:
    """A snapshot of ``texts`` arriving ``every`` seconds apart from ``started`` (tests, and logs read afterwards)."""
    lines = [(started + every * (i + 1), t.rstrip("\n")) for i, t in enumerate(texts)]
    end = lines[-1][0] if lines else started
    return Snapshot(started, end if now is None else now, lines)


def steps(snap: Snapshot) -> list:
    """The step lines, in arrival order (a line cut short by a crash is skipped, as ``logs`` skips it)."""
    out = []
    for at, text in snap.lines:
        if "step:" not in text:
            continue
        try:
            found = parse.parse_line(text)
        except ValueError:
            continue
        if found is not None:
            out.append(Step(at, found[0], found[1]))
    return out


def last_step(snap: Snapshot):
    found = steps(snap)
    return found[-1].step if found else None


def resumed_from(snap: Snapshot):
    """The step the attempt's trainer loaded (``Resuming from .../global_step_N``), 0 from scratch, None unsaid."""
    for _, text in snap.lines:
        m = RESUMED.search(text)
        if m:
            return int(m.group(1))
        if SCRATCH in text:
            return 0
    return None


def longest_phases(history) -> dict:
    """{phase: the longest seconds seen} over step records (``Step`` or their phase dicts)."""
    out = {}
    for s in history:
        for phase, sec in (s.phases() if isinstance(s, Step) else s).items():
            if sec == sec:  # not NaN
                out[phase] = max(out.get(phase, 0.0), float(sec))
    return out


def save_started(snap: Snapshot, after: float):
    """When the save of the current step announced itself (after ``after``), else None."""
    for at, text in snap.lines:
        if at > after and SAVE_STARTS.search(text):
            return at
    return None


def last_line_at(snap: Snapshot):
    return snap.lines[-1][0] if snap.lines else None


def cpu_rates(snap: Snapshot, since: float) -> dict:
    """{pid: CPU seconds per second} of each process between the first sample at or after ``since`` and the last.
    A process seen only once has no rate; one that left and a new one that came are not compared."""
    window = [(t, s) for t, s in snap.cpu if t >= since]
    if len(window) < 2:
        return {}
    (t0, first), (t1, last) = window[0], window[-1]
    if t1 <= t0:
        return {}
    return {pid: max(0.0, last[pid] - first[pid]) / (t1 - t0) for pid in last if pid in first}


def ckpt_growth(snap: Snapshot, since: float):
    """Bytes the checkpoint folder grew by since ``since`` (None without two samples in the window)."""
    window = [(t, b) for t, b in snap.ckpt if t >= since]
    if len(window) < 2:
        return None
    return window[-1][1] - window[0][1]

"""The run as a timeline: what a run printed while it made progress, and which errors it did not survive.

A verl run prints its progress as well as its errors: step lines (``step:N - ...``), validation
(``Initial validation metrics``, ``Final validation metrics``), checkpoint saves (``Saving checkpoint to``,
``Checkpoint save completed``), the trainer's progress bar (``Training Progress:  50%|``) and its end
(``Training Progress: 100%|``, ``Final validation metrics``, Ray's ``Job '...' succeeded``, the exit line
``verl-ascend rehearse`` writes last in its console log; not a bare ``exit code 0``, which subprocesses print in the
middle of a run). Each file that prints any of
them is a run (a driver / console log); the scanner keeps, per file, the last progress mark and the first end
mark after it (no list of marks: memory stays bounded).

Every error line is then judged:

- ``fatal``: nothing of the run came after it. Only these become findings; the first by time is the headline.
- ``handled``: the run went on after it (a later progress mark in the same file; for a file without progress
  of its own, such as a worker log or a plog, a later progress mark of a run by time). A note, not the failure.
- ``shutdown``: printed after the run's end (teardown of dataloader workers, Ray actors, vLLM engines,
  destructors). Named in ``--verbose``, never fails a run -- unless a non-zero exit of the job or of the
  command follows the end (``terminal`` lines: ``Job '...' failed``, ``exit code 1``, the shell's ``Killed
  python3 ...``): then the run did not finish cleanly and those lines are fatal again.

A Ray Train / Ray Tune script ends differently: ``fit()`` returns a ``Result`` and the script prints it (Ray's repr,
``Result(`` then ``metrics=...`` -- ``ray/air/result.py``; Ray < 2.5 on one line with ``error=None``). A Result
without an ``error=`` is a *returned* end, narrower than verl's: the workers' lines after it (Ray's ``(Name pid=N)``
prefix) are their teardown, but the driver's own lines after it are the script going on after ``fit()`` and stay
fatal; and it says nothing of the lines before it (Tune's best Result prints clean beside trials that failed).
"""

import dataclasses
import datetime
import re

from verl_ascend.core import runlog

from . import context

FATAL, HANDLED, SHUTDOWN = "fatal", "handled", "shutdown"
_STEP = re.compile(rb"step:(\d+) - ")
_STEP_BEFORE = b" \t)]\n"          # what may precede verl's "step:N - " (not "global_step:N - ")
# Not the trainer's tqdm bar below 100%: tqdm draws it again when an exception leaves the loop (verl's
# "Training Progress:   0%|  | 0/1" printed after a reward function raised, measured in a rehearsal's log),
# so a bar line after an error is no sign that the run went on
PROGRESS = (b"Saving checkpoint to", b"Checkpoint save completed", b"validation metrics")
# a mark that says the run reached its end; searched in the line that holds a PROGRESS / END literal
# verl-ascend rehearse writes the trainer's exit code as the last line of its console log ("... exited with code 0 (train)");
# its words are core.runlog's, the one place rehearse and diagnose share them
_REHEARSAL_END = runlog.EXIT_LINE + "0 "
END = (b"Training Progress: 100%", b"Final validation metrics", b"' succeeded",
       _REHEARSAL_END[len(runlog.PREFIX) + 1:].encode())
_END = re.compile(rb"Training Progress: 100%|Final validation metrics|Job '[^']+' succeeded|"
                  + runlog.exit_line_pattern("0").encode(), re.MULTILINE)
# a non-zero exit of the job or of the command itself: the run did not end cleanly, whatever it printed before
TERMINAL = re.compile(r"exit(?:ed)? (?:with )?(?:code|status)\s*[:=]?\s*-?[1-9]\d*|exitcode\s*:\s*-?[1-9]\d*|"
                      r"non-zero exit status -?[1-9]|Job '[^']+' failed|^\s*Killed\s*$|"
                      r"line \d+:\s+\d+ (?:Killed|Segmentation fault|Aborted)\b")
# progress of a process that is not verl's trainer, read on the lines the scan selects (scanner -> Reader.progress):
# a vLLM engine serving (its periodic throughput line, a request it took or answered: uvicorn's access line),
# started (API server, engine initialised); Ray's driver connected (ray.init's own INFO lines, worker.py: "Connected
# to Ray cluster." joining one, "Started a local Ray instance." making one). The last is what a connect retry before
# it needs: Ray's "[... W ...] rpc_client.h:153: Failed to connect to GCS at address A within 5 seconds." is a warning
# its client prints and then retries; a driver that then says it connected got through (a 2-node rehearsal on a busy
# CI host printed it as its first line, then lost its worker node before step 1: the retry was the headline)
MORE_PROGRESS = re.compile(r"Avg prompt throughput: |Application startup complete|Starting vLLM API server|"
                           r"init engine \(profile, create kv cache, warmup model\) took|"
                           r"Graph capturing finished|Received request |Added request | HTTP/1\.[01]\" \d{3}\b|"
                           r"INFO worker\.py:\d+ -- (?:Connected to Ray cluster|Started a local Ray instance)")
PROGRESS_ANCHORS = ("Avg prompt throughput", "Application startup complete", "Starting vLLM API server",
                    "init engine (profile", "Graph capturing finished", "Received request",
                    "Added request", 'HTTP/1.1"', 'HTTP/1.0"', "Connected to Ray cluster",
                    "Started a local Ray instance")
# Ray's repr of what Trainer.fit() / Tuner.fit() returned; RESULT_WINDOW bytes after it searched for its end and error
_RESULT = re.compile(rb"Result\(\s*(?:metrics|error|path)=")
_RESULT_CLOSE = re.compile(rb"\n[ \t]*\)")
_RESULT_ERROR = re.compile(rb"\berror=(?!None\b)")
RESULT_WINDOW = 8192
WINDOW = 16384                     # bytes above a mark searched for the time it happened
TEARDOWN = datetime.timedelta(minutes=10)  # after a run's end, how long another file's errors count as its teardown
_STAMP = re.compile(rb"(?<!\d)20\d\d-\d\d-\d\d[-T ]\d\d:\d\d:\d\d")


@dataclasses.dataclass
class Mark:
    line: int
    text: str
    when: object = None            # datetime or None
    step: int = None
    returned: bool = False         # a Ray Result fit() returned (module docstring), not one of verl's end marks

    def as_dict(self, path) -> dict:
        out = {"file": path, "line": self.line, "text": self.text}
        if self.when is not None:
            out["time"] = self.when.isoformat(sep=" ", timespec="milliseconds")
        if self.step is not None:
            out["step"] = self.step
        return out


@dataclasses.dataclass
class Run:
    """What one file said about progress: its last progress mark, the first end mark after it, the last step."""
    last: Mark = None
    end: Mark = None
    step: Mark = None
    start: object = None           # the file's first full timestamp: another file's error before it is not this run's

    @property
    def finished(self) -> bool:
        return self.end is not None


def line_number(data, pos, base_line, newlines) -> int:
    """The 1-based line number of byte ``pos`` of a block that starts at line ``base_line + 1`` and holds
    ``newlines``: counted from the nearer end (the marks and the last step line are usually near the block's end,
    and counting a whole block again for each was a tenth of the scan of a big log)."""
    if pos > len(data) // 2:
        return base_line + newlines - data.count(b"\n", pos) + 1
    return base_line + data.count(b"\n", 0, pos) + 1


def _line_at(data, pos):
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    return start, len(data) if end == -1 else end


def _last_step(data):
    pos = len(data)
    while True:
        pos = data.rfind(b"step:", 0, pos)
        if pos == -1:
            return -1
        if (pos == 0 or data[pos - 1:pos] in _STEP_BEFORE) and _STEP.match(data, pos):
            return pos


def _last_progress(data, best):
    """Position of the last progress mark in the block that is not an end mark (``best``: the last step line), else -1."""
    for literal in PROGRESS:
        pos = len(data)
        while pos > best:
            pos = data.rfind(literal, best + 1, pos)   # only after the best so far (not back to the block's start)
            if pos <= best:
                break
            start, end = _line_at(data, pos)
            if not _END.search(data, start, end):
                best = pos
                break
    return best


def _first_end(data, after):
    found = [p for p in (data.find(lit, after) for lit in END) if p != -1]
    for pos in sorted(found):
        start, end = _line_at(data, pos)
        if _END.search(data, start, end):
            return pos
    return -1


def _returned(data, after):
    """Position of the first Ray ``Result(...)`` repr after ``after`` that carries no error, else -1: multi-line (its
    closing ``)`` on a line of its own) or Ray < 2.5's one-line dataclass repr (to the line's end)."""
    pos = max(after, 0) - 1
    while (pos := data.find(b"Result(", pos + 1)) != -1:
        m = _RESULT.match(data, pos)
        if m is None or (pos and (data[pos - 1:pos].isalnum() or data[pos - 1:pos] in b"_.")):
            continue                                  # not the repr (TrainingResult(, ray.air.Result(...) in code)
        if b"\n" in data[m.start():m.end()]:          # Result(\n  metrics=...,\n  ...\n): to its closing line
            close = _RESULT_CLOSE.search(data, m.end(), m.start() + RESULT_WINDOW)
            if close is None:
                continue                              # no end of the repr in sight: not judged
            close_at = close.end()
        else:                                         # Result(metrics=..., error=None, log_dir=...): to the line's end
            close_at = data.find(b"\n", m.end())
            close_at = len(data) if close_at == -1 else close_at
        if not _RESULT_ERROR.search(data, m.start(), close_at):
            return m.start()
    return -1


class Reader:
    """Per-file progress, fed block by block by the scanner."""

    def __init__(self, clean):
        self.clean = clean         # bytes -> str without colour codes
        self.runs = {}             # path -> Run
        self.starts = {}           # path -> first full timestamp of the file (None until one is seen)

    def block(self, path, data, base_line, year, newlines=None):
        if self.starts.get(path) is None:
            m = _STAMP.search(data)
            if m:
                self.starts[path] = context.resolve(context.timestamp(m.group(0).decode()), None)
        step = _last_step(data)
        last = _last_progress(data, step)
        end = _first_end(data, max(last, 0))
        returned = _returned(data, max(last, 0))
        if returned != -1 and (end == -1 or returned < end):
            end = returned
        if last == -1 and end == -1:
            return
        if newlines is None:
            newlines = data.count(b"\n")
        run = self.runs.setdefault(path, Run())
        run.start = run.start or self.starts.get(path)
        if last != -1:
            run.last = self._mark(data, last, base_line, year, newlines)
            run.end = None         # progress after an earlier end: a new run in the same file
            run.step = (run.last if step == last else self._mark(data, step, base_line, year, newlines) if step != -1
                        else run.step)
        if end != -1 and run.end is None:
            run.end = self._mark(data, end, base_line, year, newlines)
            run.end.returned = end == returned

    def progress(self, path, line, text, when):
        """A progress line the scan selected (``MORE_PROGRESS``): the file's last progress if it is the latest; it
        never opens a new run after an end (only verl's own marks do)."""
        run = self.runs.setdefault(path, Run())
        run.start = run.start or self.starts.get(path)
        if run.last is None or line > run.last.line:
            run.last = Mark(line, text[:300], when)

    def _mark(self, data, pos, base_line, year, newlines):
        start, end = _line_at(data, pos)
        text = self.clean(data[start:end]).strip()
        m = _STEP.search(data, start, end)
        step = int(m.group(1)) if m else None
        line = line_number(data, start, base_line, newlines)
        stamp = context.timestamp(text)
        if stamp is None:          # step lines carry no time: the last stamped line above gives a lower bound
            above = self.clean(data[max(0, start - WINDOW):start]).splitlines()
            stamp = next((s for s in map(context.timestamp, reversed(above)) if s), None)
        when = context.resolve(stamp, (stamp[0] if stamp else None) or year)
        return Mark(line, text[:300], when, step)


def _after(a, b) -> bool:
    return a is not None and b is not None and a > b


def judge(event, runs, ended_badly=frozenset()):
    """(verdict, reason) for one error event, given every file's Run; ``ended_badly``: files whose own last word
    is a non-zero exit (a run that failed before any progress mark is not another file's teardown)."""
    run = runs.get(event.path)
    if run is not None:
        if run.end and event.line > run.end.line and (not run.end.returned or context.process(event.text)):
            return SHUTDOWN, f"after the run's end ({run.end.text[:80]!r}, line {run.end.line})"
        if run.last and run.last.line > event.line:
            return HANDLED, f"the run went on: {_what(run)}, progress up to line {run.last.line}"
        if run.end and run.end.line > event.line and not run.end.returned:
            return HANDLED, f"the run reached its end after it (line {run.end.line})"
        return FATAL, ""
    if event.when is not None:      # a file without progress of its own (a worker log, a plog): placed by time
        for path, other in runs.items():
            if other.start and event.when < other.start:
                continue           # before that run began: not its error
            if other.end and other.end.when and other.end.when <= event.when <= other.end.when + TEARDOWN:
                return SHUTDOWN, f"after the end of the run in {path} ({other.end.when:%H:%M:%S})"
            latest = max((m.when for m in (other.last, other.end) if m and m.when and not m.returned), default=None)
            if _after(latest, event.when):
                return HANDLED, f"the run in {path} went on: {_what(other)} at {latest:%H:%M:%S}"
        return FATAL, ""
    if runs and all(r.finished and not r.end.returned for r in runs.values()) and event.path not in ended_badly:
        return HANDLED, "no time to place it by, and every run in these logs reached its end"
    return FATAL, ""


def _what(run) -> str:
    if run.step is not None:
        return f"step {run.step.step}"
    if run.last is None:
        return "its end"
    return repr(run.last.text[:80])


def judge_all(events, runs) -> dict:
    """id(event) -> (verdict, reason); a terminal line after an end turns that run's shutdown lines fatal."""
    ended_badly = frozenset(e.path for e in events if e.path not in runs and TERMINAL.search(e.text))
    verdicts = {id(e): judge(e, runs, ended_badly) for e in events}
    failed_after_end = {e.path for e in events if verdicts[id(e)][0] == SHUTDOWN and TERMINAL.search(e.text)}
    if failed_after_end:
        anywhere = any(p not in runs for p in failed_after_end)
        for e in events:
            if verdicts[id(e)][0] == SHUTDOWN and (anywhere or e.path in failed_after_end):
                verdicts[id(e)] = (FATAL, "after the run's end, but the run then exited non-zero")
    return verdicts


def summary(runs) -> list:
    """One entry per file that made progress: finished or not, the last step, the last progress mark."""
    out = []
    for path, run in runs.items():
        entry = {"file": path, "finished": run.finished}
        if run.step is not None:
            entry["last_step"] = run.step.step
        if run.last is not None:
            entry["last_progress"] = run.last.as_dict(path)
        if run.end is not None:
            entry["end"] = run.end.as_dict(path)
        out.append(entry)
    return out

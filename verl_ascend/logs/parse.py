"""Read verl's per-step console lines into {step: {metric: value}}.

verl prints each step as ``step:N - key:value - key:value ...`` (``concat_dict_to_str``), values
being ``pprint`` of numbers (``1e-06``, ``nan``, ``True``, ``np.float64(0.5)`` under numpy 2).
Through Ray the line is prefixed ``(TaskRunner pid=…)`` and coloured; copies of such logs often
lose the ESC byte and keep ``[36m`` or ``36m``. A line that starts like a step line but does not
parse (truncated by a crash, mangled by a copy) is skipped and counted, never half-read.
"""

import dataclasses
import math
import os
import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# "step:N - " not preceded by a word character, so "training/global_step:1" inside a line is no start
STEP = re.compile(r"(?<![\w/.\-])step:(\d+) - (.*)$")
WRAPPED = re.compile(r"^(?:np|numpy|torch)\.\w+\((.*)\)$|^tensor\((.*)\)$")
_BOOLS = {"True": 1.0, "False": 0.0}


@dataclasses.dataclass
class Malformed:
    path: str
    line: int
    reason: str


@dataclasses.dataclass
class Parsed:
    steps: dict = dataclasses.field(default_factory=dict)  # step -> {metric: float}, in step order
    malformed: list = dataclasses.field(default_factory=list)
    duplicates: int = 0  # a step seen again (resumed run, repeated grep): the later line wins
    files: list = dataclasses.field(default_factory=list)

    def keys(self) -> list:
        """Every metric name, in first-seen order."""
        seen = {}
        for metrics in self.steps.values():
            for key in metrics:
                seen.setdefault(key, None)
        return list(seen)


def value_of(text: str) -> float:
    text = text.strip()
    m = WRAPPED.match(text)
    if m:
        text = (m.group(1) or m.group(2) or "").split(",")[0].strip()
    if text in _BOOLS:
        return _BOOLS[text]
    return float(text)  # ValueError for anything else


def parse_line(line: str):
    """None for a line that is not a step line; (step, metrics) for one; ValueError if it is mangled."""
    line = ANSI.sub("", line).rstrip("\r\n")
    m = STEP.search(line)
    if not m:
        return None
    metrics = {}
    for field in m.group(2).rstrip().split(" - "):
        key, sep, raw = field.rpartition(":")
        if not sep or not key.strip() or not raw.strip():
            raise ValueError(f"field {field[:60]!r} is not key:value")
        try:
            metrics[key.strip()] = value_of(raw)
        except ValueError:
            raise ValueError(f"{key.strip()}: {raw.strip()[:40]!r} is not a number") from None
    return int(m.group(1)), metrics


def parse_lines(lines, path: str, into: Parsed, progress=None) -> Parsed:
    for number, line in enumerate(lines, 1):
        if progress is not None:
            progress.update(len(line.encode("utf-8", "replace")))
        if "step:" not in line:  # cheap filter: Ray logs are mostly other lines
            continue
        try:
            found = parse_line(line)
        except ValueError as exc:
            into.malformed.append(Malformed(path, number, str(exc)))
            continue
        if found is None:
            continue
        step, metrics = found
        if step in into.steps:
            into.duplicates += 1
            del into.steps[step]
        into.steps[step] = metrics
    return into


def parse_files(paths, progress_factory=None) -> Parsed:
    """Parse every file in order; a later file's step replaces an earlier one (resumed runs)."""
    parsed = Parsed(files=list(paths))
    for path in paths:
        bar = progress_factory(os.path.getsize(path), os.path.basename(path)) if progress_factory else None
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                parse_lines(fh, path, parsed, bar)
        finally:
            if bar is not None:
                bar.close()
    parsed.steps = dict(sorted(parsed.steps.items()))
    return parsed


def finite(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))

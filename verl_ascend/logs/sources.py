"""One run's steps from whatever it left: console logs, `logs --csv` tables, verl's file logger, TensorBoard events.

A run is one or more files, or a folder. A folder's files are read by the best kind it holds (TensorBoard event
files, else verl's ``file`` logger JSONL, else CSV, else console logs ``*.log``/``*.out``/``*.txt``), oldest first
by modification time (a resumed run's later log is newer). Files are read in order and a step seen again (the
steps between the last checkpoint and a crash, re-run after the resume) counts once: the later occurrence, whole.

- console: ``parse.parse_lines`` (Ray prefixes, colours, malformed lines counted);
- CSV: the table ``verl-ascend logs --csv`` writes (a ``step`` column, one column per metric, empty cells absent);
- JSONL: verl's ``trainer.logger=[...,'file']`` (``FileLogger`` in verl/utils/tracking.py writes one
  ``{"step": N, "data": {metric: value}}`` per line to ``$VERL_FILE_LOGGER_PATH``, default
  ``<project>/<experiment>.jsonl``);
- TensorBoard: ``tfevents.read``; a torn record at the end is counted like a malformed line.
"""

import csv
import json
import math
import os

from verl_ascend.core.findings import BadInput
from verl_ascend.logs import parse, tfevents, throughput

CONSOLE_SUFFIXES = (".log", ".out", ".txt")
KINDS = ("tensorboard", "jsonl", "csv", "console")  # a folder's choice, best first


class SourceError(BadInput):
    """A run that names no readable file, or files without steps."""


def kind_of(path: str) -> str:
    name = os.path.basename(path)
    if ".tfevents." in name:
        return "tensorboard"
    ext = os.path.splitext(name)[1].lower()
    return {".jsonl": "jsonl", ".csv": "csv"}.get(ext, "console")


def _folder_files(folder: str) -> list:
    found = {kind: [] for kind in KINDS}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            kind = kind_of(path)
            if kind != "console" or name.lower().endswith(CONSOLE_SUFFIXES):
                found[kind].append(path)
    for kind in KINDS:
        if found[kind]:
            return sorted(found[kind], key=lambda p: (os.path.getmtime(p), p))
    raise SourceError(f"{folder}: no TensorBoard event file, *.jsonl, *.csv or console log (*.log, *.out, *.txt) "
                      "in it; point at the run's files or the folder holding them")


def expand(paths) -> list:
    """Files of a run, folders expanded; SourceError for a path that does not exist."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += _folder_files(path)
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise SourceError(f"no such file or folder: {path}")
    return files


def _number(value):
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _read_csv(path, into):
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        rows = csv.reader(fh)
        header = next(rows, None)
        if not header or header[0] != "step":
            into.malformed.append(parse.Malformed(path, 1, "not a `verl-ascend logs --csv` table (no 'step' column first)"))
            return {}
        steps = {}
        for number, row in enumerate(rows, 2):
            try:
                step = int(row[0])
                steps[step] = {k: float(v) for k, v in zip(header[1:], row[1:]) if v != ""}
            except (ValueError, IndexError) as exc:
                into.malformed.append(parse.Malformed(path, number, f"row does not parse: {exc}"))
        return steps


def _read_jsonl(path, into):
    steps = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                step, data = int(record["step"]), record["data"]
            except (ValueError, KeyError, TypeError) as exc:
                into.malformed.append(parse.Malformed(path, number, f"not verl's file-logger record: {exc!r}"[:120]))
                continue
            if step in steps:
                into.duplicates += 1
            steps[step] = {k: v for k, v in ((k, _number(v)) for k, v in data.items()) if v is not None}
    return steps


def _read_tensorboard(path, into):
    steps = {}
    for index, (_, step, values) in enumerate(tfevents.read(path), 1):
        if step is None:  # a torn tail: values is the reason
            into.malformed.append(parse.Malformed(path, index, values))
            break
        steps.setdefault(step, {}).update(values)
    return steps


def _read_console(path, into):
    one = parse.Parsed()
    with open(path, encoding="utf-8", errors="replace") as fh:
        parse.parse_lines(fh, path, one)
    into.malformed += one.malformed
    into.duplicates += one.duplicates
    return one.steps


READERS = {"console": _read_console, "csv": _read_csv, "jsonl": _read_jsonl, "tensorboard": _read_tensorboard}


def load(paths, world_size=None, samples_per_step=None) -> parse.Parsed:
    """Every step of one run, the later file's step replacing an earlier one's; with the throughput columns of
    ``logs``. SourceError when nothing is readable or no file has a step."""
    files = expand(paths)
    parsed = parse.Parsed(files=files)
    for path in files:
        for step, metrics in READERS[kind_of(path)](path, parsed).items():
            if step in parsed.steps:
                parsed.duplicates += 1
                del parsed.steps[step]
            parsed.steps[step] = {k: v for k, v in metrics.items() if not math.isnan(v)}
    parsed.steps = dict(sorted(parsed.steps.items()))
    if not parsed.steps:
        bad = f"; {len(parsed.malformed)} malformed line(s), the first {parsed.malformed[0].path}:" \
              f"{parsed.malformed[0].line}: {parsed.malformed[0].reason}" if parsed.malformed else ""
        raise SourceError(f"no steps in {', '.join(files)}{bad}. Give the driver's console log (verl's "
                          "'step:N - ...' lines), a `logs --csv` table, verl's file-logger .jsonl or TensorBoard events")
    throughput.add_columns(parsed, world_size, samples_per_step)
    return parsed

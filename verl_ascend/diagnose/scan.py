"""Stream log files and folders, keep only the lines the table knows, with when and where they happened.

Memory stays bounded on any input: files are read in blocks of ``BLOCK`` bytes, a block holding none
of the table's keywords is only counted, and in the others only the lines around a keyword are
decoded. At most ``MAX_EVENTS`` matched lines are kept (the rest are counted per family).
"""

import dataclasses
import datetime
import os
import re

from verl_ascend.core import findings

from . import anchors, codes, component, context, table, timeline
from .families import cluster, generic, hccl, training

BLOCK = 4 << 20
MAX_EVENTS = 50_000
LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\[\d{1,2}(?:;\d{1,2})*m")
_YEAR = re.compile(rb"(?<!\d)(20\d\d)-\d\d-\d\d[-T ]\d\d:\d\d:\d\d")
STEP_KEY = table.STEP_KEY
NEAR = 5                      # lines: a message without time or rank borrows them from the next such line of its process
_CODES = re.compile(r"\b(E[A-Z0-9]\d{4}|ERR\d{5})\b")
_ERRNO = re.compile(r"error code is (\d+)")
_TB_SOURCE = re.compile(generic.TRACEBACK_SOURCE)
_PROCESS_KEY = re.compile(r"^\s*\((\w+ pid=\d+)")
_ACL = re.compile(r"\bACL_ERROR_RT_\w+")
_DETAILS = {
    "port": re.compile(r"port\[(\d+)\]|port: (\d+)|:(\d{4,5})\b.*EADDRINUSE|bind to \S*:(\d+) \(errno: 98|connect to \([^,]+, (\d+)\)"),
    "timeout_s": re.compile(r"timeout\[(\d+)\s*s?\]|connect timeout interval \((\d+)s"),
    "late_rank": re.compile(r"remote rank: ?\[(\d+)\]"),
    "waited_ms": re.compile(r"ran for (\d+) milliseconds"),
    "alloc": re.compile(r"Tried to allocate ([\d.]+ ?[KMGT]?i?B)"),
    "collective": re.compile(r"OpType=(\w+)"),
    "seq": re.compile(r"SeqNum=(\d+)"),
    "exit_type": re.compile(r"Worker exit type: (\w+ Worker exit detail: [^.]{0,100})"),
    "missing_key": re.compile(training.MISSING_TENSOR),
    # Ray's node-death line; or the rehearsal's own verdict on a node it killed (rehearse --fault worker-node)
    "dead_node": re.compile(cluster.NODE_MARKED_DEAD + "|" + cluster.OWN_VERDICT),
}


LOOKBACK = 16384              # bytes above an exception line searched for the frame that raised it
_EXCEPTION = re.compile(generic.EXCEPTION)
_FRAME = re.compile(rb'File "([^"]+)", line (\d+), in (\S+)')
_PEERS = [(key, re.compile(p)) for key, p in hccl.PEER_PATTERNS]
_EXCEPTION_TYPE = re.compile(hccl.EXCEPTION_TYPE)


def _raised_at(before: bytes, pid):
    """``file.py:N in func`` of the innermost frame of the traceback just above (same Ray process if prefixed)."""
    frames = list(_FRAME.finditer(before))
    if pid is not None:
        mine = [f for f in frames if f"pid={pid}".encode() in before[before.rfind(b"\n", 0, f.start()) + 1:f.start()]]
        frames = mine or frames
    if not frames:
        return None
    f = frames[-1]
    return f"{f.group(1).decode('utf-8', 'replace')}:{int(f.group(2))} in {f.group(3).decode('utf-8', 'replace')}"


def _peer(text: str) -> dict:
    """The other end a heartbeat / error-CQE line names (``culprit``: the rank that exited or hung)."""
    out = {}
    for key, pattern in _PEERS:
        m = pattern.search(text)
        if m and key not in out:
            out[key] = f"{m.group(1)}/{m.group(2)}"
    m = _EXCEPTION_TYPE.search(text)
    if m:
        out["exception_type"] = m.group(1)
    return out


@dataclasses.dataclass
class Event:
    family: str
    path: str
    line: int
    text: str
    stamp: tuple = None          # context.timestamp(); resolved into ``when`` once the file's year is known
    when: datetime.datetime = None
    where: dict = dataclasses.field(default_factory=dict)
    codes: tuple = ()
    details: dict = dataclasses.field(default_factory=dict)

    def sort_key(self):
        # events with a time first, by time; then the rest in reading order
        return (self.when is None, self.when or datetime.datetime.min, self.path, self.line)


class BadInput(findings.BadInput):
    """A PATH that cannot be read as logs; the message names it and what to pass instead."""


def expand(paths) -> list:
    """Every log file under the given files/folders, in a stable order. Raises BadInput."""
    files = []
    for path in paths:
        if os.path.isfile(path):
            files.append(path)
        elif os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs.sort()
                for name in sorted(names):
                    full = os.path.join(root, name)
                    if (name.endswith(LOG_SUFFIXES) or "." not in name) and os.path.isfile(full):
                        found.append(full)
            if not found:
                raise BadInput(f"{path}: folder holds no log files (*.log, *.out, *.err, *.txt); pass the driver log, "
                               "a Ray session's logs folder (/tmp/ray/session_latest/logs) or CANN's plog folder "
                               "(~/ascend/log/debug/plog)")
            files += found
        elif os.path.exists(path):
            raise BadInput(f"{path}: not a regular file or folder")
        else:
            raise BadInput(f"{path}: no such file or folder")
    for path in files:
        if not os.access(path, os.R_OK):
            raise BadInput(f"{path}: not readable (permissions); copy the logs somewhere readable or run as their owner")
    return files


class Scanner:
    def __init__(self):
        self.rules = [(r, r.compiled(), r.rejected()) for r in table.RULES]
        self.loud_rules = [(r, p, u) for r, p, u in self.rules if r.any_level]
        self.events = []
        self.overflow = {}            # family -> matched lines beyond MAX_EVENTS
        self.evidence = {"rollout": [], "tls": [], "steps": None, "step_line": None, "saved": [], "scratch": []}
        self.pid_where = {}           # pid -> {rank, device, node} learned from matched lines
        self.files = []
        self.skipped = []             # (path, reason)
        self.lines = 0
        self.bytes = 0
        self.year = None              # any full year seen, for year-less stamps of files without one
        self.versions = {}            # component -> version, from the start-up lines that print one
        self.timeline = timeline.Reader(lambda raw: ANSI.sub("", raw.decode("utf-8", "replace")))

    # -- reading ------------------------------------------------------------------------------------
    def scan_file(self, path, progress=None):
        pending = []                  # events whose stamp lacks a year, until the file shows one
        state = {"year": None, "pending": pending, "untimed": [], "before": b"", "open_tb": []}
        base_line = 0
        with open(path, "rb") as fh:
            head = fh.read(8192)
            if b"\x00" in head:
                self.skipped.append((path, "binary file"))
                return
            fh.seek(0)
            self.files.append(path)
            tail = b""
            open_line = False
            while True:
                block = fh.read(BLOCK)
                if not block and not tail:
                    break
                if not block:
                    data, tail = tail, b""
                elif (cut := block.rfind(b"\n") + 1) == 0:    # no line ends in this block: keep reading
                    tail += block
                    if len(tail) < 4 * BLOCK:
                        continue
                    data, tail = tail, b""                    # one huge line: split it here
                else:
                    # the previous block's unfinished line, then this block up to its last line end: one copy
                    # (a concatenation and then a slice copied every block twice)
                    data = b"".join((tail, memoryview(block)[:cut])) if tail else block[:cut]
                    tail = block[cut:]
                newlines = data.count(b"\n")
                self._block(path, data, base_line, state, newlines)
                base_line += newlines  # a line cut by a forced split continues in the next block
                open_line = bool(data) and not data.endswith(b"\n")
                self.bytes += len(data)
                if progress is not None:
                    progress.update(len(data))
        self.lines += base_line + (1 if open_line else 0)
        state["open_tb"] = []     # tracebacks still open at the end of the file stay findings (cut short)
        year = state["year"] or self.year or datetime.datetime.now().year
        for event in pending:
            event.when = context.resolve(event.stamp, year)

    def _block(self, path, data, base_line, state, newlines):
        if state["year"] is None:   # year-less stamps (glog, vLLM) take the file's year
            m = _YEAR.search(data)
            if m:
                state["year"] = self.year = int(m.group(1))
        self.timeline.block(path, data, base_line, state["year"] or self.year, newlines)
        pos = data.rfind(STEP_KEY.encode())
        if pos != -1:
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            text = ANSI.sub("", data[start:len(data) if end == -1 else end].decode("utf-8", "replace"))
            self.evidence["step_line"] = (path, timeline.line_number(data, start, base_line, newlines), text)
        spans = anchors.select(data, table.SCAN_PATTERN, table.SCAN_REGEX, self.bytes)  # in order, one per line
        line_no, counted_to = base_line, 0
        for start, end in spans:
            line_no += data.count(b"\n", counted_to, start)
            counted_to = start
            text = ANSI.sub("", data[start:end].decode("utf-8", "replace")).rstrip("\r")
            state["before"] = data[max(0, start - LOOKBACK):start]   # the traceback above an exception line
            self._line(path, line_no + 1, text, state)

    # -- one candidate line -------------------------------------------------------------------------
    def _line(self, path, line_no, text, state):
        stamp = context.timestamp(text)
        if stamp and stamp[0] is not None:
            state["year"] = self.year = stamp[0]
        self._evidence(path, line_no, text, stamp)
        self._borrow(line_no, text, stamp, state)
        matched = None
        # a warning / info line can only match the few rules written for messages printed at that level
        for rule, pattern, unless in self.loud_rules if context.is_quiet(text) else self.rules:
            if rule.keywords and not any(k in text for k in rule.keywords):
                continue
            if pattern.search(text) and not (unless and unless.search(text)):
                if matched is None or table.FAMILIES[rule.family].order < table.FAMILIES[matched].order:
                    matched = rule.family
        if matched is not None:
            event = self._record(matched, path, line_no, text, stamp, state)
            if event is not None and event.details.get("exception"):
                self._close_tracebacks(event, state)
        elif generic.TRACEBACK_HEADER in text or _TB_SOURCE.search(text):
            self._open_traceback(path, line_no, text, stamp, state)

    # -- tracebacks cut short ---------------------------------------------------------------------------
    def _open_traceback(self, path, line_no, text, stamp, state):
        """A traceback's header or its ``raise`` / ``assert`` source line: a failure unless an exception line of the
        same process closes it (``_close_tracebacks``); a later source line of the same traceback replaces the
        header (the last frame is what was cut)."""
        key = _key(text)
        for event, opened_key in list(state["open_tb"]):
            if opened_key == key and line_no - event.line <= generic.TRACEBACK_WINDOW:
                self._drop(event, state)
        event = self._record(generic.UNRECOGNISED, path, line_no, text, stamp, state)
        if event is not None:
            event.details["exception"] = generic.CUT_SHORT
            # a raise / assert line right under its frame: that frame is where the traceback was cut
            above = state["before"].rstrip(b"\r\n").rsplit(b"\n", 1)[-1]
            raised = _raised_at(above, event.where.get("pid")) if generic.TRACEBACK_HEADER not in text else None
            if raised:
                event.details["raised_at"] = raised
            state["open_tb"].append((event, key))

    def _close_tracebacks(self, event, state):
        key = _key(event.text)
        for opened, opened_key in list(state["open_tb"]):
            if opened_key == key and 0 < event.line - opened.line <= generic.TRACEBACK_WINDOW:
                self._drop(opened, state)

    def _drop(self, event, state):
        state["open_tb"] = [(e, k) for e, k in state["open_tb"] if e is not event]
        try:
            self.events.remove(event)
        except ValueError:
            pass

    def _borrow(self, line_no, text, stamp, state):
        """Give earlier matched lines of the same process that lacked a time / rank this line's."""
        untimed = [(e, n) for e, n in state["untimed"] if line_no - n <= NEAR]
        state["untimed"] = untimed
        if not untimed:
            return
        where = context.where(text)
        self._learn(where)
        for event, _ in untimed:
            if event.where.get("pid") not in (None, where.get("pid")):
                continue
            if event.stamp is None and stamp is not None:
                event.stamp = stamp
                year = stamp[0] or state["year"]
                if year is None:
                    state["pending"].append(event)
                else:
                    event.when = context.resolve(stamp, year)
            for key, value in where.items():
                event.where.setdefault(key, value)

    def _learn(self, where):
        pid = where.get("pid")
        if pid is not None:
            known = self.pid_where.setdefault(pid, {})
            for key in ("rank", "device", "node"):
                if key in where:
                    known.setdefault(key, where[key])

    def _record(self, family, path, line_no, text, stamp, state):
        where = context.where(text)
        if "pid" not in where:
            pid = context.pid_from_path(path)
            if pid is not None:
                where["pid"] = pid
        if "device" not in where:
            device = context.where(path).get("device")
            if device is not None:
                where["device"] = device
        self._learn(where)
        process = context.process(text)
        if process:
            where["process"] = process
        if len(self.events) >= MAX_EVENTS:
            self.overflow[family] = self.overflow.get(family, 0) + 1
            return None
        found = set(_CODES.findall(text)) | set(_ACL.findall(text))
        for n in _ERRNO.findall(text):
            name = table.HCCL_RESULT.get(int(n)) if "HCCL" in text or "hccl" in text else None
            found.add(f"error code {n}" + (f" ({name})" if name else ""))
        explained = codes.find(text)
        details = {}
        for key, pattern in _DETAILS.items():
            m = pattern.search(text)
            value = next((g for g in m.groups() if g is not None), None) if m else None
            if value is not None:  # a pattern whose value is optional (Ray's node-death line without an address)
                details[key] = value
        details.update(_peer(text))
        m = _EXCEPTION.search(text)
        if m:
            details["exception"] = m.group(1)
            raised = _raised_at(state["before"], where.get("pid"))
            if raised:
                details["raised_at"] = raised
        if explained:
            details["explained"] = tuple(explained)
        event = Event(family, path, line_no, text.strip()[:400], stamp, None, where, tuple(sorted(found)), details)
        if stamp is not None:
            year = stamp[0] or state["year"]
            if year is None:
                state["pending"].append(event)
            else:
                event.when = context.resolve(stamp, year)
        if stamp is None or "rank" not in where:
            state["untimed"].append((event, line_no))
        self.events.append(event)
        return event

    def _evidence(self, path, line_no, text, stamp=None):
        m = table.EVIDENCE["tls"].search(text)
        if m:
            value = m.group(1) or m.group(2)
            where = context.where(text)
            where.setdefault("device", context.where(path).get("device"))
            self.evidence["tls"].append((value, path, line_no, text.strip()[:400], context.timestamp(text), where))
        elif table.EVIDENCE["rollout"].search(text) and len(self.evidence["rollout"]) < 100:
            self.evidence["rollout"].append((path, line_no, text.strip()[:400]))
        if timeline.MORE_PROGRESS.search(text):
            self.timeline.progress(path, line_no, text.strip(), context.resolve(stamp, (stamp[0] if stamp else None)
                                                                                or self.year))
        if any(a in text for a in component.VERSION_ANCHORS):
            for name, version in component.versions_in(text):
                self.versions.setdefault(name, version)
        for key in ("saved", "scratch"):
            m = table.EVIDENCE[key].search(text)
            if m and len(self.evidence[key]) < 1000:
                self.evidence[key].append((path, line_no, text.strip()[:400], context.timestamp(text), m.groups()))

    # -- after all files ------------------------------------------------------------------------------
    def finish(self):
        """Fill rank/device/node of each event from what other lines said about its pid; parse the last step line."""
        if self.evidence["step_line"]:
            from ..logs import parse

            path, line_no, text = self.evidence["step_line"]
            try:
                parsed = parse.parse_line(text)
            except ValueError:
                parsed = None
            if parsed:
                self.evidence["steps"] = (path, line_no, parsed[0], parsed[1])
        for event in self.events:
            known = self.pid_where.get(event.where.get("pid"))
            if known:
                for key, value in known.items():
                    event.where.setdefault(key, value)
            if event.when is None and event.stamp is not None:
                event.when = context.resolve(event.stamp, self.year or datetime.datetime.now().year)
        return self


def _key(text: str):
    """The process a line belongs to, as Ray's prefix names it (``WorkerDict pid=4242``); None without a prefix."""
    m = _PROCESS_KEY.match(text)
    return m.group(1) if m else None


def scan(paths, progress_factory=None) -> Scanner:
    files = expand(paths)
    scanner = Scanner()
    total = sum(os.path.getsize(f) for f in files)
    bar = progress_factory(total, "diagnose") if progress_factory else None
    try:
        for path in files:
            try:
                scanner.scan_file(path, bar)
            except OSError as exc:
                raise BadInput(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    finally:
        if bar is not None:
            bar.close()
    return scanner.finish()

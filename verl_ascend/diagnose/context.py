"""When and where a log line happened: its timestamp, rank, device, process and node.

Timestamp shapes seen in verl-on-Ascend logs (each has a test in tests/unit/test_diagnose.py):
- CANN plog and error codes: ``2025-04-24-14:27:35.897.143`` (ms.us) or ``2025-04-24-14:27:35``
- Python logging / Ray: ``2025-04-24 14:27:35,897`` or ``2025-04-24T14:27:35.897``
- glog-style torch / torch_npu: ``[E424 14:27:35.897143221 compiler_depend.ts:574]`` (month not zero-padded, no year)
- vLLM: ``ERROR 04-24 14:27:35 [core.py:708]`` (no year)
A year-less stamp takes the year of the nearest full one in the same file (else any file, else now).

Where: Ray's ``(WorkerDict pid=835, ip=172.26.143.83)`` prefix (pid, node), torch's ``[rank20]:``,
torch_npu's ``(PID:540014, Device:4, RankID:20)``, CANN's ``[PID: 540014]`` and ``HCCL(540014,python)``,
OOM's ``(NPU 3; ...)``, EZ9999's ``device(chipId:7``.
"""

import datetime
import re

_FULL = re.compile(
    r"(?<!\d)(20\d\d)-(\d\d)-(\d\d)[-T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6})(?:\.(\d{3}))?)?")
_GLOG = re.compile(r"\[[EWIF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9})")
_VLLM = re.compile(r"\b(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")

_RANK = (
    re.compile(r"\[rank(\d+)\]:"),
    re.compile(r"RankID:(\d+)"),
    re.compile(r"\[(?:PG \S+ )?Rank (\d+)\]"),
    re.compile(r"\brank=(\d+)\b"),
)
_DEVICE = (
    re.compile(r"Device:(\d+)"),
    re.compile(r"\(NPU (\d+);"),
    re.compile(r"device\(chipId:(\d+)"),
    re.compile(r"\bdev_id:(\d+)"),
    re.compile(r"[\\/]device-(\d+)[\\/]"),
)
_PID = (
    re.compile(r"\bpid=(\d+)"),
    re.compile(r"PID: ?(\d+)"),
    re.compile(r"\b(?:HCCL|HCCP|RUNTIME|ASCENDCL|GE|TBE)\((\d+),"),
)
_IP = re.compile(r"\bip=(\d{1,3}(?:\.\d{1,3}){3})")
# CANN's plog-<pid>_<time>.log, device-<pid>_<time>.log; Ray's worker-<id>-<job>-<pid>.out/.err, python-core-worker-<id>_<pid>.log
_PATH_PID = re.compile(r"(?:plog|device)-(\d+)_\d+\.log$|worker-[0-9a-f]+-[0-9a-f]+-(\d+)\.(?:out|err|log)$|"
                       r"core-worker-[0-9a-f]+_(\d+)\.log$")

# Level words that make a line a warning or information, not a failure (HCCL plog, glog, logging, vLLM).
_QUIET = re.compile(r"^\s*(?:\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s*)*(?:\S+:\s*)?"
                    r"(?:\[(?:W|I|D|WARNING|INFO|DEBUG|EVENT)\]|\[[WI]\d{0,4}\s|"
                    r"(?:WARNING|INFO|DEBUG)\b|\S*Warning:)")
_QUIET_ANYWHERE = re.compile(r"\b(?:UserWarning|RuntimeWarning|FutureWarning|DeprecationWarning)\b|"
                             r"\d\d:\d\d:\d\d[,.]\d+\s+(?:WARNING|INFO|DEBUG)\b|"  # Ray: "<time>\tWARNING worker.py"
                             r" - (?:WARNING|INFO|DEBUG) - |\[(?:WARNING|INFO|DEBUG)\]|\b(?:WARNING|INFO|DEBUG) \d\d-\d\d ")


def is_quiet(line: str) -> bool:
    """A warning / info line: never a failure by itself (retries and notices are logged this way)."""
    return bool(_QUIET.match(line) or _QUIET_ANYWHERE.search(line))


def timestamp(line: str):
    """(year or None, month, day, hour, minute, second, microsecond) or None."""
    m = _FULL.search(line)
    if m:
        y, mo, d, h, mi, s, frac, us = m.groups()
        micro = 0
        if frac:
            micro = int(frac.ljust(6, "0")[:6]) if not us else int(frac) * 1000 + int(us)
        return (int(y), int(mo), int(d), int(h), int(mi), int(s), micro)
    m = _GLOG.search(line)
    if m:
        mo, d, h, mi, s, frac = m.groups()
        return (None, int(mo), int(d), int(h), int(mi), int(s), int(frac.ljust(6, "0")[:6]))
    m = _VLLM.search(line)
    if m:
        mo, d, h, mi, s = m.groups()
        return (None, int(mo), int(d), int(h), int(mi), int(s), 0)
    return None


def resolve(stamp, year):
    """A datetime for a stamp, filling a missing year; None if the stamp is not a valid date."""
    if stamp is None:
        return None
    y = stamp[0] if stamp[0] is not None else year
    try:
        return datetime.datetime(y, *stamp[1:])
    except (TypeError, ValueError):
        return None


def _first(patterns, line):
    for pattern in patterns:
        m = pattern.search(line)
        if m and m.group(1) != "-1":
            return int(m.group(1))
    return None


def where(line: str) -> dict:
    """rank / device / pid / node named on the line itself (absent keys: not named)."""
    found = {}
    rank = _first(_RANK, line)
    if rank is not None:
        found["rank"] = rank
    device = _first(_DEVICE, line)
    if device is not None:
        found["device"] = device
    pid = _first(_PID, line)
    if pid is not None:
        found["pid"] = pid
    m = _IP.search(line)
    if m:
        found["node"] = m.group(1)
    return found


_PROCESS = re.compile(r"^\s*\((\w+) pid=\d+")


def process(line: str):
    """The process name of Ray's ``(TaskRunnerV1 pid=190)`` prefix, or None."""
    m = _PROCESS.match(line)
    return m.group(1) if m else None


def pid_from_path(path: str):
    m = _PATH_PID.search(path)
    return int(next(g for g in m.groups() if g)) if m else None

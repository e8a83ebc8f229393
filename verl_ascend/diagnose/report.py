"""Group matched lines into findings (one per family), add what the numbers say; JSON here, text in :mod:`.render`.

Each family seen is one :class:`~verl_ascend.core.findings.Finding`: ``subject`` and ``code`` the family id,
``message`` its title, ``fix``, ``sources`` (the public threads), ``where`` the first line by time, and in
``details`` the rest: codes, counts, ranks, nodes, the values read from the lines, the cause, the notes,
the culprit. A failure found in a log is a ``warning`` (the run is over; exit 1, as a report of problems).
Only the lines the run did not survive become findings (``timeline``): lines it went on after are ``handled``,
lines after its end ``shutdown_noise``; both are listed (``--verbose``) and counted, never findings.
"""

import collections
import dataclasses
import datetime

from verl_ascend.core import findings as F

from . import codes as code_table
from . import component, table, timeline

GENERIC = "hccl_call_failed"          # shown only when no specific family explains the run
UNRECOGNISED = table.UNRECOGNISED     # shown when nothing else explains the run, or when it failed before it
TIMEOUTS = ("hccl_exec_timeout", "stream_sync_timeout")
DEFAULT_CONNECT_TIMEOUT = 120         # s, CANN's default for HCCL_CONNECT_TIMEOUT (quoted in its EI0006 text)
ECHO_WINDOW = datetime.timedelta(seconds=1)  # an unexplained line this close before a known one is part of it
LONG_GEN_SHARE = 0.5                  # generation over half of the step time: a long-tail step
MAX_NOTED = 50                        # handled / shutdown lines kept in the report (all are counted)
# the value a family's headline names, read from its first line: what to look for is in the headline itself
HEADLINE_VALUE = {"ckpt_missing_tensor": "missing_key", "ray_node_died": "dead_node"}


def _where(event) -> dict:
    out = {"time": event.when.isoformat(sep=" ", timespec="milliseconds") if event.when else None,
           "file": event.path, "line": event.line}
    for key in ("process", "rank", "node", "device", "pid"):
        if key in event.where and event.where[key] is not None:
            out[key] = event.where[key]
    if event.details.get("raised_at"):
        out["raised_at"] = event.details["raised_at"]
    out["text"] = event.text
    return out


def _culprit(events):
    """The rank the heartbeat named (``IP/device``), most reported first: the process to look at, not the reporter."""
    named = collections.Counter(e.details["culprit"] for e in events if e.details.get("culprit"))
    if not named:
        return None
    value, count = named.most_common(1)[0]
    node, _, device = value.rpartition("/")
    return {"node": node, "device": int(device), "reports": count}


def _codes(events) -> list:
    """Every code the family's lines name, each with its meaning, handling and page where the table has them
    (codes.py), in the order first seen; the display form of HCCL's result codes is kept."""
    seen = {}
    for e in events:
        for code in e.details.get("explained", ()):
            seen.setdefault(code, code_table.explain(code))
        for shown in e.codes:  # torch_npu's ERRnnnnn, ACL_ERROR_RT names, HCCL's "error code N (NAME)"
            key = shown
            m = shown.startswith("error code ") and shown.split()[2]
            if m and m.isdigit() and ("HCCL " + m) in seen:
                seen["HCCL " + m]["code"] = shown
                continue
            if m and m.isdigit() and m in seen:
                continue
            if shown.startswith("ACL_ERROR") and str(code_table.BY_NAME.get(shown)) in seen:
                continue
            seen.setdefault(key, code_table.explain(shown))
    return list(seen.values())


def _component(family_id, events, versions) -> dict:
    """The component of the family's first line: the exception behind it where the line is an [ERROR] line or a
    code (its frames name the package), else the line itself."""
    first = events[0]
    raised = first if first.details.get("raised_at") else next(
        (e for e in events if e.details.get("raised_at") and e.details.get("exception") != "traceback without its "
         "exception line"), first)
    return component.describe(raised.text if raised is not first else first.text, raised.details.get("raised_at"),
                              family_id, versions)


def _finding(family_id, events, overflow=0, notes=(), versions=None) -> F.Finding:
    family = table.FAMILIES[family_id]
    events = sorted(events, key=lambda e: e.sort_key())
    first = events[0]
    timed = [e.when for e in events if e.when]
    codes = sorted({c for e in events for c in e.codes})
    ranks = sorted({e.where["rank"] for e in events if e.where.get("rank") is not None})
    nodes = sorted({e.where["node"] for e in events if e.where.get("node")})
    details = collections.defaultdict(set)
    for e in events:
        for key, value in e.details.items():
            if key != "explained":
                details[key].add(value)
    spread = (max(timed) - min(timed)).total_seconds() if len(timed) > 1 else 0.0
    notes = list(notes) + _notes(family_id, details, spread, events)
    exception_line = None
    if family_id == UNRECOGNISED and not first.details.get("exception"):
        # the first line is an [ERROR] line or a code: quote the exception itself (Type: message) and where it was raised
        raised = next((e for e in events if e.details.get("exception")), None)
        if raised is not None:
            exception_line = _where(raised)
            notes.insert(0, f"the exception: {raised.text[:240]}"
                         + (f" (raised at {raised.details['raised_at']})" if raised.details.get("raised_at") else "")
                         + f" — {raised.path}:{raised.line}")
    facts = {
        "family": family_id, "retry_class": family.retry_class, "retry_reason": family.retry_reason,
        "component": _component(family_id, events, versions or {}),
        "codes": _codes(events), "code_names": codes, "lines": len(events) + overflow, "files": len({e.path for e in events}),
        "ranks": ranks, "nodes": nodes,
        "last_time": max(timed).isoformat(sep=" ", timespec="milliseconds") if timed else None,
        "spread_s": round(spread, 3),
        "values": {k: sorted(v, key=lambda x: (len(x), x)) for k, v in details.items()},
        "cause": family.cause, "notes": notes, "culprit": _culprit(events),
    }
    if exception_line:
        facts["exception_line"] = exception_line
    return F.Finding(F.WARNING, family_id, family.title, family.fix, code=family_id, where=_where(first),
                     sources=family.sources, details=facts)


def _notes(family_id, details, spread, events) -> list:
    notes = []
    if family_id == "hccl_connect_timeout":
        timeout = max((int(t) for t in details.get("timeout_s", ())), default=DEFAULT_CONNECT_TIMEOUT)
        if spread > timeout:
            notes.append(f"reports span {spread:.0f} s, more than the {timeout} s link-setup timeout: ranks reached "
                         "communicator creation at different times (a late rank) — raise HCCL_CONNECT_TIMEOUT")
        else:
            notes.append(f"all reports within {spread:.0f} s (timeout {timeout} s): the ranks arrived together, so "
                         "the link itself failed — host NIC (HCCL_SOCKET_IFNAME), device network or TLS")
    if family_id == "hccl_exec_timeout" and details.get("late_rank"):
        notes.append("late rank(s) named by the waiting ranks: " + ", ".join(sorted(details["late_rank"], key=int))
                     + " — look at their logs first")
    if family_id == "hccl_exec_timeout" and details.get("waited_ms"):
        waited = max(int(v) for v in details["waited_ms"]) / 1000
        notes.append(f"the collective had waited {waited:.0f} s when the watchdog stopped it")
    if details.get("collective"):
        notes.append("collective(s) in the reports: " + ", ".join(sorted(details["collective"])) + " at sequence "
                     "number(s) " + ", ".join(sorted(details.get("seq", ()), key=int)) + " — a rank at another number, "
                     "or missing from the reports, is the one the others waited for")
    if details.get("exit_type"):
        notes.append("Ray's exit verdict: " + "; ".join(sorted(details["exit_type"])))
    if family_id == "port_in_use" and details.get("port"):
        notes.append("port(s) in use: " + ", ".join(sorted(details["port"], key=int)))
    if details.get("culprit"):
        notes.append("culprit named by the cluster heartbeat (IP/device): " + ", ".join(sorted(details["culprit"]))
                     + (" — " + ", ".join(sorted(details["exception_type"])) if details.get("exception_type") else "")
                     + "; the rank that printed the message only waited for it")
    if details.get("peer"):
        notes.append("other end of the failed link (server/device): " + ", ".join(sorted(details["peer"])))
    if family_id == UNRECOGNISED and details.get("exception"):
        notes.append("exception(s): " + ", ".join(sorted(details["exception"])))
    if details.get("missing_key"):
        notes.append("tensor(s) the model asked for that the checkpoint lacks: " + ", ".join(sorted(details["missing_key"])))
    if details.get("saved_before"):
        notes.append("the checkpoint an earlier run of these logs saved: " + ", ".join(sorted(details["saved_before"])))
    if family_id == "ray_node_died" and details.get("dead_node"):
        notes.append("node(s) Ray marked dead (address): " + ", ".join(sorted(details["dead_node"])))
    if family_id == "npu_oom" and details.get("alloc"):
        notes.append("allocation(s) that failed: " + ", ".join(sorted(details["alloc"])))
    return notes


def _tls_events(evidence):
    """Events for the devices whose TLS switch differs from the others, and a note with the counts."""
    values = collections.Counter(v for v, *_ in evidence)
    if len(values) < 2:
        return [], None
    from . import context
    from .scan import Event

    minority = min(values, key=lambda v: (values[v], v))
    events = []
    for value, path, line, text, stamp, where in evidence:
        if value == minority:
            event = Event("tls_mismatch", path, line, text, stamp, None, {k: v for k, v in where.items() if v is not None})
            event.when = context.resolve(stamp, stamp[0] if stamp else None)
            events.append(event)
    note = ("TLS switch values seen: " + ", ".join(f"{v} on {n} device line(s)" for v, n in sorted(values.items()))
            + f"; the devices with the less common value {minority} are listed")
    return events, note


def _scratch_events(evidence):
    """A run that started from scratch after another run of these logs saved a checkpoint into the folder it saves
    into itself: it did not see that checkpoint (verl reads the tracker on the trainer's node). Placed by time: the
    earlier save's stamp before the start's."""
    from . import context
    from .scan import Event

    def when_of(stamp):
        return context.resolve(stamp, stamp[0]) if stamp else None

    events = []
    for path, line, text, stamp, _ in evidence["scratch"]:
        when = when_of(stamp)
        # the folder this run saves into (its own later saves): an earlier run's save there is what it missed
        folder = next((g[0] for p, n, _, _, g in evidence["saved"] if p == path and n > line), None)
        saves = [f"{groups[0]}/global_step_{groups[1]} ({s_path}:{s_line})"
                 for s_path, s_line, _, s_stamp, groups in evidence["saved"]
                 if s_path != path and groups[0] == folder and when and when_of(s_stamp) and when_of(s_stamp) < when]
        if saves:
            event = Event("ckpt_not_seen_on_resume", path, line, text, stamp, None, {})
            event.when = when
            event.details["saved_before"] = saves[-1]
            events.append(event)
    return events


def _long_tail(scanner, findings, fatal) -> list:
    timeouts = [f for f in findings if f.code in TIMEOUTS]
    if not timeouts:
        return []
    why = []
    if scanner.evidence["rollout"]:
        path, line, text = scanner.evidence["rollout"][0]
        why.append(f"a rollout was in progress ({path}:{line}: {text[:160]})")
    steps = scanner.evidence["steps"]
    if steps:
        path, line, step, m = steps
        gen, total = m.get("timing_s/gen"), m.get("timing_s/step")
        if gen and total and gen / total > LONG_GEN_SHARE:
            clip = m.get("response_length/clip_ratio")
            why.append(f"step {step} spent {gen:.0f} of {total:.0f} s generating"
                       + (f", {clip:.1%} of responses hit max length" if clip else ""))
    if not why:
        return []
    events = [e for e in fatal if e.family in TIMEOUTS]
    return [_finding("rollout_long_tail", events, notes=["evidence: " + "; ".join(why)],
                     versions=getattr(scanner, "versions", {}))]


@dataclasses.dataclass
class Diagnosis:
    files: int
    lines: int
    bytes: int
    skipped: list            # [{file, reason}]: paths that are not text logs
    first_failure: dict      # the earliest failing line by time (its place, family, culprit), or None
    findings: list           # Finding records, causes before symptoms
    generic_hccl_lines: int  # generic "HCCL call failed" lines folded into the findings
    unrecognised_lines: int  # unexplained failure lines counted as the findings' echo (not earlier than them by 1 s)
    runs: list = ()          # per file that made progress: finished, last step, last progress / end mark
    handled: list = ()       # error lines the run went on after (notes; at most MAX_NOTED), each with its reason
    shutdown_noise: list = ()  # error lines printed after the run's end (at most MAX_NOTED)
    handled_lines: int = 0
    shutdown_lines: int = 0

    @property
    def exit_code(self) -> int:
        return F.exit_code(self.findings)

    def to_json(self) -> str:
        facts = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "findings"}
        return F.to_json("diagnose", self.findings, **facts)

    def text(self) -> str:
        from .render import render

        return render(self)


def _echo_window(family: str) -> datetime.timedelta:
    return ECHO_WINDOW + datetime.timedelta(seconds=table.FAMILIES[family].lag)


def _order(f) -> tuple:
    return table.FAMILIES[f.code].order, f.where["time"] is None, f.where["time"] or ""


def _noted(event, reason) -> dict:
    return dict(_where(event), family=event.family, reason=reason)


def build(scanner) -> Diagnosis:
    tls_events, tls_note = _tls_events(scanner.evidence["tls"])
    scratch = _scratch_events(scanner.evidence)
    runs = scanner.timeline.runs
    verdicts = timeline.judge_all(scanner.events + tls_events, runs)
    # a start from scratch is not an error the run goes on after: the run that follows it is the failure
    verdicts.update({id(e): (timeline.FATAL, "") for e in scratch})
    tls_events += scratch
    kept = {timeline.HANDLED: [], timeline.SHUTDOWN: []}
    by_family = collections.defaultdict(list)
    for event in scanner.events + tls_events:
        verdict, reason = verdicts[id(event)]
        if verdict == timeline.FATAL:
            by_family[event.family].append(event)
        elif len(kept[verdict]) < MAX_NOTED:
            kept[verdict].append(_noted(event, reason))
    counted = collections.Counter(v for v, _ in verdicts.values())
    versions = getattr(scanner, "versions", {})
    findings = [_finding(f, evs, scanner.overflow.get(f, 0), notes=[tls_note] if f == "tls_mismatch" and tls_note else (),
                         versions=versions)
                for f, evs in by_family.items() if evs]
    fatal = [e for evs in by_family.values() for e in evs]
    findings += _long_tail(scanner, findings, fatal)
    generic_lines = 0
    if any(f.code != GENERIC for f in findings):
        generic_lines = sum(f.details["lines"] for f in findings if f.code == GENERIC)
        findings = [f for f in findings if f.code != GENERIC]
    unrecognised_lines = 0
    known = [min(evs, key=lambda e: e.sort_key()) for f, evs in by_family.items() if evs and f not in (UNRECOGNISED, GENERIC)]
    if known and by_family.get(UNRECOGNISED):
        # an unexplained failure is kept only if it came first: then it is the cause and the known ones its echo
        # (by more than the 1 s resolution of torch_npu's "[ERROR] <time>" header, printed with the same failure)
        # or by more than the family's own lag (a node's death is printed only once Ray's health check timed out)
        mine = min(by_family[UNRECOGNISED], key=lambda e: e.sort_key())
        if mine.when is None or not all(k.when and mine.when + _echo_window(k.family) <= k.when for k in known):
            unrecognised_lines = sum(f.details["lines"] for f in findings if f.code == UNRECOGNISED)
            findings = [f for f in findings if f.code != UNRECOGNISED]
    findings.sort(key=_order)
    first = None
    candidates = [e for e in fatal if (e.family != GENERIC or not generic_lines)
                  and (e.family != UNRECOGNISED or not unrecognised_lines)]
    if candidates:
        # by time; at the same time (a message and the header it borrowed its time from) the cause before the symptom
        earliest = min(candidates, key=lambda e: (e.when is None, e.when or datetime.datetime.min,
                                                  table.FAMILIES[e.family].order, e.path, e.line))
        first = dict(_where(earliest), family=earliest.family)
        named = earliest.details.get(HEADLINE_VALUE.get(earliest.family))
        if named:
            first["names"] = named
        culprit = next((f.details["culprit"] for f in findings if f.details.get("culprit")), None)
        if culprit:
            first["culprit"] = culprit
        family = table.FAMILIES[earliest.family]
        first["retry_class"], first["retry_reason"] = family.retry_class, family.retry_reason
        owner = next((f.details["component"] for f in findings if f.code == earliest.family), None)
        if owner:
            first["component"] = owner
    return Diagnosis(len(scanner.files), scanner.lines, scanner.bytes,
                     [{"file": p, "reason": r} for p, r in scanner.skipped], first, findings, generic_lines,
                     unrecognised_lines, timeline.summary(runs), kept[timeline.HANDLED], kept[timeline.SHUTDOWN],
                     counted[timeline.HANDLED], counted[timeline.SHUTDOWN])


def run(paths, as_json: bool = False, verbose: bool = False) -> int:
    """Scan, judge, print; 0 no failure found, 1 failures found. Bad input raises ``scan.BadInput``."""
    from verl_ascend.core import progress

    from . import scan

    scanner = scan.scan(paths, None if as_json else progress.bytes_bar)
    if not scanner.files:
        raise scan.BadInput("nothing to read: " + "; ".join(f"{p}: {r}" for p, r in scanner.skipped)
                            + ". Pass text logs (driver log, Ray worker logs, CANN plog).")
    result = build(scanner)
    from .render import render

    print(result.to_json() if as_json else render(result, verbose))
    return result.exit_code

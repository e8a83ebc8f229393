"""The text report of a diagnosis (:class:`.report.Diagnosis`): the runs, the first failure, each finding with its
codes, cause, retry class, component and fix. ``--json`` is ``Diagnosis.to_json`` in :mod:`.report`."""


def _place(w) -> str:
    parts = [f"{k} {w[k]}" for k in ("process", "rank", "device", "node", "pid") if k in w]
    return ", ".join(parts) or "rank unknown"


def _run_lines(result, verbose: bool) -> list:
    """What the runs did (finished or where they stopped), and the error lines judged not to be the failure."""
    lines = []
    for run in result.runs:
        mark = run.get("end") if run["finished"] else run.get("last_progress")
        step = f" after step {run['last_step']}" if "last_step" in run else ""
        state = "reached its end" if run["finished"] else "stopped"
        lines.append(f"run {run['file']}: {state}{step} ({mark['file']}:{mark['line']}: {mark['text'][:100]})")
    if result.handled_lines or result.shutdown_lines:
        if not verbose:
            lines.append(f"({result.handled_lines} error line(s) the run went on after, {result.shutdown_lines} "
                         "after its end (shutdown noise): not the failure; --verbose lists them)")
        for label, noted, count in (("handled", result.handled, result.handled_lines),
                                    ("shutdown noise", result.shutdown_noise, result.shutdown_lines)):
            if verbose and count:
                lines.append(f"{label}: {count} line(s)" + (f", first {len(noted)} shown" if count > len(noted) else ""))
                for w in noted:
                    lines.append(f"    {w['file']}:{w['line']} ({w['family']}; {w['reason']})")
                    lines.append(f"        {w['text'][:200]}")
    return lines


def _code_line(c: dict) -> str:
    text = c["code"] + (f" {c['name']}" if c.get("name") and c["name"] not in c["code"] else "")
    if c.get("meaning"):
        text += f": {c['meaning']}"
    if c.get("handling"):
        text += f"; handling: {c['handling']}"
    if c.get("source"):
        text += f" ({c['source']})"
    return text


def _component_line(c: dict) -> str:
    text = c["name"] + (f" {c['version']}" if c.get("version") else "") + f" ({c['why']})"
    if c.get("tracker"):
        text += f"; tracker {c['tracker']}"
    if c.get("search"):
        text += f", search for: {c['search']!r}"
    return text


def render(result, verbose: bool = False) -> str:
    lines = []
    n = len(result.findings)
    scope = f"{result.files} file(s), {result.lines:,} lines"
    if not n:
        lines.append(f"no known failure in {scope}")
        lines += _run_lines(result, verbose)
        for s in result.skipped:
            lines.append(f"skipped {s['file']}: {s['reason']}")
        return "\n".join(lines)
    lines.append(f"{n} finding(s) in {scope}")
    lines += _run_lines(result, verbose)
    first = result.first_failure
    if first:
        names = f": {first['names']}" if first.get("names") else ""
        lines.append(f"first failure: {first['time'] or 'time unknown'}, {_place(first)} "
                     f"({first['family']}{names}) at {first['file']}:{first['line']}")
        if first.get("culprit"):
            lines.append(f"culprit: node {first['culprit']['node']}, device {first['culprit']['device']} "
                         "(the rank the others waited for; read its log first)")
        if first.get("retry_class"):
            lines.append(f"retry: {first['retry_class']} ({first['retry_reason']})")
    for i, f in enumerate(result.findings, 1):
        lines.append("")
        lines.append(f"[{i}] {f.message} ({f.code})")
        d = f.details
        for c in d["codes"]:
            lines.append("    code:   " + _code_line(c))
        span = f"{f.where['time']} .. {d['last_time']}" if d["last_time"] else "no timestamps"
        ranks = d["ranks"]
        shown = ", ".join(map(str, ranks[:16])) + (f", ... ({len(ranks)} ranks)" if len(ranks) > 16 else "")
        lines.append(f"    seen:   {d['lines']} line(s) in {d['files']} file(s); ranks [{shown}]"
                     + (f"; nodes {', '.join(d['nodes'])}" if d["nodes"] else "") + f"; {span}")
        w = f.where
        lines.append(f"    first:  {w['time'] or 'time unknown'}, {_place(w)} — {w['file']}:{w['line']}")
        lines.append(f"            {w['text'][:240]}")
        if w.get("raised_at"):
            lines.append(f"    raised: {w['raised_at']}")
        if d.get("culprit"):
            lines.append(f"    culprit: node {d['culprit']['node']}, device {d['culprit']['device']} "
                         f"(named in {d['culprit']['reports']} report(s))")
        lines.append(f"    cause:  {d['cause']}")
        lines.append(f"    retry:  {d['retry_class']} — {d['retry_reason']}")
        if d.get("component"):
            lines.append("    whose:  " + _component_line(d["component"]))
        for note in d["notes"]:
            lines.append(f"    note:   {note}")
        lines.append(f"    fix:    {f.fix}")
        lines.append(f"    source: {' '.join(f.sources)}")
    if result.generic_hccl_lines:
        lines.append("")
        lines.append(f"({result.generic_hccl_lines} generic 'HCCL call failed' line(s) are the echo of the findings above)")
    if result.unrecognised_lines:
        # not "after": Ray prints its wrapper (RayTaskError(...)) above the error it carries, without a time
        lines.append(f"({result.unrecognised_lines} other failure line(s) are the echo of the findings above: printed "
                     "with them or after them)")
    for s in result.skipped:
        lines.append(f"skipped {s['file']}: {s['reason']}")
    return "\n".join(lines)

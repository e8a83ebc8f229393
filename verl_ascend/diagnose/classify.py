"""``classify``: a run's logs -> did it fail, and may a restart help. The one call ``supervise`` makes.

    from verl_ascend.diagnose import classify
    verdict = classify(["driver.log", "/tmp/ray/session_latest/logs"])   # or classify(text=lines_of_the_console)
    if verdict.failed and verdict.retry_class == "transient": ...

It runs the same scan and judgement as ``verl-ascend diagnose`` and answers for the first failure (the headline):
its family, its retry class (``transient`` / ``config`` / ``resource`` / ``environment`` / ``unknown``, see
``families/retry.py``) with the reason, the component that raised it, the codes it printed; the whole
:class:`~verl_ascend.diagnose.report.Diagnosis` is there too (``.diagnosis``). A log with no failure gives
``failed=False`` and no class. Bad input raises ``scan.BadInput`` (a missing path, a folder without logs).
"""

import dataclasses
import os
import tempfile


@dataclasses.dataclass(frozen=True)
class Verdict:
    failed: bool               # the logs show a failure the run did not survive (diagnose's exit 1)
    family: str = None         # the first failure's family id (e.g. "hccl_exec_timeout", "unrecognised_failure")
    retry_class: str = None    # transient | config | resource | environment | unknown
    reason: str = ""           # why that class: what about this family decides whether a restart can help
    component: dict = None     # {name, why, version?, tracker?, search?, search_url?} of the first failure
    codes: tuple = ()          # the first failure's codes, each {code, name?, meaning?, handling?, source?}
    first_failure: dict = None  # its place: time, file, line, rank, node, pid, process, text
    diagnosis: object = None   # the full report.Diagnosis (findings, runs, handled and shutdown lines)


def classify(paths=(), *, text=None) -> Verdict:
    """The verdict on a run's logs: ``paths`` (a file or folder, or a list of them) and/or ``text`` (the log as one
    string or an iterable of lines, e.g. the console captured so far)."""
    from . import report, scan

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    tmp = None
    try:
        if text is not None:
            lines = text if isinstance(text, str) else "\n".join(line.rstrip("\n") for line in text) + "\n"
            fd, tmp = tempfile.mkstemp(prefix="verl-ascend-classify-", suffix=".log")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(lines)
            paths.append(tmp)
        if not paths:
            raise scan.BadInput("classify: no logs given (paths or text)")
        result = report.build(scan.scan(paths))
    finally:
        if tmp:
            os.unlink(tmp)
    first = result.first_failure
    if not result.findings or first is None:
        return Verdict(failed=bool(result.findings), diagnosis=result)
    finding = next((f for f in result.findings if f.code == first["family"]), result.findings[0])
    return Verdict(True, first["family"], first.get("retry_class"), first.get("retry_reason", ""),
                   first.get("component") or finding.details.get("component"), tuple(finding.details.get("codes", ())),
                   first, result)

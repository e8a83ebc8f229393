"""One finding record, one way to show a list of them, one exit-code policy, one JSON envelope, for every command.

``check``, ``doctor``, ``ckpt``, ``diagnose`` and ``logs`` report :class:`Finding` objects; ``status`` and
``patches check`` judge their own reports into findings. Every ``--json`` is :func:`to_json`'s envelope. Exit codes: 0 nothing to
report; 1 warnings or problems found (the job may still run; look); 2 errors found (what was checked
-- a recipe, a checkpoint, this node -- will fail) or bad input, decided before any work; 130 after
Ctrl-C (``cli.main``, which also turns :class:`BadInput` into 2). A command's header lines (the recipe,
the host, the checkpoint's roles) are its own; the findings block (:func:`lines`) and the result line
(:func:`verdict`) are these.
"""

import dataclasses
import json


class BadInput(Exception):
    """Bad input, found before any work: ``cli.main`` prints ``verl-ascend COMMAND: <message>`` and exits 2.
    A feature's own input error subclasses it, so no command catches it for itself."""


ERROR = "error"      # what was checked will fail
WARNING = "warning"  # may work; look
INFO = "info"        # a fact worth showing
OK = "ok"            # checked and fine (doctor lists what passed)
SKIP = "skip"        # could not be checked here (no NPU, tool missing, ...): says why, never a pass
SEVERITIES = (ERROR, WARNING, INFO, OK, SKIP)
_MARK = {ERROR: "ERROR", WARNING: "WARN ", INFO: "info ", OK: "ok   ", SKIP: "skip "}


@dataclasses.dataclass
class Finding:
    severity: str   # one of SEVERITIES
    subject: str    # what it is about: a check rule, a doctor check id, a checkpoint file
    message: str    # what was seen, with the values
    fix: str = ""   # what to do; empty when there is nothing to do
    keys: tuple = ()  # config keys involved (check)
    code: str = ""  # stable name of the kind of finding, for tools reading --json (ckpt sync)
    where: dict = dataclasses.field(default_factory=dict)  # where it was seen: file, line, time, rank, step, ...
    sources: tuple = ()  # public threads / documents the cause and fix come from (diagnose)
    details: dict = dataclasses.field(default_factory=dict)  # what else the command measured (diagnose's counts)

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")
        # lists read back from JSON compare equal to the original
        self.keys, self.sources = tuple(self.keys), tuple(self.sources)

    def as_dict(self) -> dict:
        """The JSON form, the same in every command; ``Finding(**d)`` reads it back (``ckpt sync`` reads a
        node's ``ckpt check --json`` so)."""
        return {**dataclasses.asdict(self), "keys": list(self.keys), "sources": list(self.sources)}


def finding(subject: str, severity: str, keys, message: str, fix: str = "", sources=()) -> Finding:
    """A finding in the argument order of ``check``'s rules: the rule and severity, then the config keys."""
    return Finding(severity, subject, message, fix, keys=keys, sources=sources)


def exit_code(findings) -> int:
    """2 if any finding is an error, 1 if any is a warning, else 0."""
    seen = {f.severity for f in findings}
    if ERROR in seen:
        return 2
    return 1 if WARNING in seen else 0


def lines(findings, indent: str = "") -> list:
    """``<MARK> <subject>: <message> [keys]``, then ``fix: ...`` indented where there is something to do."""
    out = []
    for f in findings:
        keys = f" [{', '.join(f.keys)}]" if f.keys else ""
        out.append(f"{indent}{_MARK[f.severity]} {f.subject}: {f.message}{keys}")
        if f.fix and f.severity not in (INFO, OK):
            out.append(f"{indent}       fix: {f.fix}")
    return out


def counts(findings) -> dict:
    return {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}


def summary(findings) -> str:
    """``2 error(s), 1 warning(s), 5 ok, 3 not checked here``: the kinds that occur, worst first."""
    words = {ERROR: "error(s)", WARNING: "warning(s)", INFO: "info", OK: "ok", SKIP: "not checked here"}
    parts = [f"{n} {words[s]}" for s, n in counts(findings).items() if n]
    return ", ".join(parts) or "no findings"


def verdict(code: int, ok: str = "OK") -> str:
    """The last line of a report: ``result: OK (exit 0)``; ``ok`` names success in the command's terms."""
    return f"result: {(ok, 'warnings', 'errors')[code]} (exit {code})"


SCHEMA = 3  # of the --json envelope; 3: one envelope for every command (doctor had 2, diagnose 1, the others none)
_ENVELOPE = ("schema", "command", "exit_code", "findings")


def envelope(command: str, found, **report) -> dict:
    """``{schema, command, exit_code, findings, <the command's own keys>}``: every ``--json`` of every command.
    The exit code is the policy's (:func:`exit_code`), so a script reading the JSON and the shell see the same."""
    clash = [k for k in _ENVELOPE if k in report]
    if clash:  # a report key would silently replace the envelope's
        raise ValueError(f"{command} report keys {clash} are the envelope's own; rename them")
    found = list(found)
    return {"schema": SCHEMA, "command": command, "exit_code": exit_code(found),
            "findings": [f.as_dict() for f in found], **report}


def to_json(command: str, found, **report) -> str:
    """The one JSON writer: one line (a script may read the last line of a log that holds other output)."""
    return json.dumps(envelope(command, found, **report), ensure_ascii=False, default=_plain)


def _plain(value):
    if dataclasses.is_dataclass(value):
        return value.as_dict() if hasattr(value, "as_dict") else dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON-ready: give it an as_dict()")

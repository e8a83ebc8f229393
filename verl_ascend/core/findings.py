"""One finding record, one way to show a list of them, one exit-code policy, for every command.

``check``, ``doctor`` and ``ckpt check`` report :class:`Finding` objects; ``status`` and ``patches
check`` judge their own reports into findings only to reach an exit code. Exit codes: 0 nothing to
report; 1 warnings or problems found (the job may still run; look); 2 errors found (what was checked
-- a recipe, a checkpoint, this node -- will fail) or bad input, decided before any work; 130 after
Ctrl-C (``cli.main``, which also turns :class:`BadInput` into 2). A command's header lines (the recipe,
the host, the checkpoint's roles) are its own; the findings block (:func:`lines`) and the result line
(:func:`verdict`) are these.
"""

import dataclasses


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

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")
        self.keys = tuple(self.keys)  # a list read back from JSON compares equal to the original

    def as_dict(self) -> dict:
        """The JSON form, the same in every command; ``Finding(**d)`` reads it back."""
        return {**dataclasses.asdict(self), "keys": list(self.keys)}


def finding(subject: str, severity: str, keys, message: str, fix: str = "") -> Finding:
    """A finding in the argument order of ``check``'s rules: the rule and severity, then the config keys."""
    return Finding(severity, subject, message, fix, keys=keys)


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

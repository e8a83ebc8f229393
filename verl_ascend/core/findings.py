"""The exit-code policy every ``verl-ascend`` command follows, in one place.

0: nothing to report. 1: warnings or problems found (the job may still run; look). 2: errors found
(what was checked -- a recipe, a checkpoint, this node -- will fail) or bad input, decided before
any work. 130 after Ctrl-C (``cli.main``). Commands judge with their own finding records; they map
them to a code only through :func:`exit_code`.
"""

ERROR = "error"
WARNING = "warning"
WARN = "warn"  # doctor's spelling in its stable JSON schema

OK, WARNINGS, ERRORS, INTERRUPTED = 0, 1, 2, 130


def exit_code(severities) -> int:
    """2 if any severity is an error, 1 if any is a warning, else 0."""
    seen = set(severities)
    if ERROR in seen:
        return ERRORS
    if WARNING in seen or WARN in seen:
        return WARNINGS
    return OK

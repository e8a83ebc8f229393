"""`verl-ascend diagnose PATH...`: from a failed run's logs to the first failing rank, the cause and the fix.

- ``table``: the knowledge, as data — one row per message shape: pattern, family, cause, fix, public source.
- ``codes``: CANN's error codes (message codes and numeric return codes) with their official meaning and page.
- ``component``: whose failure it is (package, version, tracker, the words to search for).
- ``context``: what a line says about when and where (timestamp formats, rank, device, pid, node).
- ``scan``: streams files and folders (driver logs, Ray session logs, CANN plog) chunk by chunk.
- ``timeline``: the run's progress marks (steps, validation, checkpoints, its end) and which errors it survived.
- ``report``: groups matches into findings, orders them, renders text or JSON.
- ``classify``: the public call for other tools (``supervise``): ``classify(paths, text=None) -> Verdict`` with the
  first failure's family, retry class and reason.
"""


# The submodule is loaded here, before the function below takes its name: importing a submodule for the first time
# binds it to the package's attribute of that name, so a lazy import inside the function replaced the function with the
# module ("'module' object is not callable" from the second call on; found by supervise's second attempt). classify.py
# imports only the standard library at its top.
from . import classify as _classify_module  # noqa: E402


def classify(paths=(), *, text=None):
    """See :func:`verl_ascend.diagnose.classify.classify`."""
    return _classify_module.classify(paths, text=text)

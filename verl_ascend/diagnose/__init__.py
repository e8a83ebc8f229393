"""`verl-ascend diagnose PATH...`: from a failed run's logs to the first failing rank, the cause and the fix.

- ``table``: the knowledge, as data — one row per message shape: pattern, family, cause, fix, public source.
- ``context``: what a line says about when and where (timestamp formats, rank, device, pid, node).
- ``scan``: streams files and folders (driver logs, Ray session logs, CANN plog) chunk by chunk.
- ``timeline``: the run's progress marks (steps, validation, checkpoints, its end) and which errors it survived.
- ``report``: groups matches into findings, orders them, renders text or JSON.
- ``command``: the CLI.
"""

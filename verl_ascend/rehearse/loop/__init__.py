"""What runs inside verl's own processes during a rehearsal (the driver, Ray's TaskRunner and workers).

Loaded by the plugin's start-up table (``core/activation.py``) in every process, inert outside a rehearsal:
:mod:`.runtime` (the records), :mod:`.cpu_platform` (verl's platform on CPU), :mod:`.hf_rollout` (the ``hf``
rollout), :mod:`.mcore` (megatron-core on CPU), :mod:`.report` (the lines the loop's processes say about the
plugin). Light at import: nothing here imports torch, verl or ray at module level except where a record's
target has already been imported.
"""

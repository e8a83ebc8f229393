"""``verl-ascend rehearse``: a recipe's real training loop, tiny, on CPU.

Light at import (``patches`` imports :mod:`.runtime` at interpreter start); the run lives in
:mod:`.rehearsal` (its CLI: ``verl_ascend.commands.rehearse``), the CPU platform and the ``hf`` rollout in :mod:`.cpu_platform` and
:mod:`.hf_rollout`, the scaled-down model in :mod:`.assets` and the config rewrite in :mod:`.plan`.
"""

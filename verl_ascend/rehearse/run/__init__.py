"""The rehearsal's processes: one main_ppo run, the Ray cluster of ``--nnodes``, the steps before and between runs.

- :mod:`.trainer` — one main_ppo run (its namespace, its live progress, the error that ended it), and
  ``step`` for the shorter processes; both on the process layer ``verl_ascend.proc``;
- :mod:`.cluster` — the Ray cluster of a multi-node rehearsal (``python -m``: the run's first process);
- :mod:`.nodes` — a node's address, name and own disk; :mod:`.nodeshell` — ``ssh`` to such a node;
- :mod:`.multinode` — between the runs of a multi-node rehearsal: files per node, ``ckpt check``, ``ckpt sync``;
- :mod:`.steps` — before the first run: the conversion of the tiny model.
"""

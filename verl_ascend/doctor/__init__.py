"""`verl-ascend doctor`: is this node ready for a verl job on Ascend NPUs?

Every check is a row of ``checks.CHECKS`` (id, ``--skip`` group, function, what it judges); its module
is named for its group: ``python``, ``torch``, ``cann``, ``patches``, ``npu`` and ``board_probe`` (npu),
``network`` (HCCL/Gloo interface variables; shared with ``scripts/hccl_check.py``), ``hccl`` (HCCL
timeouts, port base, free ports), ``env`` (visible devices, Ray's device variable, ulimit),
``versions`` and ``known_good`` (versions), ``ray`` (the local Ray head). ``node`` reads the facts
the checks judge, ``run`` runs the table, ``findings`` makes and shows the records, ``allreduce`` is
the torchrun smoke test. Importing this package stays cheap: the CLI imports the
checks only when the command runs.
"""

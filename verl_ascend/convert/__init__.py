"""HF -> Megatron-core distributed checkpoint conversion that runs on Ascend, GPU and CPU hosts.

Importing this package is cheap (no torch); the run is :mod:`.job`, the command ``verl_ascend.commands.convert``.
"""

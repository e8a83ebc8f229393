"""HF -> Megatron-core distributed checkpoint conversion that runs on Ascend, GPU and CPU hosts.

Importing this package is cheap (no torch); the work starts in ``command.main``.
"""

from .command import main  # noqa: F401

"""`verl-ascend ckpt check DIR`: see verl_ascend/ckpt/command.py."""

from verl_ascend.ckpt.command import register  # noqa: F401

"""`verl-ascend rehearse RECIPE.sh`: see verl_ascend/rehearse/command.py."""

from verl_ascend.rehearse.command import register  # noqa: F401

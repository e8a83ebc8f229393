"""HF -> Megatron dist checkpoint, verl's flags; see `--help` and docs/convert.md. Same as `verl-ascend convert`."""

import sys

from verl_ascend.cli import script

if __name__ == "__main__":
    sys.exit(script("convert"))

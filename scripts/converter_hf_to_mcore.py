"""HF -> Megatron dist checkpoint, verl's flags; see `--help` and docs/convert.md."""

import sys

from verl_ascend.commands.convert import main

if __name__ == "__main__":
    sys.exit(main())

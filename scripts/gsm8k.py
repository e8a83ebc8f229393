#!/usr/bin/env python3
"""gsm8k -> train.parquet / test.parquet for verl, named and flagged like verl's
examples/data_preprocess/gsm8k.py. Same as `verl-ascend gsm8k`; see docs/gsm8k.md."""

import sys

from verl_ascend.cli import script

if __name__ == "__main__":
    sys.exit(script("gsm8k"))

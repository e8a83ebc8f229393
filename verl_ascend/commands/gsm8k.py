"""``verl-ascend gsm8k``: the CLI face of :mod:`verl_ascend.data.gsm8k` (also ``scripts/gsm8k.py``)."""

import argparse


def register(sub) -> None:
    # imported here so `verl-ascend --help` stays cheap; gsm8k itself imports datasets lazily too
    from verl_ascend.data import gsm8k

    parser = sub.add_parser("gsm8k", help="write gsm8k as verl's train/test parquet files",
                            description=gsm8k.DESCRIPTION, epilog=gsm8k.EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    gsm8k.add_arguments(parser)
    parser.set_defaults(func=gsm8k.execute)

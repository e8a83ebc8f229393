"""``verl-ascend gsm8k`` and ``scripts/gsm8k.py``: gsm8k as verl's parquet files (verl_ascend/data/gsm8k/)."""

import argparse

DEFAULT_SAVE_DIR = "~/data/gsm8k"  # data.gsm8k.DEFAULT_SAVE_DIR; not imported, so --help stays cheap
EXAMPLES = """examples:
  HF_ENDPOINT=https://hf-mirror.com %(prog)s --local_dir ~/data/gsm8k
  %(prog)s --local_dataset_path /data/raw/gsm8k --local_dir ~/data/gsm8k   # offline
  %(prog)s --sample --local_dir /tmp/gsm8k                                 # shipped 30-row sample
see docs/gsm8k.md"""
DESCRIPTION = ("Write gsm8k as train.parquet / test.parquet in the layout verl's gsm8k recipes read "
               "(verl's examples/data_preprocess/gsm8k.py, which pip-installed verl lacks). "
               "Exit 0 written, 2 bad input (nothing written).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("source (default: the hub)")
    source.add_argument("--hf_dataset", default="openai/gsm8k", metavar="ID",
                        help="hub dataset id (default %(default)s); set HF_ENDPOINT for a mirror")
    source.add_argument("--local_dataset_path", default=None, metavar="DIR",
                        help="offline source: a directory with train*/test* .parquet or .jsonl files, a hub "
                             "snapshot (its main/ folder is used) or a save_to_disk folder")
    source.add_argument("--config", default="main", metavar="NAME",
                        help="gsm8k config: 'main' (default) or 'socratic'; selects the hub config / snapshot folder")
    source.add_argument("--sample", action="store_true",
                        help="use the 30-row sample shipped with verl-ascend (a smoke test, not training data)")
    out = parser.add_argument_group("output")
    out.add_argument("--local_dir", default=None, metavar="DIR",
                     help=f"where train.parquet and test.parquet go (default {DEFAULT_SAVE_DIR})")
    out.add_argument("--local_save_dir", default=None, metavar="DIR", help="same as --local_dir (verl's newer name)")
    out.add_argument("--hdfs_dir", default=None, metavar="DIR", help="also copy both files there (through verl.utils.hdfs_io)")
    parser.add_argument("--skip_unparseable", "--skip-unparseable", action="store_true",
                        help="write the rows with a usable '#### <number>' answer and report the others "
                             "(default: stop with exit 2 and write nothing)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    parser.set_defaults(func=run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gsm8k.py", description=DESCRIPTION, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def register(sub) -> None:
    add_arguments(sub.add_parser("gsm8k", help="write gsm8k as verl's train/test parquet files", description=DESCRIPTION,
                                 epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter))


def run(args) -> int:
    from verl_ascend.data.gsm8k import write

    options = write.Options(**{f: getattr(args, f) for f in write.Options.__dataclass_fields__})
    return write.run(options, as_json=args.json)  # InputError (a BadInput): cli.main / cli.script, exit 2

"""GSM8K → ``train.parquet`` / ``test.parquet`` in the layout verl's gsm8k recipes read.

The rows have the columns verl's ``examples/data_preprocess/gsm8k.py`` writes (that script is not
in verl's wheel, so a pip-installed verl cannot run it):

    data_source   "openai/gsm8k"   (verl's reward dispatch key, whatever mirror the rows came from)
    prompt        [{"role": "user", "content": question + " " + INSTRUCTION}]
    ability       "math"
    reward_model  {"style": "rule", "ground_truth": final answer without thousands commas}
    extra_info    {"split", "index" (row in the source split), "answer", "question"}

The table is built by ``datasets`` from Python rows, the same inference verl's ``Dataset.map``
goes through, so struct field order and the embedded features metadata match what verl's script
writes with the installed ``datasets`` (they differ between datasets 3 and 4+; matching keeps
``concatenate_datasets`` with other verl-made parquet files working).

Sources: the hub through ``datasets`` (``HF_ENDPOINT`` selects a mirror), a local directory
(a hub snapshot with ``main/``, ``train*``/``test*`` parquet or JSON Lines files, or a
``save_to_disk`` folder), or the 30-row sample shipped with verl-ascend (``--sample``).

Answers: the final answer follows ``#### ``. A row whose answer has no such number, two different
ones, or a "number" that is not one (``1.2.3``, ``.``) is never written with a guessed ground
truth: by default the run stops with exit 2 and lists the rows; ``--skip_unparseable`` writes
the other rows and reports what it skipped. Files appear only when both splits are complete
(written to temporary names, then renamed).
"""

import argparse
import json
import os
import re
import sys
from pathlib import Path

DATA_SOURCE = "openai/gsm8k"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
SPLITS = ("train", "test")
SAMPLE_DIR = Path(__file__).resolve().parent / "sample" / "gsm8k"
DEFAULT_SAVE_DIR = "~/data/gsm8k"
READABLE_SUFFIXES = (".parquet", ".jsonl", ".json")
SHOWN_PROBLEMS = 10  # rows listed in an error; the count is always complete

# verl's preprocessing and its strict gsm8k reward both read the number right after "#### ".
_FINAL = re.compile(r"#### (-?[0-9.,]+)")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")

_SOURCE_FIX = (
    "Fix: give a directory holding the gsm8k splits as train*/test* .parquet or .jsonl files "
    "(e.g. `hf download openai/gsm8k --repo-type dataset --local-dir DIR` on a connected machine), "
    "or a folder written by `datasets.DatasetDict.save_to_disk`."
)


class InputError(Exception):
    """Bad input the user can fix; ``main`` prints it and exits 2."""


def parse_answer(answer):
    """(ground_truth, None) for a usable gsm8k answer, else (None, why it is unusable)."""
    if not isinstance(answer, str) or not answer.strip():
        return None, "answer is empty"
    values = {m.replace(",", "") for m in _FINAL.findall(answer)}
    if not values:
        return None, "no '#### <number>' final answer"
    if len(values) > 1:
        return None, f"several different final answers: {', '.join(sorted(values))}"
    value = values.pop()
    if not _NUMBER.fullmatch(value):
        return None, f"final answer {value!r} is not a number"
    return value, None


def verl_row(split: str, index: int, question: str, answer: str, ground_truth: str) -> dict:
    """One output row, keys and nesting as verl's gsm8k preprocessing writes them."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": question + " " + INSTRUCTION}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"split": split, "index": index, "answer": answer, "question": question},
    }


# ---- reading the source -------------------------------------------------------------------------

def _split_files(folder: Path, split: str) -> list:
    # "train.jsonl" or hub shards "train-00000-of-00001.parquet"; not "train_socratic.jsonl",
    # which is the other gsm8k config sitting in the same folder of OpenAI's repository.
    return sorted(
        p for p in folder.iterdir()
        if p.is_file() and p.suffix in READABLE_SUFFIXES and (p.stem == split or p.stem.startswith(split + "-"))
    )


def _read_files(files: list):
    import pyarrow as pa
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    suffixes = {p.suffix for p in files}
    if len(suffixes) > 1:
        raise InputError(f"mixed file types for one split: {', '.join(map(str, files))}. Fix: keep one format per split.")
    tables = []
    for path in files:
        try:
            tables.append(pq.read_table(path) if path.suffix == ".parquet" else pajson.read_json(path))
        except (pa.ArrowInvalid, OSError) as exc:
            kind = "parquet" if path.suffix == ".parquet" else "JSON Lines (one JSON object per line)"
            raise InputError(f"{path}: cannot be read as {kind}: {exc}") from None
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(f"the files of one split disagree on their columns ({exc}): {', '.join(map(str, files))}") from None


def load_local(path: str, config: str = "main") -> dict:
    """{split: pyarrow.Table} from a local directory; InputError naming what is wrong."""
    root = Path(path).expanduser()
    if not root.exists():
        raise InputError(f"--local_dataset_path {path}: no such directory. {_SOURCE_FIX}")
    if root.is_file():
        raise InputError(f"--local_dataset_path {path} is a file; it must be the directory holding both splits. {_SOURCE_FIX}")
    if (root / "dataset_dict.json").is_file():
        import datasets

        saved = datasets.load_from_disk(str(root))
        missing = [s for s in SPLITS if s not in saved]
        if missing:
            raise InputError(f"{root}: saved dataset has splits {sorted(saved)}, lacks {missing}. {_SOURCE_FIX}")
        return {s: saved[s].data.table for s in SPLITS}
    # a hub snapshot keeps each config in its own folder (main/, socratic/); plain folders hold files directly
    for folder in (root / config, root, root / "data"):
        if not folder.is_dir():
            continue
        found = {s: _split_files(folder, s) for s in SPLITS}
        if all(found.values()):
            return {s: _read_files(found[s]) for s in SPLITS}
        if any(found.values()):
            have = [s for s in SPLITS if found[s]]
            lacking = [s for s in SPLITS if not found[s]]
            raise InputError(f"{folder}: found {have} files but no {lacking} file (train*/test* with "
                             f"{'/'.join(READABLE_SUFFIXES)}). {_SOURCE_FIX}")
    raise InputError(f"--local_dataset_path {path}: no train*/test* {'/'.join(READABLE_SUFFIXES)} files in it "
                     f"(looked in {config}/, ./ and data/). {_SOURCE_FIX}")


def load_hub(name: str, config: str = "main") -> dict:
    """{split: pyarrow.Table} through ``datasets.load_dataset`` (cached; HF_ENDPOINT honoured)."""
    import datasets
    from huggingface_hub import constants

    try:
        loaded = datasets.load_dataset(name, config)
    except Exception as exc:  # network, auth, missing repo: all end in the same advice
        raise InputError(
            f"could not load {name!r} (config {config!r}) from {constants.ENDPOINT}: {type(exc).__name__}: "
            f"{str(exc)[:500]}. Fix: if the hub is unreachable, set HF_ENDPOINT to a mirror "
            "(e.g. HF_ENDPOINT=https://hf-mirror.com), or copy the dataset here and pass "
            "--local_dataset_path DIR (see docs/gsm8k.md)."
        ) from None
    missing = [s for s in SPLITS if s not in loaded]
    if missing:
        raise InputError(f"{name!r} has splits {sorted(loaded)}, lacks {missing}.")
    return {s: loaded[s].with_format("arrow")[:] for s in SPLITS}


def _check_columns(table, split: str, where: str) -> None:
    import pyarrow as pa

    for column in ("question", "answer"):
        if column not in table.column_names:
            raise InputError(f"{where}: split {split!r} has columns {table.column_names}, but gsm8k needs 'question' "
                             "and 'answer'. Fix: rename the columns in the source files, or point at the gsm8k 'main' data.")
        kind = table.schema.field(column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise InputError(f"{where}: split {split!r} column {column!r} is {kind}, expected text.")


# ---- converting and writing ---------------------------------------------------------------------

def convert(table, split: str, progress: bool = True):
    """(rows, problems): verl rows for the usable source rows; (index, why, answer) for the others."""
    from tqdm import tqdm

    rows, problems = [], []
    questions = table.column("question").to_pylist()
    answers = table.column("answer").to_pylist()
    for index, (question, answer) in enumerate(
        tqdm(zip(questions, answers), total=len(questions), desc=f"gsm8k {split}", unit="row",
             disable=None if progress else True, file=sys.stderr)
    ):
        truth, why = parse_answer(answer)
        if why is None and not (isinstance(question, str) and question.strip()):
            why = "question is empty"
        if why is not None:
            problems.append((index, why, answer))
            continue
        rows.append(verl_row(split, index, question, answer, truth))
    return rows, problems


def _write_parquet_files(outputs: dict, out_dir: Path, progress: bool = True) -> dict:
    """Write each split to a temporary name, then rename all: no half-written file is ever visible."""
    import datasets

    if not progress:  # --json: stdout/stderr carry only the summary and errors
        datasets.disable_progress_bars()

    temps, paths = {}, {}
    try:
        for split, rows in outputs.items():
            final = out_dir / f"{split}.parquet"
            temp = out_dir / f".{split}.parquet.tmp-{os.getpid()}"
            temps[split] = temp
            datasets.Dataset.from_list(rows).to_parquet(str(temp))
            paths[split] = final
        for split, final in paths.items():
            os.replace(temps[split], final)
    finally:
        for temp in temps.values():
            if temp.exists():
                temp.unlink()
    return paths


def _describe(problem) -> str:
    index, why, answer = problem
    tail = answer[-60:] if isinstance(answer, str) else answer
    return f"row {index}: {why} (answer ends {tail!r})"


def run(args) -> int:
    out_arg = args.local_dir or args.local_save_dir or DEFAULT_SAVE_DIR
    if args.local_dir and args.local_save_dir and Path(args.local_dir).expanduser() != Path(args.local_save_dir).expanduser():
        raise InputError(f"--local_dir {args.local_dir} and --local_save_dir {args.local_save_dir} disagree; "
                         "they name the same thing. Fix: give one of them.")
    if args.sample and args.local_dataset_path:
        raise InputError("--sample and --local_dataset_path both name the source. Fix: give one of them.")
    copy_to_hdfs = _hdfs_copier() if args.hdfs_dir else None
    out_dir = Path(out_arg).expanduser()
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--local_dir {out_arg} is a file. Fix: give a directory (it is created when missing).")

    if args.sample:
        where, tables = f"sample {SAMPLE_DIR}", load_local(str(SAMPLE_DIR))
    elif args.local_dataset_path:
        where, tables = args.local_dataset_path, load_local(args.local_dataset_path, args.config)
    else:
        where, tables = f"{args.hf_dataset} (hub)", load_hub(args.hf_dataset, args.config)

    outputs, problems = {}, {}
    for split in SPLITS:  # every check before anything is written
        _check_columns(tables[split], split, where)
        outputs[split], problems[split] = convert(tables[split], split, progress=not args.json)
    bad = sum(len(p) for p in problems.values())
    listing = [f"  {split} {_describe(p)}" for split in SPLITS for p in problems[split]][:SHOWN_PROBLEMS]
    if bad and not args.skip_unparseable:
        counts = ", ".join(f"{s}: {len(problems[s])}" for s in SPLITS)
        raise InputError(f"{bad} row(s) without a usable final answer ({counts}) in {where}; nothing was written.\n"
                         + "\n".join(listing) + ("\n  ..." if bad > len(listing) else "")
                         + "\nFix: correct those rows, or pass --skip_unparseable to write the others and report them.")
    empty = [s for s in SPLITS if not outputs[s]]
    if empty:
        raise InputError(f"{where}: no usable rows in split(s) {empty}; nothing was written.")

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = _write_parquet_files(outputs, out_dir, progress=not args.json)
    except OSError as exc:  # unwritable directory, disk full: the temporaries are already removed
        raise InputError(f"cannot write to {out_dir}: {exc}. Nothing was written. "
                         "Fix: choose a writable --local_dir with free space.") from None
    if copy_to_hdfs:
        copy_to_hdfs(paths, args.hdfs_dir)

    summary = {
        "source": where,
        "output_dir": str(out_dir),
        "splits": {
            s: {"rows": len(outputs[s]), "path": str(paths[s]), "skipped": len(problems[s]),
                "skipped_rows": [{"index": i, "why": why} for i, why, _ in problems[s]]}
            for s in SPLITS
        },
        "hdfs_dir": args.hdfs_dir,
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    for s in SPLITS:
        print(f"gsm8k {s}: {len(outputs[s])} rows -> {paths[s]}")
    if bad:
        print(f"skipped {bad} row(s) without a usable final answer (--skip_unparseable):\n" + "\n".join(listing)
              + ("\n  ..." if bad > len(listing) else ""), file=sys.stderr)
    if args.hdfs_dir:
        print(f"copied to {args.hdfs_dir}")
    return 0


def _hdfs_copier():
    """verl's own hdfs helpers (``hdfs dfs`` for hdfs:// paths, a plain copy otherwise)."""
    try:
        from verl.utils.hdfs_io import copy, makedirs
    except ImportError as exc:
        raise InputError(f"--hdfs_dir needs verl installed in this environment ({exc}).") from None

    def copy_to(paths: dict, hdfs_dir: str) -> None:
        makedirs(hdfs_dir, exist_ok=True)
        for path in paths.values():
            copy(src=str(path), dst=hdfs_dir.rstrip("/") + "/" + path.name)

    return copy_to


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("source (default: the hub)")
    source.add_argument("--hf_dataset", default=DATA_SOURCE, metavar="ID",
                        help="hub dataset id (default %(default)s); set HF_ENDPOINT for a mirror")
    source.add_argument("--local_dataset_path", default=None, metavar="DIR",
                        help="offline source: a directory with train*/test* .parquet or .jsonl files, a hub "
                             "snapshot (its main/ folder is used) or a save_to_disk folder")
    source.add_argument("--config", default="main", metavar="NAME",
                        help="gsm8k config: 'main' (default) or 'socratic'; selects the hub config / snapshot folder")
    source.add_argument("--sample", action="store_true",
                        help="use the 30-row sample shipped with verl-ascend (a smoke test, not training data)")
    out = parser.add_argument_group("output")
    out.add_argument("--local_dir", default=None, metavar="DIR", help=f"where train.parquet and test.parquet go (default {DEFAULT_SAVE_DIR})")
    out.add_argument("--local_save_dir", default=None, metavar="DIR", help="same as --local_dir (verl's newer name)")
    out.add_argument("--hdfs_dir", default=None, metavar="DIR", help="also copy both files there (through verl.utils.hdfs_io)")
    parser.add_argument("--skip_unparseable", "--skip-unparseable", action="store_true",
                        help="write the rows with a usable '#### <number>' answer and report the others "
                             "(default: stop with exit 2 and write nothing)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary instead of text")


def execute(args) -> int:
    try:
        return run(args)
    except InputError as exc:
        print(f"gsm8k: error: {exc}", file=sys.stderr)
        return 2


EXAMPLES = """examples:
  HF_ENDPOINT=https://hf-mirror.com %(prog)s --local_dir ~/data/gsm8k
  %(prog)s --local_dataset_path /data/raw/gsm8k --local_dir ~/data/gsm8k   # offline
  %(prog)s --sample --local_dir /tmp/gsm8k                                 # shipped 30-row sample
see docs/gsm8k.md"""

DESCRIPTION = ("Write gsm8k as train.parquet / test.parquet in the layout verl's gsm8k recipes read "
               "(verl's examples/data_preprocess/gsm8k.py, which pip-installed verl lacks). "
               "Exit 0 written, 2 bad input (nothing written).")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gsm8k.py", description=DESCRIPTION, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return execute(parser.parse_args(argv))

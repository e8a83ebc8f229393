"""Where gsm8k comes from: the hub (``HF_ENDPOINT`` for a mirror), a local folder, or the shipped sample."""

from pathlib import Path

from verl_ascend.core.findings import BadInput

from .rows import SPLITS

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample" / "gsm8k"
DEFAULT_SAVE_DIR = "~/data/gsm8k"
READABLE_SUFFIXES = (".parquet", ".jsonl", ".json")

_SOURCE_FIX = (
    "Fix: give a directory holding the gsm8k splits as train*/test* .parquet or .jsonl files "
    "(e.g. `hf download openai/gsm8k --repo-type dataset --local-dir DIR` on a connected machine), "
    "or a folder written by `datasets.DatasetDict.save_to_disk`."
)


class InputError(BadInput):
    """Bad input the user can fix (a source, an output folder, unusable rows): ``cli.main`` says it, exit 2."""


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


def check_columns(table, split: str, where: str) -> None:
    import pyarrow as pa

    for column in ("question", "answer"):
        if column not in table.column_names:
            raise InputError(f"{where}: split {split!r} has columns {table.column_names}, but gsm8k needs 'question' "
                             "and 'answer'. Fix: rename the columns in the source files, or point at the gsm8k 'main' data.")
        kind = table.schema.field(column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise InputError(f"{where}: split {split!r} column {column!r} is {kind}, expected text.")

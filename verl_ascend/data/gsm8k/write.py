"""One gsm8k run: read the source, convert every row (all checks before anything is written), write both
parquet files or neither (``core/outfiles``), optionally copy them to HDFS, and report what was written."""

import contextlib
import dataclasses
import sys
from pathlib import Path

from verl_ascend.core import findings, outfiles

from . import sources
from .rows import DATA_SOURCE, SPLITS, convert, describe
from .sources import InputError

SHOWN_PROBLEMS = 10  # rows listed in an error; the count is always complete


@dataclasses.dataclass
class Options:
    hf_dataset: str = DATA_SOURCE
    local_dataset_path: str = None
    config: str = "main"
    sample: bool = False
    local_dir: str = None
    local_save_dir: str = None
    hdfs_dir: str = None
    skip_unparseable: bool = False


@dataclasses.dataclass
class Written:
    source: str
    output_dir: str
    splits: dict      # split -> {rows, path, skipped, skipped_rows: [{index, why}]}
    hdfs_dir: str = None
    listing: list = dataclasses.field(default_factory=list)  # the first skipped rows, described

    def findings(self) -> list:
        """A skipped row is an ``info``: --skip_unparseable asked for it, the files are written (exit 0)."""
        return [findings.Finding(findings.INFO, f"{split} row {row['index']}", row["why"], code="row_skipped",
                                 where={"split": split, "index": row["index"]})
                for split, info in self.splits.items() for row in info["skipped_rows"]]

    def to_json(self) -> str:
        return findings.to_json("gsm8k", self.findings(), source=self.source, output_dir=self.output_dir,
                                splits=self.splits, hdfs_dir=self.hdfs_dir)

    def text(self) -> str:
        return "\n".join(f"gsm8k {s}: {v['rows']} rows -> {v['path']}" for s, v in self.splits.items()) + (
            f"\ncopied to {self.hdfs_dir}" if self.hdfs_dir else "")

    def skipped_text(self) -> str:
        """For stderr: what --skip_unparseable left out, or ''."""
        bad = sum(v["skipped"] for v in self.splits.values())
        if not bad:
            return ""
        return (f"skipped {bad} row(s) without a usable final answer (--skip_unparseable):\n" + "\n".join(self.listing)
                + ("\n  ..." if bad > len(self.listing) else ""))


def _out_dir(options: Options) -> tuple:
    out_arg = options.local_dir or options.local_save_dir or sources.DEFAULT_SAVE_DIR
    if (options.local_dir and options.local_save_dir
            and Path(options.local_dir).expanduser() != Path(options.local_save_dir).expanduser()):
        raise InputError(f"--local_dir {options.local_dir} and --local_save_dir {options.local_save_dir} disagree; "
                         "they name the same thing. Fix: give one of them.")
    out_dir = Path(out_arg).expanduser()
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--local_dir {out_arg} is a file. Fix: give a directory (it is created when missing).")
    return out_dir


def _tables(options: Options) -> tuple:
    if options.sample and options.local_dataset_path:
        raise InputError("--sample and --local_dataset_path both name the source. Fix: give one of them.")
    if options.sample:
        return f"sample {sources.SAMPLE_DIR}", sources.load_local(str(sources.SAMPLE_DIR))
    if options.local_dataset_path:
        return options.local_dataset_path, sources.load_local(options.local_dataset_path, options.config)
    return f"{options.hf_dataset} (hub)", sources.load_hub(options.hf_dataset, options.config)


def _write_both(outputs: dict, out_dir: Path, progress: bool) -> dict:
    """Each split to a temp file beside its name; both renamed only once both are complete."""
    import datasets

    if not progress:  # --json: stdout/stderr carry only the summary and errors
        datasets.disable_progress_bars()
    paths = {split: out_dir / f"{split}.parquet" for split in outputs}
    with contextlib.ExitStack() as stack:
        temps = {split: stack.enter_context(outfiles.atomic(str(path), ".parquet")) for split, path in paths.items()}
        for split, rows in outputs.items():
            datasets.Dataset.from_list(rows).to_parquet(temps[split])
    return paths


def prepare(options: Options, progress: bool = True) -> Written:
    """Write train/test parquet files as ``options`` say; any bad input raises :class:`InputError` (nothing written)."""
    out_dir = _out_dir(options)
    copy_to_hdfs = _hdfs_copier() if options.hdfs_dir else None
    where, tables = _tables(options)
    outputs, problems = {}, {}
    for split in SPLITS:  # every check before anything is written
        sources.check_columns(tables[split], split, where)
        outputs[split], problems[split] = convert(tables[split], split, progress=progress)
    bad = sum(len(p) for p in problems.values())
    listing = [f"  {split} {describe(p)}" for split in SPLITS for p in problems[split]][:SHOWN_PROBLEMS]
    if bad and not options.skip_unparseable:
        counts = ", ".join(f"{s}: {len(problems[s])}" for s in SPLITS)
        raise InputError(f"{bad} row(s) without a usable final answer ({counts}) in {where}; nothing was written.\n"
                         + "\n".join(listing) + ("\n  ..." if bad > len(listing) else "")
                         + "\nFix: correct those rows, or pass --skip_unparseable to write the others and report them.")
    empty = [s for s in SPLITS if not outputs[s]]
    if empty:
        raise InputError(f"{where}: no usable rows in split(s) {empty}; nothing was written.")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = _write_both(outputs, out_dir, progress)
    except OSError as exc:  # unwritable directory, disk full: outfiles removed the temporaries
        raise InputError(f"cannot write to {out_dir}: {exc}. Nothing was written. "
                         "Fix: choose a writable --local_dir with free space.") from None
    if copy_to_hdfs:
        copy_to_hdfs(paths, options.hdfs_dir)
    splits = {s: {"rows": len(outputs[s]), "path": str(paths[s]), "skipped": len(problems[s]),
                  "skipped_rows": [{"index": i, "why": why} for i, why, _ in problems[s]]} for s in SPLITS}
    return Written(where, str(out_dir), splits, options.hdfs_dir, listing)


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


def run(options: Options, as_json: bool = False) -> int:
    written = prepare(options, progress=not as_json)
    print(written.to_json() if as_json else written.text())
    if not as_json and written.skipped_text():
        print(written.skipped_text(), file=sys.stderr)
    return 0

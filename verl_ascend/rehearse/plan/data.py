"""The rehearsal's data: the recipe's parquet truncated when it is on this machine, else the bundled gsm8k sample."""

import os
from pathlib import Path

from verl_ascend.rehearse.plan import overrides as plan_mod


def _files(value) -> list:
    if not value:
        return []
    text = str(value).strip().strip("[]")
    return [p.strip().strip("'\"") for p in text.split(",") if p.strip().strip("'\"")]


def _truncate(src: str, dst: Path, rows: int) -> int:
    import pyarrow.parquet as pq

    table = pq.read_table(src)
    table = table.slice(0, min(rows, table.num_rows))
    tmp = dst.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(dst)
    return table.num_rows


def prepare_data(overrides, data_dir: Path, train_rows: int, val_rows: int) -> tuple:
    """(train, val, description): the recipe's parquet truncated when here, else the bundled gsm8k sample."""
    data_dir.mkdir(parents=True, exist_ok=True)
    train = [f for f in _files(plan_mod.value_of(overrides, "data.train_files")) if f]
    val = [f for f in _files(plan_mod.value_of(overrides, "data.val_files")) if f]
    if train and all(os.path.isfile(f) for f in train) and all(os.path.isfile(f) for f in val):
        source = f"the recipe's {train[0]}" + (f" (first of {len(train)})" if len(train) > 1 else "")
        train_src, val_src = train[0], (val[0] if val else train[0])
    else:
        from verl_ascend.data import gsm8k

        sample = data_dir / "gsm8k_sample"
        gsm8k.prepare(gsm8k.Options(sample=True, local_dir=str(sample)), progress=False)  # BadInput: cli.main
        source = (f"bundled gsm8k sample (the recipe's {train[0] if train else 'data.train_files'} is not on "
                  "this machine)")
        train_src, val_src = str(sample / "train.parquet"), str(sample / "test.parquet")
    n_train = _truncate(train_src, data_dir / "train.parquet", train_rows)
    n_val = _truncate(val_src, data_dir / "val.parquet", val_rows)
    return (str(data_dir / "train.parquet"), str(data_dir / "val.parquet"),
            f"data: {source}, truncated to {n_train} train / {n_val} val rows")


def prompt_length(model_dir: Path, train_file: str, prompt_key: str = "prompt") -> int:
    """Longest chat-templated prompt of the run's rows in the tiny tokenizer, rounded up.

    A file without the prompt column gets a default: verl's own dataset then fails naming the
    column, as it would on the cluster.
    """
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    table = pq.read_table(train_file)
    if prompt_key not in table.column_names:
        return 256
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    longest = 0
    for messages in table.column(prompt_key).to_pylist():
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        longest = max(longest, len(tok(text, add_special_tokens=False)["input_ids"]))
    return ((longest + 16) // 32 + 1) * 32

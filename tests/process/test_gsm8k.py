"""gsm8k preprocessing: verl's parquet layout, answer parsing, sources, bad input, and the real verl
``RLHFDataset`` + gsm8k reward on the written files."""

import http.server
import json
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from subproc import ROOT, clean_env, last_json, run_cli, run_python

from verl_ascend import cli
from verl_ascend.data import gsm8k

FIXTURE = ROOT / "tests" / "fixtures" / "gsm8k"
# written out here, not imported: the test must fail if the module's copy drifts from verl's text
VERL_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'


def _fixture_rows(split):
    return [json.loads(line) for line in (FIXTURE / f"{split}.jsonl").read_text().splitlines()]


def _write_jsonl(folder: Path, split: str, rows) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(capsys, *argv):
    code = cli.script("gsm8k", [*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _sorted_type(t):
    """Arrow type with struct fields in name order (datasets 3 sorts them, datasets 4+ keeps insertion order)."""
    if pa.types.is_struct(t):
        return pa.struct(sorted((pa.field(f.name, _sorted_type(f.type)) for f in t), key=lambda f: f.name))
    if pa.types.is_list(t):
        return pa.list_(_sorted_type(t.value_type))
    return t


# ---- parsing --------------------------------------------------------------------------------------

@pytest.mark.verl_agnostic
@pytest.mark.parametrize("answer, truth", [
    ("48/2 = <<48/2=24>>24\n#### 72", "72"),
    ("so 1,200 pencils\n#### 1,200", "1200"),
    ("#### -3", "-3"),
    ("#### 17.5", "17.5"),
    ("#### 5 dollars", "5"),
    ("#### 5\n(check: #### 5)", "5"),
])
def test_parse_answer_reads_the_final_number(answer, truth):
    assert gsm8k.parse_answer(answer) == (truth, None)


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("answer, why", [
    ("the answer is 72", "no '#### <number>'"),
    ("####72", "no '#### <number>'"),
    ("#### $72", "no '#### <number>'"),
    ("#### 5\n#### 6", "several different final answers: 5, 6"),
    ("#### 1.2.3", "'1.2.3' is not a number"),
    ("#### .", "'.' is not a number"),
    ("#### 12.", "'12.' is not a number"),
    ("", "answer is empty"),
    (None, "answer is empty"),
])
def test_parse_answer_refuses_unusable_answers(answer, why):
    truth, reason = gsm8k.parse_answer(answer)
    assert truth is None and why in reason


@pytest.mark.verl_agnostic
@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-10**9, max_value=10**12), st.text(alphabet="abc xyz=<>\n", max_size=40))
def test_parse_answer_removes_thousands_commas(number, reasoning):
    assert gsm8k.parse_answer(f"{reasoning}\n#### {number:,}") == (str(number), None)


# ---- writing --------------------------------------------------------------------------------------

@pytest.mark.verl_agnostic
def test_shipped_sample_is_the_test_fixture():
    for split in gsm8k.SPLITS:
        shipped = gsm8k.SAMPLE_DIR / f"{split}.jsonl"
        assert shipped.read_bytes() == (FIXTURE / f"{split}.jsonl").read_bytes(), shipped
    assert [len(_fixture_rows(s)) for s in gsm8k.SPLITS] == [20, 10]


@pytest.mark.verl_agnostic
def test_fixture_writes_verl_layout(tmp_path, capsys):
    code, out, err = _run(capsys, "--local_dataset_path", FIXTURE, "--local_dir", tmp_path / "out")
    assert code == 0, err
    expected_schema = {
        "data_source": pa.string(),
        "prompt": pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())])),
        "ability": pa.string(),
        "reward_model": pa.struct([("ground_truth", pa.string()), ("style", pa.string())]),
        "extra_info": pa.struct([("answer", pa.string()), ("index", pa.int64()), ("question", pa.string()),
                                 ("split", pa.string())]),
    }
    for split, count in (("train", 20), ("test", 10)):
        path = tmp_path / "out" / f"{split}.parquet"
        assert f"{count} rows -> {path}" in out
        table = pq.read_table(path)
        assert table.column_names == list(expected_schema)
        assert {f.name: _sorted_type(f.type) for f in table.schema} == expected_schema
        assert b"huggingface" in table.schema.metadata  # written through datasets, as verl's script does
        rows = table.to_pylist()
        for index, (row, source) in enumerate(zip(rows, _fixture_rows(split), strict=True)):
            final = source["answer"].rsplit("#### ", 1)[1].replace(",", "")
            assert row == {
                "data_source": "openai/gsm8k",
                "prompt": [{"role": "user", "content": source["question"] + " " + VERL_INSTRUCTION}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": final},
                "extra_info": {"split": split, "index": index, "answer": source["answer"],
                               "question": source["question"]},
            }
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["test.parquet", "train.parquet"]


@pytest.mark.verl_agnostic
def test_hub_snapshot_and_saved_dataset_layouts(tmp_path, capsys):
    import datasets

    snapshot = tmp_path / "snapshot"  # what `hf download openai/gsm8k --repo-type dataset` leaves
    for split in gsm8k.SPLITS:
        (snapshot / "main").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(_fixture_rows(split)), snapshot / "main" / f"{split}-00000-of-00001.parquet")
    # the other config beside it must not be mixed in
    _write_jsonl(snapshot / "socratic", "train", [{"question": "q", "answer": "#### 1"}])
    openai_repo = tmp_path / "grade_school_math" / "data"  # OpenAI's repository keeps both configs side by side
    for split in gsm8k.SPLITS:
        _write_jsonl(openai_repo, split, _fixture_rows(split))
        _write_jsonl(openai_repo, f"{split}_socratic", [{"question": "q", "answer": "#### 1"}])
    saved = tmp_path / "saved"
    datasets.DatasetDict({s: datasets.Dataset.from_list(_fixture_rows(s)) for s in gsm8k.SPLITS}).save_to_disk(str(saved))

    reference = tmp_path / "ref"
    assert _run(capsys, "--local_dataset_path", FIXTURE, "--local_dir", reference)[0] == 0
    for source in (snapshot, openai_repo.parent, saved):
        out = tmp_path / f"out-{source.name}"  # grade_school_math: found in its data/
        code, _, err = _run(capsys, "--local_dataset_path", source, "--local_save_dir", out)
        assert code == 0, err
        for split in gsm8k.SPLITS:
            assert pq.read_table(out / f"{split}.parquet").to_pylist() == pq.read_table(reference / f"{split}.parquet").to_pylist()


@pytest.mark.verl_agnostic
def test_hub_source_converts_what_datasets_returns(tmp_path, capsys, monkeypatch):
    """The hub path after the download: the DatasetDict that `datasets.load_dataset` hands back."""
    import datasets

    asked = []

    def hub_stand_in(name, config):
        asked.append((name, config))
        return datasets.DatasetDict({s: datasets.Dataset.from_list(_fixture_rows(s)) for s in ("train", "test")})

    monkeypatch.setattr(datasets, "load_dataset", hub_stand_in)
    code, _, err = _run(capsys, "--local_dir", tmp_path / "hub", "--config", "main")
    assert code == 0, err
    assert asked == [("openai/gsm8k", "main")]
    assert _run(capsys, "--local_dataset_path", FIXTURE, "--local_dir", tmp_path / "ref")[0] == 0
    for split in gsm8k.SPLITS:
        assert pq.read_table(tmp_path / "hub" / f"{split}.parquet").equals(pq.read_table(tmp_path / "ref" / f"{split}.parquet"))


# ---- bad input ------------------------------------------------------------------------------------

def _broken_copy(tmp_path: Path) -> Path:
    """The fixture with train row 2 and test row 4 made unparseable."""
    src = tmp_path / "broken"
    train, test = _fixture_rows("train"), _fixture_rows("test")
    train[2]["answer"] = train[2]["answer"].replace("#### ", "The answer is ")
    test[4]["answer"] += "\n#### 99"  # a second, different final answer
    _write_jsonl(src, "train", train)
    _write_jsonl(src, "test", test)
    return src


@pytest.mark.verl_agnostic
def test_unparseable_rows_stop_the_run_and_keep_old_files(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.parquet").write_bytes(b"previous run")
    code, stdout, err = _run(capsys, "--local_dataset_path", _broken_copy(tmp_path), "--local_dir", out)
    assert code == 2
    assert "2 row(s) without a usable final answer (train: 1, test: 1)" in err
    assert "train row 2: no '#### <number>'" in err and "test row 4: several different final answers" in err
    assert "--skip_unparseable" in err and stdout == ""
    assert sorted(p.name for p in out.iterdir()) == ["train.parquet"]
    assert (out / "train.parquet").read_bytes() == b"previous run"


@pytest.mark.verl_agnostic
def test_skip_unparseable_writes_the_rest_and_counts(tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = _run(capsys, "--local_dataset_path", _broken_copy(tmp_path), "--local_dir", out,
                             "--skip-unparseable", "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert {s: (v["rows"], v["skipped"]) for s, v in summary["splits"].items()} == {"train": (19, 1), "test": (9, 1)}
    assert summary["splits"]["train"]["skipped_rows"][0]["index"] == 2
    train = pq.read_table(out / "train.parquet").to_pylist()
    assert [r["extra_info"]["index"] for r in train] == [i for i in range(20) if i != 2]  # source row numbers kept
    test = pq.read_table(out / "test.parquet").to_pylist()
    assert 4 not in [r["extra_info"]["index"] for r in test]


@pytest.mark.verl_agnostic
def test_missing_columns_and_missing_paths_exit_2(tmp_path, capsys):
    renamed = tmp_path / "renamed"
    for split in gsm8k.SPLITS:
        _write_jsonl(renamed, split, [{"query": r["question"], "answer": r["answer"]} for r in _fixture_rows(split)])
    only_train = tmp_path / "only_train"
    _write_jsonl(only_train, "train", _fixture_rows("train"))
    out = tmp_path / "out"
    cases = [
        (renamed, "has columns ['query', 'answer'], but gsm8k needs 'question' and 'answer'"),
        (tmp_path / "nowhere", "no such directory"),
        (FIXTURE / "train.jsonl", "is a file; it must be the directory holding both splits"),
        (only_train, "found ['train'] files but no ['test'] file"),
        (tmp_path, "no train*/test*"),
    ]
    for source, message in cases:
        code, stdout, err = _run(capsys, "--local_dataset_path", source, "--local_dir", out)
        assert code == 2 and message in err, (source, err)
        assert "Fix:" in err
        assert not out.exists(), source
    code, _, err = _run(capsys, "--sample", "--local_dir", out, "--local_save_dir", tmp_path / "other")
    assert code == 2 and "disagree" in err and not out.exists()


@pytest.mark.verl_agnostic
def test_failure_while_writing_leaves_no_parquet(tmp_path, capsys, monkeypatch):
    import datasets

    original = datasets.Dataset.to_parquet
    calls = []

    def second_write_fails(self, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            Path(path).write_bytes(b"half a parquet file")  # what a crash mid-write leaves behind
            raise OSError(28, "No space left on device")
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(datasets.Dataset, "to_parquet", second_write_fails)
    out = tmp_path / "out"
    code, _, err = _run(capsys, "--sample", "--local_dir", out)
    assert code == 2 and "No space left on device" in err and "Nothing was written" in err
    assert len(calls) == 2 and list(out.iterdir()) == []
    blocked = tmp_path / "a_file"  # a directory cannot be made under a regular file, not even by root
    blocked.write_text("")
    code, _, err = _run(capsys, "--sample", "--local_dir", blocked / "gsm8k")
    assert code == 2 and f"cannot write to {blocked / 'gsm8k'}" in err and "Fix:" in err


@pytest.mark.verl_agnostic
def test_hub_source_goes_to_hf_endpoint(tmp_path):
    """`verl-ascend gsm8k` (the CLI) asks the HF_ENDPOINT mirror, and its failure is exit 2 with the fix."""
    requests = []

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_port}"
    try:
        proc = run_cli("gsm8k", "--local_dir", str(tmp_path / "out"), timeout=120,
                       env=clean_env(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf")))
    finally:
        server.shutdown()
    assert proc.returncode == 2, proc.stderr
    assert f"could not load 'openai/gsm8k' (config 'main') from {endpoint}" in proc.stderr
    assert "HF_ENDPOINT" in proc.stderr and "--local_dataset_path" in proc.stderr
    assert any("openai/gsm8k" in path for path in requests), requests
    assert not (tmp_path / "out").exists()


# ---- the real verl reads and scores the files -----------------------------------------------------

VERL_CHECK = r"""
import contextlib, io, json, runpy, sys
from omegaconf import OmegaConf
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
import pyarrow.parquet as pq
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.utils.reward_score import default_compute_score

script, out_dir, hdfs_dir, cache = sys.argv[1:5]
# the user-facing script first, as `python scripts/gsm8k.py ...` runs it (verl is imported once for both)
sys.argv = [script, "--local_dataset_path", sys.argv[5], "--local_dir", out_dir, "--hdfs_dir", hdfs_dir, "--json"]
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    try:
        runpy.run_path(script, run_name="__main__")
        script_exit = None
    except SystemExit as stop:
        script_exit = stop.code
summary = json.loads(printed.getvalue())
texts = [m["content"] for s in ("train", "test") for r in pq.read_table(f"{out_dir}/{s}.parquet").to_pylist() for m in r["prompt"]]
# a word-level tokenizer trained on the fixture itself: no download
core = Tokenizer(models.WordLevel(unk_token="<unk>"))
core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
core.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["<pad>", "<unk>", "<|user|>", "<|assistant|>", "<|end|>"]))
tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", eos_token="<|end|>")
tokenizer.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
                           "{% if add_generation_prompt %}<|assistant|>{% endif %}")
config = OmegaConf.create({"max_prompt_length": 96, "truncation": "error", "filter_overlong_prompts": True,
                           "filter_overlong_prompts_workers": 1, "return_raw_chat": True, "cache_dir": cache})
report = {}
for split in ("train", "test"):
    dataset = RLHFDataset(data_files=f"{out_dir}/{split}.parquet", tokenizer=tokenizer, config=config)
    rows = []
    for i in range(len(dataset)):
        item = dataset[i]
        truth, source = item["reward_model"]["ground_truth"], item["data_source"]
        wrong = f"{float(truth) + 1:g}"
        solution = item["extra_info"]["answer"]
        rows.append({
            "raw_prompt": [dict(m) for m in item["raw_prompt"]],
            "index": int(item["index"]),
            "prompt_tokens": int(item["attention_mask"].sum()) if "attention_mask" in item else None,
            "score_solution": float(default_compute_score(source, solution, truth)),
            "score_right": float(default_compute_score(source, f"Adding up. #### {float(truth):,g}", truth)),
            "score_wrong": float(default_compute_score(source, f"Adding up. #### {wrong}", truth)),
            "score_no_marker": float(default_compute_score(source, f"The answer is {truth}", truth)),
        })
    report[split] = rows
print(json.dumps({"script_exit": script_exit, "summary": summary, "report": report}))
"""


def test_verl_rlhf_dataset_loads_and_gsm8k_reward_scores(tmp_path):
    out, hdfs = tmp_path / "out", tmp_path / "hdfs"
    answer = last_json(run_python(
        VERL_CHECK, env=clean_env(HF_HOME=str(tmp_path / "hf")), timeout=300,
        args=(str(ROOT / "scripts" / "gsm8k.py"), str(out), str(hdfs), str(tmp_path / "cache"), str(FIXTURE)),
    ))
    assert answer["script_exit"] == 0
    assert {s: v["rows"] for s, v in answer["summary"]["splits"].items()} == {"train": 20, "test": 10}
    for split in gsm8k.SPLITS:  # --hdfs_dir copies through verl.utils.hdfs_io
        assert (hdfs / f"{split}.parquet").read_bytes() == (out / f"{split}.parquet").read_bytes()
    report = answer["report"]
    for split, count in (("train", 20), ("test", 10)):
        rows = report[split]
        assert len(rows) == count  # none lost to verl's prompt-length filter, which also drops rows it cannot template
        for index, (row, source) in enumerate(zip(rows, _fixture_rows(split), strict=True)):
            assert row["index"] == index
            assert row["raw_prompt"] == [{"role": "user", "content": source["question"] + " " + VERL_INSTRUCTION}]
            if row["prompt_tokens"] is not None:  # verl 0.6.x tokenizes in the dataset; 0.9 leaves it to the rollout
                assert 10 < row["prompt_tokens"] <= 96
            assert (row["score_solution"], row["score_right"]) == (1.0, 1.0), (split, index, row)
            assert (row["score_wrong"], row["score_no_marker"]) == (0.0, 0.0), (split, index, row)

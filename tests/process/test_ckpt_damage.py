"""`verl-ascend ckpt check` on files that exist but are cut short: each kind a resume loads, written for
real (torch.save, torch's DCP writer in two gloo ranks, megatron-core's dist_checkpointing), then
truncated or emptied the way a node dying mid-save or an interrupted copy leaves it. A damaged file must
be named, with the step before it or `ckpt sync` as the fix, exit 2. The writers run in their own processes
(gloo ranks, megatron-core); the checks run the CLI's entry in this process, one text report in a subprocess."""

import contextlib
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from subproc import clean_env, free_port, run_cli
from test_ckpt_check import megatron_run
from test_ckpt_dcp import run_ranks

MCORE_WRITER = Path(__file__).parents[1] / "mcore_dist_ckpt.py"
CUTS = {"10 bytes": lambda data: data[:10], "zero-length": lambda data: b"", "half": lambda data: data[:len(data) // 2]}


def fsdp_step(root, step, world=2):
    """One FSDP save as FSDPCheckpointManager writes it: per-rank model/optimizer/extra state, data.pt."""
    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}))
    for rank in range(world):
        model = torch.nn.Linear(16, 8)
        optim = torch.optim.AdamW(model.parameters())
        model(torch.randn(2, 16)).sum().backward()
        optim.step()
        name = f"world_size_{world}_rank_{rank}.pt"
        torch.save(model.state_dict(), actor / f"model_{name}")
        torch.save(optim.state_dict(), actor / f"optim_{name}")
        torch.save({"lr_scheduler": {"last_epoch": step}, "rng": {"cpu": torch.get_rng_state()}},
                   actor / f"extra_state_{name}")
    torch.save({"dataloader": {"samples_yielded": 64 * step}}, root / f"global_step_{step}" / "data.pt")
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor


def check(root, *extra):
    """`verl-ascend ckpt check ROOT --json` through the CLI's own entry, in this process. How a file's damage
    is judged is not a matter of the process, and a fresh interpreter per case cost ~5 CPU-s (60 of them per
    environment); the text-report test below runs the real entry point in a subprocess."""
    from verl_ascend import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["ckpt", "check", str(root), "--json", *extra])
    proc = types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


def named(report, path):
    hits = [f for f in report["findings"] if f["subject"] == str(path) and f["severity"] == "error"]
    assert hits, json.dumps(report["findings"], indent=1)
    return hits[0]


def cut(path, how):
    path.write_bytes(CUTS[how](path.read_bytes()))


FSDP_FILES = ["actor/optim_world_size_2_rank_1.pt", "actor/model_world_size_2_rank_0.pt",
              "actor/extra_state_world_size_2_rank_1.pt", "data.pt", "actor/fsdp_config.json"]


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("how", sorted(CUTS))
@pytest.mark.parametrize("rel", FSDP_FILES)
def test_fsdp_damaged_file_is_named_with_the_step_before(tmp_path, rel, how):
    fsdp_step(tmp_path, 2)
    fsdp_step(tmp_path, 4)
    intact, report = check(tmp_path)
    assert intact.returncode == 0 and report["exit_code"] == 0, intact.stdout
    cut(tmp_path / "global_step_4" / rel, how)
    proc, report = check(tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    finding = named(report, tmp_path / "global_step_4" / rel)
    assert finding["code"] == "file_damaged" and "cut short" in finding["message"]
    assert "global_step_2" in finding["fix"] and "ckpt sync" in finding["fix"]
    # the tracker's step is the one judged: step 2 stays intact and unnamed
    assert not [f for f in report["findings"] if "global_step_2/" in f["subject"]]


@pytest.mark.verl_agnostic
def test_text_report_of_the_issue_case_names_the_rank_file(tmp_path):
    """The report of issue #27: optim_world_size_2_rank_1.pt truncated to 10 bytes was 'resumable (exit 0)'."""
    fsdp_step(tmp_path, 4)
    cut(tmp_path / "global_step_4/actor/optim_world_size_2_rank_1.pt", "10 bytes")
    proc = run_cli("ckpt", "check", str(tmp_path), env=clean_env(), timeout=300)
    assert proc.returncode == 2, proc.stdout
    assert "optim_world_size_2_rank_1.pt: rank file optim_world_size_2_rank_1.pt is a cut-off zip" in proc.stdout
    assert "no earlier step here" in proc.stdout and proc.stdout.rstrip().endswith("result: errors (exit 2)")


@pytest.mark.verl_agnostic
def test_zip_index_intact_but_member_data_cut(tmp_path):
    """Bytes lost inside the archive, its tail (central directory) kept: a member no longer fits."""
    from verl_ascend.ckpt.files import torch_file

    path = tmp_path / "x.pt"
    torch.save({"w": torch.randn(1000)}, path)
    assert torch_file(path) is None
    data = path.read_bytes()
    path.write_bytes(data[:1000] + data[3000:])
    assert torch_file(path)  # a reason, whatever the member
    torch.save({"w": 1}, path, _use_new_zipfile_serialization=False)
    assert torch_file(path) is None  # the legacy format has no index: length only
    path.write_bytes(b"")
    assert torch_file(path) == "is empty (0 bytes)"


@pytest.mark.verl_agnostic
def test_safetensors_and_hf_index(tmp_path):
    from verl_ascend.ckpt.files import safetensors_file

    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 16)
    assert safetensors_file(path) is None
    path.write_bytes(path.read_bytes()[:-1])
    assert "need" in safetensors_file(path)
    path.write_bytes(path.read_bytes()[:12])
    assert "header says" in safetensors_file(path)


@pytest.fixture(scope="module")
def dcp_two_ranks(tmp_path_factory):
    """A Megatron actor whose three dist_ckpt folders two gloo ranks wrote with torch's DCP writer."""
    root = tmp_path_factory.mktemp("dcp2")
    actor = root / "global_step_10" / "actor"
    actor.mkdir(parents=True)
    run_ranks("fast", "megatron", folder=actor, timeout=300)
    megatron_run(root, step=10, world=2, save=False)
    return root


def _copy(src, dst):
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst


DCP_FILES = ["optimizer/dist_ckpt/__1_0.distcp", "model/dist_ckpt/__0_0.distcp", "extra/dist_ckpt/common.pt",
             "model/dist_ckpt/metadata.json", "optimizer/dist_ckpt/.metadata"]


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("how", ["zero-length", "half"])
@pytest.mark.parametrize("rel", DCP_FILES)
def test_dcp_shards_and_megatron_files_two_ranks(dcp_two_ranks, tmp_path, rel, how):
    root = _copy(dcp_two_ranks, tmp_path / "run")
    proc, report = check(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    target = root / "global_step_10" / "actor" / rel
    cut(target, how)
    proc, report = check(root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    finding = named(report, target)
    assert finding["fix"] and finding["code"] == "file_damaged"


@pytest.fixture(scope="module")
def mcore_run(tmp_path_factory):
    """A Megatron actor written by the installed megatron-core (verl 0.9.1 and 0.6.1 both pin one)."""
    try:
        import megatron.core  # noqa: F401
    except ImportError:
        pytest.skip("megatron-core is not installed in this environment")
    root = tmp_path_factory.mktemp("mcore")
    actor = root / "global_step_10" / "actor"
    proc = subprocess.run([sys.executable, str(MCORE_WRITER), str(actor), str(free_port())], env=clean_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    megatron_run(root, step=10, world=1, save=False, common=False)
    return root


MCORE_FILES = ["model/dist_ckpt/__0_1.distcp", "optimizer/dist_ckpt/common.pt", "extra/dist_ckpt/__0_0.distcp",
               "extra/dist_ckpt/metadata.json", "model/dist_ckpt/.metadata"]


@pytest.mark.parametrize("rel", MCORE_FILES)
def test_megatron_core_dist_ckpt(mcore_run, tmp_path, rel):
    root = _copy(mcore_run, tmp_path / "run")
    proc, report = check(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["roles"]["actor"]["optimizer_format"] == "dp_reshardable"  # read from megatron-core's common.pt
    target = root / "global_step_10" / "actor" / rel
    cut(target, "half")
    proc, report = check(root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    named(report, target)


@pytest.mark.verl_agnostic
def test_verl_06_megatron_layout(dcp_two_ranks, tmp_path):
    """verl 0.6 saved one dist_ckpt/ and huggingface/ right in the role folder, with no manifest."""
    actor = tmp_path / "global_step_3" / "actor"
    actor.mkdir(parents=True)
    _copy(dcp_two_ranks / "global_step_10" / "actor" / "model" / "dist_ckpt", actor / "dist_ckpt")
    (actor / "huggingface").mkdir()
    (actor / "huggingface" / "config.json").write_text("{}")
    torch.save({}, tmp_path / "global_step_3" / "data.pt")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3")
    proc, report = check(tmp_path)
    assert proc.returncode == 0 and report["roles"]["actor"]["kind"] == "megatron", proc.stdout
    cut(actor / "huggingface" / "config.json", "zero-length")
    proc, report = check(tmp_path)
    assert proc.returncode == 2
    named(report, actor / "huggingface" / "config.json")

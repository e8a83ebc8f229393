"""`verl-ascend ckpt check` on checkpoints written here with torch's own DCP writer, in verl 0.9's
layout (verl/utils/checkpoint/*_checkpoint_manager.py), then broken the ways resumes fail."""

import inspect
import json
import shutil

import pytest
import torch
from subproc import ROOT, clean_env, last_json, run_cli

MODEL = {"decoder.layers.0.mlp.weight": (64, 32), "decoder.layers.1.mlp.weight": (64, 32), "embedding.weight": (128, 32)}


def _dist_ckpt(folder, sharding="dp_reshardable", save=True, common=True):
    """A Megatron torch_dist folder: DCP shards + .metadata (torch), metadata.json and common.pt (Megatron).
    save=False: the DCP files are already there (written by several ranks, tests/dcp_ranks.py);
    common=False: Megatron's own files too (megatron-core wrote the folder, tests/mcore_dist_ckpt.py)."""
    import torch.distributed.checkpoint as dcp

    if save:
        folder.mkdir(parents=True)
        state = {k: torch.randn(*shape) for k, shape in MODEL.items()}
        # no_dist exists from torch 2.6; before it, a save without a process group is single-process anyway
        single = {"no_dist": True} if "no_dist" in inspect.signature(dcp.save).parameters else {}
        dcp.save(state, checkpoint_id=str(folder), **single)
    if not common:
        return
    (folder / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                                                      "common_backend": "torch", "common_backend_version": 1}))
    torch.save({"content_metadata": {"distrib_optim_sharding_type": sharding}}, folder / "common.pt")


def megatron_run(root, step=10, world=16, tp=2, pp=1, ep=1, moe=False, sharding="dp_reshardable", save=True,
                 common=True):
    """trainer.default_local_dir after one save of a Megatron actor (MegatronCheckpointManager's files)."""
    actor = root / f"global_step_{step}" / "actor"
    for part in ("model", "optimizer", "extra"):
        _dist_ckpt(actor / part / "dist_ckpt", sharding, save, common)
    (actor / "model" / "huggingface").mkdir()
    (actor / "model" / "huggingface" / "config.json").write_text("{}")
    (actor / "transformer_config.json").write_text(json.dumps(
        {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp, "expert_model_parallel_size": ep,
         "context_parallel_size": 1, "num_moe_experts": 8 if moe else None}))
    contents = {"model": {"path": "model/dist_ckpt", "format": "megatron_dist_checkpoint"},
                "optimizer": {"path": "optimizer/dist_ckpt", "format": "megatron_dist_checkpoint"},
                "rng_state": {"path": "extra/dist_ckpt", "format": "megatron_dist_checkpoint", "key": "rng_state"},
                "transformer_config": {"path": "transformer_config.json", "format": "json"},
                "hf_config": {"path": "model/huggingface", "format": "huggingface"}}
    (actor / "ckpt_contents.json").write_text(json.dumps(
        {"schema_version": 2, "framework": "megatron", "role": "actor", "global_step": step, "world_size": world,
         "save_contents": ["model", "optimizer", "extra"], "contents": contents}))
    torch.save({"dataloader": {"batches": 3}}, root / f"global_step_{step}" / "data.pt")
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor


def fsdp_run(root, step=4, world=2):
    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}))
    for kind in ("model", "optim", "extra_state"):
        for rank in range(world):
            torch.save({"rank": rank}, actor / f"{kind}_world_size_{world}_rank_{rank}.pt")
    torch.save({}, root / f"global_step_{step}" / "data.pt")
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor


def scan(root):
    from verl_ascend.ckpt.scan import scan as run

    findings, by_step = run(root)
    return findings, by_step


def errors(findings, severity="error"):
    return [f for f in findings if f.severity == severity]


@pytest.mark.verl_agnostic
def test_complete_checkpoints_have_no_findings(tmp_path):
    megatron_run(tmp_path / "m")
    fsdp_run(tmp_path / "f")
    for root in (tmp_path / "m", tmp_path / "f"):
        findings, by_step = scan(root)
        assert [f for f in findings if f.severity != "info"] == [], findings
        assert list(by_step) == [10 if root.name == "m" else 4]


def _shard(actor):
    return sorted((actor / "optimizer" / "dist_ckpt").glob("*.distcp"))[0]


# (name, how to break the run, severity, text in the message, path the finding must name)
BREAKS = [
    ("no tracker", lambda r, a: (r / "latest_checkpointed_iteration.txt").unlink(), "warning", "starts from scratch",
     "latest_checkpointed_iteration.txt"),
    ("tracker ahead", lambda r, a: (r / "latest_checkpointed_iteration.txt").write_text("20"), "error",
     "global_step_20/ is not here", "latest_checkpointed_iteration.txt"),
    ("unfinished save", lambda r, a: (a / "ckpt_contents.json").unlink(), "error", "did not finish",
     "ckpt_contents.json"),
    ("missing shard", lambda r, a: _shard(a).unlink(), "error", "names is missing", ".distcp"),
    ("truncated shard", lambda r, a: _shard(a).write_bytes(_shard(a).read_bytes()[:100]), "error",
     "was cut short", ".distcp"),
    ("no .metadata", lambda r, a: (a / "model" / "dist_ckpt" / ".metadata").unlink(), "error", ".metadata is missing",
     "model/dist_ckpt/.metadata"),
    ("no metadata.json", lambda r, a: (a / "extra" / "dist_ckpt" / "metadata.json").unlink(), "error",
     "metadata.json is missing", "extra/dist_ckpt/metadata.json"),
    ("no hf export", lambda r, a: shutil.rmtree(a / "model" / "huggingface"), "error", "missing or empty",
     "model/huggingface"),
    ("no data.pt", lambda r, a: (r / "global_step_10" / "data.pt").unlink(), "warning", "restarts the data stream",
     "data.pt"),
]


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("case", BREAKS, ids=[b[0] for b in BREAKS])
def test_each_break_is_reported_with_its_file_and_fix(tmp_path, case):
    _, breaker, severity, text, path = case
    actor = megatron_run(tmp_path)
    breaker(tmp_path, actor)
    findings, _ = scan(tmp_path)
    hits = [f for f in findings if f.severity == severity and text in f.message]
    assert len(hits) >= 1, findings
    assert path in hits[0].subject and hits[0].fix
    assert not [f for f in findings if f.severity in ("error", "warning") and f not in hits], findings


@pytest.mark.verl_agnostic
def test_fsdp_rank_missing_on_this_node(tmp_path):
    actor = fsdp_run(tmp_path, world=4)
    (actor / "optim_world_size_4_rank_3.pt").unlink()
    (finding,) = errors(scan(tmp_path)[0])
    assert "optim_world_size_4_rank_3.pt" in finding.message and "1 of 12" in finding.message
    assert finding.code == "shard_missing" and finding.keys == ()  # ckpt sync reads the code from --json


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("plan_world, plan_tp, sharding, moe, expected", [
    (32, 2, "dp_reshardable", False, ("info", "only the data-parallel size changes")),
    (16, 4, "dp_reshardable", False, ("error", "TP 2 -> 4")),
    (16, 4, "fully_reshardable", False, ("info", "fully reshardable")),
    (32, 2, "dp_reshardable", True, ("warning", "Cannot merge two lists")),
])
def test_megatron_layout_change_against_the_recipe(tmp_path, plan_world, plan_tp, sharding, moe, expected):
    from verl_ascend.ckpt.recipe import compare

    megatron_run(tmp_path, world=16, tp=2, moe=moe, sharding=sharding)
    _, by_step = scan(tmp_path)
    plan = {"world_size": plan_world, "strategy": "megatron",
            "parallel": {"tensor": plan_tp, "pipeline": 1, "expert": 1, "cp": 1}}
    found = compare(by_step[10], plan)
    severity, text = expected
    assert any(f.severity == severity and text in f.message for f in found), found
    if severity == "info":
        assert not [f for f in found if f.severity == "error"]


@pytest.mark.verl_agnostic
def test_fsdp_world_size_change_is_an_error(tmp_path):
    from verl_ascend.ckpt.recipe import compare

    fsdp_run(tmp_path, world=2)
    _, by_step = scan(tmp_path)
    (finding,) = compare(by_step[4], {"world_size": 8, "strategy": "fsdp", "parallel": {}})
    assert finding.severity == "error" and "*_world_size_8_rank_*.pt" in finding.message


@pytest.mark.field_stack
def test_cli_with_a_shipped_recipe(tmp_path):
    """grpo_qwen2_5_7b_a2.sh plans 8 NPUs, TP2: a 16-NPU TP2 save only changes DP; a TP4 save cannot load."""
    megatron_run(tmp_path / "dp", world=16, tp=2)
    megatron_run(tmp_path / "tp", world=8, tp=4)
    recipe = str(ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh")
    env = clean_env(HOME=str(tmp_path))
    ok = run_cli("ckpt", "check", str(tmp_path / "dp"), "--recipe", recipe, "--json", env=env, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert last_json(ok)["recipe"]["parallel"]["tensor"] == 2
    bad = run_cli("ckpt", "check", str(tmp_path / "tp"), "--recipe", recipe, env=env, timeout=300)
    assert bad.returncode == 2 and "TP 4 -> 2" in bad.stdout and "fix:" in bad.stdout
    assert "\nERROR " in bad.stdout and bad.stdout.rstrip().endswith("result: errors (exit 2)")
    missing = run_cli("ckpt", "check", str(tmp_path / "nope"), env=env, timeout=120)
    assert missing.returncode == 2 and "no such folder" in missing.stderr


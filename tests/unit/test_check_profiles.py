"""`check --device`: memory per rank of the chosen profile (A2 card, A2 910B4 32 GB card, A3 die, A5
card), ranks per server, and A3's interconnect settings. Expected figures are computed by hand from
the recipe's numbers (rollout phase = gpu_memory_utilization x rank memory + 3 GB runtime reserve)."""

import json

import pytest
from subproc import ROOT

RECIPES = ROOT / "recipes"
ARR = "actor_rollout_ref"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("NNODES", "NPUS_PER_NODE", "TRAIN_TP", "GEN_TP", "OFFLOAD", "MODEL_PATH", "TRAIN_BATCH_SIZE",
                 "PPO_MINI_BATCH_SIZE", "HCCL_INTER_HCCS_DISABLE", "ASCEND_RT_VISIBLE_DEVICES", "EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def check(recipe, device, sets=()):
    from verl_ascend.check import run_check

    return run_check(str(RECIPES / recipe), list(sets), device=device)


def hbm(report, phase):
    (f,) = [f for f in report["findings"] if f["subject"] == "hbm" and f["message"].startswith(phase)]
    return f


def rollout_phase(report, rank_gb, word):
    """The rollout-phase line, checked against figures computed by hand: vLLM takes 0.6 (the recipes'
    gpu_memory_utilization) of the rank's memory, 3 GB runtime reserve, and where the installed verl's
    config keeps gradients on the card (verl 0.6.1: megatron.grad_offload=False) the 7B actor's fp32
    gradients at TP2: 4 B x 7.62e9 / 2 = 15.2 GB. The total is the sum of the parts."""
    msg = hbm(report, "rollout phase")["message"]
    head, parts = msg.split(" (", 1)
    body = parts.rsplit(")", 1)[0].removesuffix(" GB")  # an error adds ": ... do not fit" after the ")"
    values = {k.strip(): float(v) for k, v in (p.rsplit(" ", 1) for p in body.split(", "))}
    expected = {"vLLM (gpu_memory_utilization)": round(0.6 * rank_gb, 1), "runtime": 3.0}
    if "actor grads" in values:
        expected["actor grads"] = 15.2
    assert values == expected, msg
    assert head == f"rollout phase ~{sum(expected.values()):.1f} of {rank_gb} GB per {word}", msg


def flagged(report):
    return [f for f in report["findings"] if f["severity"] in ("error", "warning")]


@pytest.mark.parametrize("device, rank_gb, word", [("a2", 64, "card"), ("a2-32g", 32, "card"), ("a5", 128, "card")])
def test_dense_7b_rollout_memory_per_profile(home, device, rank_gb, word):
    report = check("grpo_qwen2_5_7b_a2.sh", device)
    rollout_phase(report, rank_gb, word)
    assert report["device"]["profile"] == device
    if rank_gb >= 64:
        assert flagged(report) == [], json.dumps(flagged(report), indent=1)
    else:  # ~49.6 GB of training state per rank at TP2 (the 64 GB profiles show the same figure): no fit
        errors = {f["message"].split(" ~")[0] for f in flagged(report) if f["severity"] == "error"}
        assert "training phase" in errors and errors <= {"training phase", "rollout phase"}, flagged(report)
        grads = 15.2 if "actor grads" in hbm(report, "rollout phase")["message"] else 0.0
        assert ("rollout phase" in errors) == (0.6 * rank_gb + 3 + grads > rank_gb)


def test_a3_recipe_is_per_die_and_clean_only_under_the_a3_profile(home):
    report = check("grpo_qwen2_5_7b_a3.sh", "a3")
    assert flagged(report) == [], json.dumps(flagged(report), indent=1)
    assert report["layout"]["world_size"] == 16 and report["layout"]["actor"]["dp"] == 8
    rollout_phase(report, 64, "die")
    assert " per die after " in hbm(report, "rollout KV cache")["message"]
    on_a2 = check("grpo_qwen2_5_7b_a3.sh", "a2")
    (warn,) = flagged(on_a2)
    assert warn["keys"] == ["trainer.n_gpus_per_node"] and "Box16" in warn["message"]
    a2_on_a3 = check("grpo_qwen2_5_7b_a2.sh", "a3")
    (warn,) = flagged(a2_on_a3)
    assert "8 cards x 2 dies" in warn["message"] and "n_gpus_per_node=16" in warn["fix"]


def test_moe_training_memory_against_each_profile(home):
    """The 235B recipe's training state per rank does not depend on the card; the verdict does."""
    totals = {}
    for device in ("a2", "a2-32g", "a3", "a5"):
        f = hbm(check("grpo_qwen3_235b_a22b_a2.sh", device), "training phase")
        totals[device] = float(f["message"].split("~")[1].split(" ")[0])
        limit = {"a2": 64, "a2-32g": 32, "a3": 64, "a5": 128}[device]
        expected = "error" if totals[device] > limit else "warning" if totals[device] > 0.9 * limit else "info"
        word = "die" if device == "a3" else "card"
        assert f["severity"] == expected and f" of {limit} GB per {word}" in f["message"], f
    assert len(set(totals.values())) == 1 and 32 < totals["a2"] < 57.6  # fits 64 GB with headroom, not 32 GB


def test_a3_tensor_parallel_across_servers_is_hccs_unless_disabled(home, monkeypatch):
    sets = ["trainer.nnodes=2", f"{ARR}.actor.megatron.tensor_model_parallel_size=32"]
    report = check("grpo_qwen2_5_7b_a3.sh", "a3", sets)
    span = [f for f in report["findings"] if f["subject"] == "parallel" and "spans" in f["message"]]
    assert [f["severity"] for f in span] == ["info"] and "HCCS" in span[0]["message"]
    monkeypatch.setenv("HCCL_INTER_HCCS_DISABLE", "TRUE")
    report = check("grpo_qwen2_5_7b_a3.sh", "a3", sets)
    span = [f for f in report["findings"] if f["subject"] == "parallel" and "spans" in f["message"]]
    assert [f["severity"] for f in span] == ["warning"] and "RoCE" in span[0]["message"]
    assert any(f["subject"] == "env" and f["keys"] == ["HCCL_INTER_HCCS_DISABLE"] for f in report["findings"])


def test_visible_devices_must_list_one_id_per_rank(home, monkeypatch):
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    (warn,) = flagged(check("grpo_qwen2_5_7b_a3.sh", "a3"))
    assert "lists 8 devices" in warn["message"] and "die indices" in warn["fix"]
    assert warn["subject"] == "node"  # the rule's name (rules.ALL), not the parallel rule's

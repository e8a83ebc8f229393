"""`verl-ascend rehearse`: a shipped Megatron GRPO recipe's real main_ppo loop on CPU, saved and resumed.

The rehearsal runs verl's own `python -m verl.trainer.main_ppo` (driver, Ray, verl's Megatron engine
at the recipe's TP2 over gloo from the converter's dist checkpoint, agent loop, hf rollout server,
reward loop, update, Megatron dist checkpoint, resume). Trainer path: the recipe's, i.e. verl 0.9.1's
default `trainer.use_v1=True` (TransferQueue). Cost: two main_ppo runs (train 1 step + resume 1 step,
2 ranks; ~330 s on 2 shared cores, ~5 GB). DAPO and the planted faults have files of their own
(test_rehearse_dapo.py, test_rehearse_faults.py) so the two pytest workers share them.
On a verl without a platform registry (0.6.1) only the refusal runs; which side runs is decided by
reading the installed verl's sources, and the detection itself is asserted on both.
"""

import json
import re
import tempfile
from pathlib import Path

import pytest
from rehearsal_helpers import SUPPORTED, VERL, assert_diagnosed_clean, assert_nothing_left, logs_tail, namespaces, needs_09, rehearse, steps
from subproc import clean_env, run_cli, run_python

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh"


def test_feature_detection_matches_the_installed_verl():
    proc = run_python("from verl_ascend.rehearse.rehearsal import support_problem; print(repr(support_problem()))")
    problem = eval(proc.stdout.strip())
    if SUPPORTED:
        assert problem == "", problem
    else:
        assert "platform registry" in problem, problem


@pytest.mark.skipif(SUPPORTED, reason=f"verl {VERL} supports rehearsal: the loop tests run")
def test_refusal_on_verl_without_platform_registry(tmp_path):
    proc = run_cli("rehearse", str(RECIPE), "--out", str(tmp_path / "out"), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "platform registry" in proc.stderr and "verl 0.9" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


@needs_09
def test_a_megatron_critic_or_a_reward_model_is_refused_naming_the_role_before_anything_runs(tmp_path):
    # PPO with GAE and no critic.enable: verl trains a critic (need_critic); on Megatron the plan does not scale it
    wild = ROOT / "tests" / "fixtures" / "wild_recipes" / "hub_id_with_critic.sh"
    proc = run_cli("rehearse", str(wild), "--out", str(tmp_path / "out"), "--override", "critic.strategy=megatron",
                   timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "runs a Megatron critic (critic.strategy=megatron" in proc.stderr, proc.stderr
    assert "--override critic.enable=False" in proc.stderr
    proc = run_cli("rehearse", str(wild), "--out", str(tmp_path / "out"), "--override", "algorithm.adv_estimator=grpo",
                   "--override", "reward.reward_model.enable=True", timeout=300)
    assert proc.returncode == 2 and "runs a reward model (reward.reward_model.enable=True)" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


@needs_09
@pytest.mark.parametrize("engine", ["veomni", "torchtitan"])
def test_an_engine_the_rehearsal_does_not_run_is_refused_by_name_not_planned_as_fsdp(tmp_path, engine):
    # verl 0.9.1 composes model_engine=veomni / torchtitan (its model_engine/*.yaml): the composed actor.strategy
    # names the engine; --plan once wrote actor.strategy=fsdp2 beside the recipe's model_engine=veomni, exit 0
    wild = ROOT / "tests" / "fixtures" / "wild_recipes" / "hub_id_with_critic.sh"
    proc = run_cli("rehearse", str(wild), "--plan", "--out", str(tmp_path / "out"), "--override",
                   "algorithm.adv_estimator=grpo", "--override", f"model_engine={engine}", timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"trains on verl's {engine} engine (actor_rollout_ref.actor.strategy={engine}, model_engine={engine})" \
        in proc.stderr, proc.stderr
    assert "megatron, fsdp, fsdp2" in proc.stderr and "Fix:" in proc.stderr
    assert not (tmp_path / "out").exists()


@needs_09
def test_the_recipes_bridge_is_run_or_named_never_swapped(tmp_path):
    # the shipped recipe with verl's default bridge (Megatron-Bridge), which no environment here installs
    import importlib.util

    if importlib.util.find_spec("megatron") and importlib.util.find_spec("megatron.bridge"):
        pytest.fail("megatron-bridge is installed in this test environment: this refusal cannot be shown here")
    proc = run_cli("rehearse", str(RECIPE), "--out", str(tmp_path / "out"),
                   "--override", "actor_rollout_ref.actor.megatron.vanilla_mbridge=False", timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "import megatron.bridge (actor_rollout_ref.actor.megatron.vanilla_mbridge=False)" in proc.stderr, proc.stderr
    assert "pip install megatron-bridge" in proc.stderr
    assert not (tmp_path / "out").exists()


REHEARSAL_RECORDS = {"rehearse_platform", "rehearse_backend", "rehearse_offload", "rehearse_rollout", "rehearse_report",
                     "rehearse_value_head",
                     "rehearse_mcore_cuda", "rehearse_mcore_rng", "rehearse_mcore_spec", "rehearse_mcore_attention",
                     "rehearse_mcore_optimizer", "rehearse_mcore_norm", "rehearse_mcore_moe"}


@needs_09
def test_rehearsal_fixes_are_inert_outside_and_act_inside_a_rehearsal():
    code = (
        "import importlib, json, torch, verl\n"
        "from verl.utils.device import get_device_name, get_nccl_backend, get_resource_name\n"
        "from torch.distributed.fsdp import CPUOffloadPolicy\n"
        "import verl.workers.rollout, verl.experimental.agent_loop.agent_loop\n"
        "from verl_ascend.core import activation, registry\n"
        "for name, (_, targets) in activation.PATCHES.items():\n"
        "    if name.startswith('rehearse_'):\n"
        "        for target in targets:\n"
        "            importlib.import_module(target)\n"
        "from megatron.core.tensor_parallel import random as mrandom\n"
        "from megatron.core.transformer.torch_norm import WrappedTorchNorm\n"
        "from megatron.core.optimizer import clip_grads\n"
        "out = dict(device=get_device_name(), backend=get_nccl_backend(), resource=get_resource_name(),\n"
        "           pin=CPUOffloadPolicy(pin_memory=True).pin_memory,\n"
        "           clip_grads_torch=clip_grads.torch is torch,\n"
        "           rng_state_is_host=bool(mrandom._get_cuda_rng_state.__module__.startswith('verl_ascend')),\n"
        "           states={p['name']: [p['state'], p['targets'][0]['detail']] for p in registry.snapshot()\n"
        "                   if p['name'].startswith('rehearse_')})\n"
        "if out['device'] == 'cpu':\n"
        "    from verl.workers.rollout.base import get_rollout_class\n"
        "    from verl.workers.rollout.replica import get_rollout_replica_class\n"
        "    out['rollout'] = [get_rollout_class('hf', 'async').__name__, get_rollout_replica_class('hf').__name__]\n"
        "    # megatron-core's own call site, through the redirected torch: a host tensor, not a CUDA error\n"
        "    from megatron.core import utils as mutils\n"
        "    out['l2'] = mutils.local_multi_tensor_l2_norm(None, None, [[torch.ones(4)]], False)[0].device.type\n"
        "print(json.dumps(out))\n"
    )
    stock = json.loads(run_python(code, timeout=300).stdout.strip().splitlines()[-1])
    assert stock["device"] != "cpu" and stock["pin"] is True and stock["clip_grads_torch"] is True, stock
    assert stock["rng_state_is_host"] is False, stock
    assert set(stock["states"]) == REHEARSAL_RECORDS, stock["states"]
    assert all(state == "not applicable" and "not a rehearsal" in why for state, why in stock["states"].values())
    inside = json.loads(run_python(code, env=clean_env(VERL_ASCEND_REHEARSE="1"), timeout=300)
                        .stdout.strip().splitlines()[-1])
    assert inside["device"] == "cpu" and inside["backend"] == "gloo" and inside["resource"] == "GPU", inside
    assert inside["pin"] is False and inside["clip_grads_torch"] is False and inside["rng_state_is_host"], inside
    assert inside["rollout"] == ["HFServerAdapter", "HFReplica"], inside
    assert inside["l2"] == "cpu", inside
    assert all(state == "applied" for state, _ in inside["states"].values()), inside["states"]


MINDSPEED_OPTION = "use_fused_rmsnorm"  # a MindSpeed-only key, as A2 users pass them (verl's NPU CI: use_flash_attn)


def mindspeed_events(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@needs_09
def test_rehearsal_of_a_shipped_megatron_grpo_recipe_trains_saves_and_resumes_on_megatron():
    """With an A2 node's Python packages on the path (the torch_npu and MindSpeed doubles, no NPU visible), as
    the node runs it: verl's MindspeedEngine, the `mindspeed` patch inside the Megatron workers."""
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        out, log_file = tmp / "out", tmp / "mindspeed.jsonl"
        env = clean_env(fake_npu=True, FAKE_NPU_COUNT=0, FAKE_MINDSPEED_LOG=log_file)
        option = f"++actor_rollout_ref.actor.megatron.override_transformer_config.{MINDSPEED_OPTION}=True"
        proc = rehearse(out, "--nproc", "2", "--steps", "1", "--override", option, env=env)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:] + logs_tail(out)
        changes = (out / "changes.txt").read_text()
        assert "trainer.use_v1=True" in changes  # the recipe's (verl's default) trainer path
        assert "FSDP" not in changes and "ppo_megatron_trainer ->" not in changes, changes
        for expected in ("engine: verl's MindSpeed engine (MindspeedEngineWithLMHead, as on an A2 node",
                         "over gloo, recipe TP2 PP1 -> TP2 PP1", "rollout -> hf",
                         "Qwen2ForCausalLM", "initial weights: the tiny model converted by verl-ascend convert",
                         "kept: actor_rollout_ref.actor.megatron.use_dist_checkpointing=True",
                         "reward: the recipe's (verl's default_compute_score", "learning rate -> 1e-3",
                         "kept: algorithm.adv_estimator=grpo", "kept: actor_rollout_ref.actor.kl_loss_type=low_var_kl"):
            assert expected in changes, (expected, changes)
        train, resumed = steps(out / "console.log"), steps(out / "console_resume.log")
        assert sorted(train) == [1] and sorted(resumed) == [2], (train.keys(), resumed.keys())
        log, resume_log = (out / "console.log").read_text(errors="replace"), (out / "console_resume.log").read_text()
        assert "Resuming from" in resume_log or "Load from checkpoint" in resume_log, resume_log[-2000:]
        # the engine the workers built: Megatron's (mbridge model, megatron optimizer), from the converted checkpoint
        engines = set(re.findall(r"\(WorkerDict pid=\d+\).*verl-ascend rehearse: engine in rank \d: (\w+) ", log))
        assert engines == {"MindspeedEngineWithLMHead"}, engines
        # MindSpeed in the workers, from their own records: the adaptor imported before any megatron module, and
        # verl's repatch handed the recipe's option with verl's own default (use_flash_attn)
        spaces = [space for space, _ in namespaces(proc.stdout)]  # train's, then the resume's
        assert len(spaces) == 2, proc.stdout[-2000:]
        workers = {(space, int(pid)) for space, text in zip(spaces, (log, resume_log))
                   for pid in re.findall(r"\(WorkerDict pid=(\d+)\)", text)}
        events = mindspeed_events(log_file)
        imports = {(e["pid_ns"], e["pid"]): e for e in events if e["event"] == "adaptor_import"}
        assert workers and workers <= set(imports), (workers, sorted(imports))
        for worker in workers:
            assert imports[worker]["megatron_imported_before"] == [], imports[worker]
        repatched = [e for e in events if e["event"] == "repatch" and (e["pid_ns"], e["pid"]) in workers]
        assert {(e["pid_ns"], e["pid"]) for e in repatched} == workers, (workers, repatched)
        for event in repatched:
            assert event["options"].get(MINDSPEED_OPTION) is True and event["options"].get("use_flash_attn") is True, event
        for rank in (0, 1):  # the patch's own verdict in each actor rank
            row = re.search(rf"patches in actor rank {rank} \(pid \d+\): .*?\bmindspeed ([a-z ]+?)(?:,|$)", log, re.M)
            assert row and row.group(1) == "applied", (rank, row)
        ckpts = sorted(p.name for p in (out / "checkpoints").glob("global_step_*"))
        assert ckpts == ["global_step_1", "global_step_2"], ckpts
        for part in ("model", "optimizer"):
            shards = list((out / "checkpoints" / "global_step_2" / "actor" / part / "dist_ckpt").glob("*.distcp"))
            assert shards, part  # Megatron dist checkpoints (torch DCP shards), not FSDP rank files
        for step, metrics in {**train, **resumed}.items():
            assert metrics["actor/grad_norm"] > 0, (step, metrics)  # a learning signal, with the recipe's reward
            assert metrics["critic/score/max"] > metrics["critic/score/min"], (step, metrics)  # varies in groups
            assert metrics["training/rollout_probs_diff_max"] < 1e-2, (step, metrics)  # weights reach the rollout
        assert abs(train[1]["actor/kl_loss"]) < 1e-6, train  # actor = reference at step 1
        # the resume brought back each TP rank's trained weights exactly, and step 2's update moved them
        for line in ("ok   resume loaded the weights global_step_1 saved: actor rank(s) 0, 1: each rank's digest",
                     "ok   the resumed update moved the weights (global_step_2 against global_step_1): actor rank(s) 0, 1"):
            assert line in proc.stdout, (line, proc.stdout[-3000:])
        # ckpt_validation inside verl's Megatron save and load, said by both actor ranks
        for rank in (0, 1):
            assert re.search(rf"\(WorkerDict pid=\d+\).*ckpt_validation in actor rank {rank} during save_checkpoint "
                             r"\(global_step_1\): validated [1-9]\d* shard entries in \d+ call\(s\), [\d.]+ s of the "
                             r"save_checkpoint's [\d.]+ s \([\d.]+%\)", log), rank  # the validation's share of the save
            assert re.search(rf"ckpt_validation in actor rank {rank} during load_checkpoint.*validated [1-9]\d* shard",
                             resume_log), rank
        verdict = re.search(r"\(TaskRunner\w* pid=\d+\).*verl-ascend rehearse: rollout dispatch "
                            r"AgentLoopManagerTQ\.generate_sequences: rollout_order not applicable on this path", log)
        assert verdict, log[-3000:]
        # ... and the TaskRunner's patch list says the same of rollout_order (applied, its wrapped call never made)
        assert re.search(r"patches in TaskRunner \(pid \d+\): .*rollout_order applied, inactive on this path", log), \
            re.findall(r"patches in TaskRunner.*", log)
        assert (out / "logs.png").stat().st_size > 0 and "parsed 2 step(s)" in (out / "logs_table.txt").read_text()
        assert_nothing_left(proc, out)
        assert_diagnosed_clean(out)
        # the checkpoint the loop wrote passes `ckpt check`; one truncated model shard is named
        ok = run_cli("ckpt", "check", str(out / "checkpoints"), timeout=300)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        shard = sorted((out / "checkpoints" / "global_step_2" / "actor" / "model" / "dist_ckpt").glob("*.distcp"))[0]
        with open(shard, "r+b") as fh:
            fh.truncate(max(1, shard.stat().st_size // 2))
        bad = run_cli("ckpt", "check", str(out / "checkpoints"), timeout=300)
        assert bad.returncode != 0 and shard.name in bad.stdout + bad.stderr, bad.stdout + bad.stderr

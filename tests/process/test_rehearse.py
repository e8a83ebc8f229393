"""`verl-ascend rehearse`: a shipped GRPO recipe's real main_ppo loop on CPU, its resume, a planted fault.

The rehearsal runs verl's own `python -m verl.trainer.main_ppo` (driver, Ray, FSDP2 workers over
gloo, agent loop, hf rollout server, reward loop, update, checkpoint, resume). Trainer path: the
recipe's, i.e. verl 0.9.1's default `trainer.use_v1=True` (TransferQueue). Cost: one rehearsal, i.e.
two main_ppo runs (train 1 step + resume 1 step, 2 ranks; ~380 CPU-seconds, ~4 min on 2 idle cores, ~5 GB), plus
one main_ppo that fails in its TaskRunner before any worker starts (planted data fault, ~80 s).
On a verl without a platform registry (0.6.1) only the refusal runs; which side runs is decided by
reading the installed verl's sources, and the detection itself is asserted on both.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import pytest
from subproc import clean_env, processes_naming, run_cli, run_python

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh"
VERL = version("verl")
SUPPORTED = not VERL.startswith(("0.6.", "0.7.", "0.8."))  # what the sources say is asserted below
needs_09 = pytest.mark.skipif(not SUPPORTED, reason=f"verl {VERL} has no platform registry: the refusal test runs")
RUN_TIMEOUT = 1500  # hard limit of one `rehearse` call; each main_ppo in it is ended after MAIN_PPO_TIMEOUT
MAIN_PPO_TIMEOUT = 600
# A reward that varies inside a GRPO group (the gsm8k rule gives a random model 0 everywhere,
# hence zero advantages and a zero gradient).
REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return (sum(map(ord, solution_str)) % 5) / 4.0
'''


def _rehearse(out: Path, *extra, timeout=RUN_TIMEOUT):
    return subprocess.run([sys.executable, "-m", "verl_ascend", "rehearse", str(RECIPE), "--out", str(out),
                           "--timeout", str(MAIN_PPO_TIMEOUT), *extra],
                          env=clean_env(), cwd=str(out.parent), capture_output=True, text=True, timeout=timeout)


def _steps(log: Path) -> dict:
    steps = {}
    for line in log.read_text(errors="replace").splitlines():
        match = re.search(r"step:(\d+) - (.*)", line)
        if match:
            metrics = dict(re.findall(r"([\w/@.\-]+):([-+0-9.eE]+|nan|inf)", match.group(2)))
            steps[int(match.group(1))] = {k: float(v) for k, v in metrics.items()}
    return steps


def _ray_folder(stdout: str) -> str:
    match = re.search(r"Ray in (\S+)", stdout)
    assert match, stdout[-2000:]
    return match.group(1)


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


REHEARSAL_RECORDS = {"rehearse_platform", "rehearse_backend", "rehearse_offload", "rehearse_rollout", "rehearse_report",
                     "rehearse_mcore_cuda", "rehearse_mcore_rng", "rehearse_mcore_spec", "rehearse_mcore_attention",
                     "rehearse_mcore_optimizer", "rehearse_mcore_norm"}


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


def _namespaces(stdout: str) -> list:
    return re.findall(r"main_ppo ran in PID namespace (pid:\[\d+\])", stdout)


def _alive_in(namespace: str) -> list:
    """Processes still in that PID namespace (Ray renames its workers, so command lines cannot tell)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "ns" / "pid") == namespace:
                found.append((entry.name, (entry / "cmdline").read_bytes()[:120]))
        except OSError:
            continue
    return found


def _assert_nothing_left(proc, out: Path):
    spaces = _namespaces(proc.stdout)
    assert spaces, proc.stdout[-2000:]  # every main_ppo ran in a PID namespace of its own
    for space in spaces:
        assert _alive_in(space) == [], space
    assert processes_naming(_ray_folder(proc.stdout), str(out)) == []


@needs_09
def test_rehearsal_of_a_shipped_megatron_grpo_recipe_trains_saves_and_resumes_on_megatron():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        out = tmp / "out"
        proc = _rehearse(out, "--nproc", "2", "--steps", "1")
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        changes = (out / "changes.txt").read_text()
        assert "trainer.use_v1=True" in changes  # the recipe's (verl's default) trainer path
        assert "FSDP" not in changes and "ppo_megatron_trainer ->" not in changes, changes
        for expected in ("engine: verl's Megatron engine over gloo, recipe TP2 PP1 -> TP2 PP1", "rollout -> hf",
                         "Qwen2ForCausalLM", "initial weights: the tiny model converted by verl-ascend convert",
                         "kept: actor_rollout_ref.actor.megatron.use_dist_checkpointing=True",
                         "reward: the recipe's (verl's default_compute_score", "learning rate -> 1e-3",
                         "kept: algorithm.adv_estimator=grpo", "kept: actor_rollout_ref.actor.kl_loss_type=low_var_kl"):
            assert expected in changes, (expected, changes)
        train, resumed = _steps(out / "console.log"), _steps(out / "console_resume.log")
        assert sorted(train) == [1] and sorted(resumed) == [2], (train.keys(), resumed.keys())
        log, resume_log = (out / "console.log").read_text(errors="replace"), (out / "console_resume.log").read_text()
        assert "Resuming from" in resume_log or "Load from checkpoint" in resume_log, resume_log[-2000:]
        # the engine the workers built: Megatron's (mbridge model, megatron optimizer), from the converted checkpoint
        engines = set(re.findall(r"\(WorkerDict pid=\d+\).*verl-ascend rehearse: engine in rank \d: (\w+) ", log))
        assert engines == {"MegatronEngineWithLMHead"}, engines
        ckpts = sorted(p.name for p in (out / "checkpoints").glob("global_step_*"))
        assert ckpts == ["global_step_1", "global_step_2"], ckpts
        for part in ("model", "optimizer"):
            shards = list((out / "checkpoints" / "global_step_2" / "actor" / part / "dist_ckpt").glob("*.distcp"))
            assert shards, part  # Megatron dist checkpoints (torch DCP shards), not FSDP rank files
        for step, metrics in {**train, **resumed}.items():
            assert metrics["actor/grad_norm"] > 0, (step, metrics)  # a learning signal, with the recipe's reward
            assert metrics["critic/score/max"] > metrics["critic/score/min"], (step, metrics)  # varies in groups
            assert metrics["training/rollout_probs_diff_max"] < 1e-2, (step, metrics)  # weights reach the rollout
        kl = [train[1]["actor/kl_loss"], resumed[2]["actor/kl_loss"]]
        assert abs(kl[0]) < 1e-6 and kl[1] > 1e-6, kl  # a resume from the initial weights would read 0 again
        # ckpt_validation inside verl's Megatron save and load, said by both actor ranks
        for rank in (0, 1):
            assert re.search(rf"\(WorkerDict pid=\d+\).*ckpt_validation in actor rank {rank} during save_checkpoint "
                             r"\(global_step_1\): validated [1-9]\d* shard entries", log), rank
            assert re.search(rf"ckpt_validation in actor rank {rank} during load_checkpoint.*validated [1-9]\d* shard",
                             resume_log), rank
        verdict = re.search(r"\(TaskRunner\w* pid=\d+\).*verl-ascend rehearse: rollout dispatch "
                            r"AgentLoopManagerTQ\.generate_sequences: rollout_order not applicable on this path", log)
        assert verdict, log[-3000:]
        assert (out / "logs.png").stat().st_size > 0 and "parsed 2 step(s)" in (out / "logs_table.txt").read_text()
        _assert_nothing_left(proc, out)
        # the checkpoint the loop wrote passes `ckpt check`; one truncated model shard is named
        ok = run_cli("ckpt", "check", str(out / "checkpoints"), timeout=300)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        shard = sorted((out / "checkpoints" / "global_step_2" / "actor" / "model" / "dist_ckpt").glob("*.distcp"))[0]
        with open(shard, "r+b") as fh:
            fh.truncate(max(1, shard.stat().st_size // 2))
        bad = run_cli("ckpt", "check", str(out / "checkpoints"), timeout=300)
        assert bad.returncode != 0 and shard.name in bad.stdout + bad.stderr, bad.stdout + bad.stderr


@needs_09
def test_a_data_file_missing_a_column_fails_the_rehearsal_naming_it_and_leaves_nothing_running():
    # The planted fault `check` cannot see: the recipe's own data files (its DATA_DIR) lack the prompt
    # column. verl's dataset in the TaskRunner raises before any worker starts, the cheapest fault in the loop.
    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        data = tmp / "data"
        data.mkdir()
        table = pa.table({"data_source": ["openai/gsm8k"] * 8, "question": [f"{i} + {i}?" for i in range(8)],
                          "reward_model": [{"style": "rule", "ground_truth": str(2 * i)} for i in range(8)]})
        for name in ("train", "test"):
            pq.write_table(table, data / f"{name}.parquet")
        out = tmp / "out"
        proc = _rehearse(out, "--nproc", "1", "--steps", "1", "--env", f"DATA_DIR={data}")
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert f"data: the recipe's {data / 'train.parquet'}" in (out / "changes.txt").read_text()
        assert "KeyError: 'prompt'" in proc.stderr, proc.stderr[-3000:]
        assert not list((out / "checkpoints").glob("global_step_*"))
        assert processes_naming(_ray_folder(proc.stdout), str(out)) == []


RAISING_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    raise ValueError("planted reward fault: the recipe's reward function raises")
'''
DAPO_RECIPE = ROOT / "recipes" / "dapo_qwen2_5_7b_a2.sh"


def _drop_one_tensor(dist_ckpt: Path) -> str:
    """Remove one weight from a Megatron dist checkpoint's index (what a half-finished copy leaves)."""
    import pickle

    meta = dist_ckpt / ".metadata"
    metadata = pickle.loads(meta.read_bytes())
    victim = sorted(k for k in metadata.state_dict_metadata if "linear_fc2.weight" in k)[0]
    del metadata.state_dict_metadata[victim]
    meta.write_bytes(pickle.dumps(metadata))
    return victim


@contextlib.contextmanager
def _cpu_load():
    """One busy process beside the run (CI runs under load); its group is ended on exit."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        yield
    finally:
        os.killpg(burner.pid, signal.SIGKILL)
        burner.wait()


@needs_09
def test_faults_planted_in_the_megatron_path_are_named_and_leave_nothing_running():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp, _cpu_load():
        tmp = Path(tmp)
        (tmp / "raising_reward.py").write_text(RAISING_REWARD)
        out = tmp / "reward_fault"
        proc = _rehearse(out, "--nproc", "1", "--steps", "1", "--keep-model",
                         "--override", f"reward.custom_reward_function.path={tmp / 'raising_reward.py'}")
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "ValueError: planted reward fault" in proc.stderr, proc.stderr[-3000:]
        assert not list((out / "checkpoints").glob("global_step_*"))
        _assert_nothing_left(proc, out)
        # a converted checkpoint missing one tensor, given as the recipe's initial weights
        damaged = tmp / "damaged_mcore"
        conv = run_cli("convert", "--hf_model_path", str(out / "model"), "--output_path", str(damaged), timeout=600)
        assert conv.returncode == 0, conv.stderr[-2000:]
        victim = _drop_one_tensor(damaged)
        out2 = tmp / "ckpt_fault"
        proc = _rehearse(out2, "--nproc", "1", "--steps", "1",
                         "--override", f"actor_rollout_ref.actor.megatron.dist_checkpointing_path={damaged}",
                         "--override", f"actor_rollout_ref.ref.megatron.dist_checkpointing_path={damaged}")
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert victim in proc.stderr, (victim, proc.stderr[-3000:])
        _assert_nothing_left(proc, out2)


@needs_09
def test_rehearsal_of_the_shipped_dapo_recipe_without_a_verl_tree_filters_groups_and_resumes():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        out = tmp / "out"
        proc = subprocess.run([sys.executable, "-m", "verl_ascend", "rehearse", str(DAPO_RECIPE), "--out", str(out),
                               "--timeout", str(MAIN_PPO_TIMEOUT), "--nproc", "2", "--steps", "1",
                               "--env", f"VERL_SRC={tmp / 'no-verl-tree'}"],
                              env=clean_env(), cwd=str(tmp), capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        changes = (out / "changes.txt").read_text()
        assert "(verl.trainer.main_ppo," in changes and "verl's Megatron engine" in changes, changes
        for kept in ("algorithm.filter_groups.enable=True", "algorithm.filter_groups.metric=acc",
                     "reward.reward_manager.name=dapo", "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
                     "actor_rollout_ref.actor.clip_ratio_high=0.28", "actor_rollout_ref.actor.loss_agg_mode=token-mean"):
            assert f"kept: {kept}" in changes, (kept, changes)
        train, resumed = _steps(out / "console.log"), _steps(out / "console_resume.log")
        assert sorted(train) == [1] and sorted(resumed) == [2], (train.keys(), resumed.keys())
        for step, metrics in {**train, **resumed}.items():
            assert any("filter_groups" in key for key in metrics), (step, sorted(metrics))  # DAPO's dynamic sampling
            assert metrics["actor/grad_norm"] > 0, (step, metrics)
        assert sorted(p.name for p in (out / "checkpoints").glob("global_step_*")) == ["global_step_1", "global_step_2"]
        _assert_nothing_left(proc, out)


def test_dapo_through_main_dapo_needs_a_verl_tree_that_ci_does_not_have():
    # With VERL_SRC naming a verl checkout with recipe/dapo/main_dapo.py (verl-recipe), rehearse runs main_dapo
    # there; that was tried by hand (docs/rehearse.md). CI has no such tree, so what runs here is the refusal
    # of a tree without it, naming the fix: a silent skip would hide that this path is not exercised.
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        fake_tree = Path(tmp) / "verl"
        (fake_tree / "recipe" / "dapo").mkdir(parents=True)
        (fake_tree / "recipe" / "dapo" / "main_dapo.py").write_text("")
        proc = run_cli("rehearse", str(DAPO_RECIPE), "--out", str(Path(tmp) / "out"), "--env", f"VERL_SRC={fake_tree}",
                       "--env", "DAPO_LAYOUT=reward", timeout=300)
        if SUPPORTED:
            # the recipe chose main_dapo from that tree (read in the sandbox); main_dapo itself is empty here, so
            # the run fails in main_ppo's place, after the plan: the recipe's choice is what is asserted
            assert "recipe.dapo.main_dapo" in (Path(tmp) / "out" / "changes.txt").read_text()
            assert proc.returncode == 1, proc.stderr[-2000:]
        else:
            assert proc.returncode == 2 and "platform registry" in proc.stderr, proc.stderr


@pytest.mark.verl_agnostic
def test_learning_note_only_when_no_step_had_a_gradient(tmp_path):
    from verl_ascend.rehearse.rehearsal import learning_note

    flat, moving = tmp_path / "flat.log", tmp_path / "moving.log"
    flat.write_text("step:1 - actor/grad_norm:0.0 - critic/score/mean:0.0\nstep:2 - actor/grad_norm:0.0 - x:1\n")
    moving.write_text("step:3 - actor/grad_norm:0.71 - critic/score/mean:0.4\n")
    assert "grad_norm is 0 at every step" in learning_note([flat])
    assert learning_note([flat, moving]) == ""

"""patches/: every verl diff applies to the published source of its version, and a source tree with
the diff applied behaves like the runtime patch with the plugin switched off (VERL_ASCEND=0)."""

import os
import shutil
import subprocess

import pytest
from subproc import FAKE_SITE, SUBPROC_SITE, clean_env, last_json, run_python
from upstream_trees import apply, copy_tree, installed_version, verl_tree

from verl_ascend.diffs.check import dry_run, load_diffs

VERL_DIFFS = [d for d in load_diffs() if d.project == "verl"]


def _ids(diff):
    return f"{diff.version}/{diff.fix}"


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("diff", VERL_DIFFS, ids=_ids)
def test_diff_applies_to_published_source(diff):
    root = verl_tree(diff.version)
    ok, message = dry_run(diff.path, root)
    assert ok, f"git apply --check: {message}"
    proc = subprocess.run(["patch", "-p1", "--dry-run", "--batch", "--forward", "--fuzz=0", "-i", str(diff.path)],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {"Subject", "Runtime-patch", "Upstream", "Remove-when"} <= set(diff.header), diff.header


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("version", sorted({d.version for d in VERL_DIFFS}))
def test_all_diffs_of_a_version_apply_together(version, tmp_path):
    # in either order: each diff is independent of the others, so a user may pick any subset
    mine = [d for d in VERL_DIFFS if d.version == version]
    reversed_root = copy_tree(version, tmp_path / "reversed")
    for diff in reversed(mine):
        apply(diff.path, reversed_root)
    root = copy_tree(version, tmp_path / "sorted")
    for diff in mine:
        apply(diff.path, root)
        assert dry_run(diff.path, root, reverse=True)[0], f"{diff.fix} does not read as applied"
    compiled = subprocess.run(["python", "-m", "compileall", "-q", str(root / "verl")],
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr


# --- behaviour of the patched source, in the environment whose verl is that version -------------

MSTX = """
import types, torch_npu
if not hasattr(torch_npu.npu, "mstx"):  # markers verl's profiler imports on NPU; older doubles lack them
    torch_npu.npu.mstx = types.SimpleNamespace(mark=lambda *a, **k: None, range_start=lambda *a, **k: 0,
                                               range_end=lambda *a, **k: None, mstx_range=lambda *a, **k: (lambda f: f))
"""

DEVICE_PROBE = """
import json{prelude}
import verl
from verl.utils.device import get_device_name, get_nccl_backend
out = {{"verl_file": verl.__file__, "device": get_device_name(), "backend": get_nccl_backend()}}
{extra}
print(json.dumps(out))
"""

# RayPPOTrainer built from verl's own composed ppo_trainer config (trainer.device defaults to cuda).
TRAINER_PROBE = """
import os
from hydra import compose, initialize_config_dir
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, Role
with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None):
    config = compose(config_name="ppo_trainer")
    cpu_config = compose(config_name="ppo_trainer", overrides=["trainer.device=cpu"])
RayPPOTrainer._create_dataloader = lambda self, *args, **kwargs: None  # needs datasets; not under test
out["config_device_before"] = config.trainer.device
def build(cfg):
    return RayPPOTrainer(config=cfg, tokenizer=None, role_worker_mapping={Role.ActorRollout: object},
                         resource_pool_manager=None)
out["trainer_device"] = build(config).device_name
out["config_device_after"] = config.trainer.device
out["cpu_kept"] = build(cpu_config).device_name
"""

# Stand-in rollout workers echo [prompt id, worker, position in the worker's chunk] per row, so the
# report shows which worker got which sample and whether each response came back to its prompt.
ROLLOUT_PROBE = """
import asyncio, inspect, types
import numpy as np, ray, torch
from omegaconf import OmegaConf
from verl.protocol import DataProto
from verl.experimental.agent_loop import agent_loop
from verl.utils import rollout_order

P, N, W = 4, 4, 2
use_ray = "ray.get(" in inspect.getsource(agent_loop.AgentLoopManager.generate_sequences)  # 0.6.x
if use_ray:
    ray.init(num_cpus=1, num_gpus=0, include_dashboard=False, log_to_driver=False)


def make_batch(prompts):
    ids = torch.arange(prompts).unsqueeze(1) * 10 + torch.arange(3)
    return DataProto.from_single_dict({"input_ids": ids, "attention_mask": torch.ones_like(ids),
        "uid": np.array([f"uid-{p}" for p in range(prompts)], dtype=object),
        "reward_model": np.array([{"ground_truth": f"gt-{p}"} for p in range(prompts)], dtype=object)})


def echo(chunk, worker):
    ids = chunk.batch["input_ids"]
    pid = ids[:, 0] // 10
    resp = torch.stack([pid, torch.full_like(pid, worker), torch.arange(len(chunk))], dim=1)
    fields = {"prompts": ids, "responses": resp, "input_ids": torch.cat([ids, resp], 1),
              "attention_mask": torch.ones(len(chunk), ids.shape[1] + 3, dtype=torch.long)}
    if "uid" in chunk.non_tensor_batch:
        fields["uid"] = chunk.non_tensor_batch["uid"].copy()  # union then refuses a misaligned join
    out = DataProto.from_single_dict(fields)
    sample = {"generate_sequences": 0.001, "tool_calls": 0.0, "compute_score": 0.0, "num_preempted": 0}
    out.meta_info["metrics"] = [dict(sample) for _ in range(len(chunk))]
    return out


class Worker:
    def __init__(self, rank):
        self.rank = rank
        self.generate_sequences = types.SimpleNamespace(remote=self.remote)

    def remote(self, chunk):
        out = echo(chunk, self.rank)
        if use_ray:
            return ray.put(out)
        async def done():
            return out
        return done()


manager = agent_loop.AgentLoopManager.__new__(agent_loop.AgentLoopManager)
manager.config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"free_cache_engine": False}},
                                   "reward_model": {"rollout": {"free_cache_engine": False}}})
manager.reward_model_manager = None
manager.agent_loop_workers = [Worker(w) for w in range(W)]


def spmd_generate(batch):  # what the worker group's DP dispatch does: contiguous chunks by rank
    return DataProto.concat([echo(chunk, w) for w, chunk in enumerate(batch.chunk(W))])


def step(generate, with_uid=True):
    batch = make_batch(P)
    gen_batch = batch.pop(batch_keys=["input_ids", "attention_mask"])
    if with_uid:
        gen_batch.non_tensor_batch["uid"] = batch.non_tensor_batch["uid"].copy()
    gen_batch = gen_batch.repeat(repeat_times=N, interleave=True)
    merged = batch.repeat(repeat_times=N, interleave=True).union(generate(gen_batch))
    dispatch = {}
    for prompt, worker, pos in merged.batch["responses"].tolist():
        dispatch.setdefault(str(worker), {})[pos] = prompt
    return {"dispatch": {w: [d[k] for k in sorted(d)] for w, d in sorted(dispatch.items())},
            "prompts": [int(r[0]) for r in merged.batch["responses"].tolist()],
            "uids": [str(u) for u in merged.non_tensor_batch["uid"]],
            "priority": [int(x) for x in gen_batch.non_tensor_batch.get("priority", [])]}


rollout = {"on": {"agent_loop": step(manager.generate_sequences),
                  "spmd": step(lambda b: rollout_order.generate_in_tiled_order(spmd_generate, b), with_uid=False)}}
os.environ["VERL_ROLLOUT_DISPATCH_ORDER"] = "interleaved"
rollout["off"] = {"agent_loop": step(manager.generate_sequences)}
out["rollout"] = rollout
"""

# Megatron worker setup on CPU with the MindSpeed double (it records every repatch): legacy workers
# (verl <= 0.7) through _init_hf_config_and_tf_config, engine workers (0.8+) through _build_tf_config.
MINDSPEED_OPTIONS = {"use_flash_attn": True, "use_fused_rmsnorm": True, "use_fused_swiglu": True,
                     "recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
MINDSPEED_KEYS = {"use_flash_attn", "use_fused_rmsnorm", "use_fused_swiglu"}
MINDSPEED_PROBE = """
import importlib.util
import mindspeed.megatron_adaptor as adaptor
from verl_cpu_workers import engine_with_tf_config, init_distributed, legacy_worker, saved_model_dir, tiny_qwen2
OPTIONS = %r
HF = tiny_qwen2()
init_distributed()
ms = {}
if importlib.util.find_spec("verl.workers.megatron_workers") is not None:
    from megatron.core import parallel_state
    from verl.workers import megatron_workers as workers
    parallel_state.initialize_model_parallel()
    model_dir = saved_model_dir(HF)
    tf = legacy_worker(workers.CriticWorker, model_dir, OPTIONS).tf_config
    ms["repatch_after_critic"] = sum(e["event"] == "repatch" for e in adaptor.events)
    actor_options = dict(OPTIONS, use_fused_rotary_pos_emb=True)
    workers._mindspeed_repatch(actor_options)  # what the patched ActorRolloutRefWorker.__init__ calls
    actor = legacy_worker(workers.ActorRolloutRefWorker, model_dir, actor_options)
    ms["actor_has_rope"] = hasattr(actor.tf_config, "use_fused_rotary_pos_emb")
else:
    engine, config = engine_with_tf_config(HF, OPTIONS)
    tf = engine.tf_config
    ms["options_after"] = sorted(config.override_transformer_config)
ms.update(repatch=[e["options"] for e in adaptor.events if e["event"] == "repatch"], tf_type=type(tf).__name__,
          tf_has={k: hasattr(tf, k) for k in OPTIONS}, recompute=getattr(tf, "recompute_granularity", None))
out["mindspeed"] = ms
""" % (MINDSPEED_OPTIONS,)

# MindSpeed's adaptor imports transfer_to_npu before verl; a stray nvidia-smi is on PATH: the worst case.
ASCEND_PRELUDE = "\nimport torch_npu.contrib.transfer_to_npu"


def _diffs_for_installed(fix=None):
    version = installed_version()
    chosen = [d for d in VERL_DIFFS if d.version == version and (fix is None or d.fix == fix)]
    if not chosen:
        pytest.skip(f"no {fix or 'verl'} diff for the installed verl {version}")
    return chosen


@pytest.fixture(scope="module")
def patched_tree(tmp_path_factory):
    """A copy of the installed verl with every diff for its version applied."""
    root = copy_tree(installed_version(), tmp_path_factory.mktemp("patched"))
    for diff in _diffs_for_installed():
        apply(diff.path, root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _patched_env(root, fake_npu=True, **extra):
    env = clean_env(fake_npu=fake_npu, VERL_ASCEND="0", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *([str(FAKE_SITE)] if fake_npu else []), str(SUBPROC_SITE)])
    return env


def _has(fix):
    return any(d.fix == fix for d in VERL_DIFFS if d.version == installed_version())


@pytest.fixture(scope="module")
def patched_probe(patched_tree):
    """One fresh interpreter on the patched copy, plugin off, Ascend doubles on (the worst case:
    MindSpeed's transfer_to_npu imported first, a stray nvidia-smi on PATH). Every diff's observable
    behaviour is read from this one run (each interpreter costs seconds of verl imports)."""
    extra = "import os\n" + "".join(probe for fix, probe in (("trainer_device", TRAINER_PROBE), ("rollout_order", ROLLOUT_PROBE),
                                                            ("mindspeed", MINDSPEED_PROBE)) if _has(fix))
    code = DEVICE_PROBE.format(prelude=MSTX + ASCEND_PRELUDE, extra=extra)
    out = last_json(run_python(code, env=_patched_env(patched_tree, bins=("nvidia-smi",)), timeout=420))
    assert out["verl_file"].startswith(str(patched_tree))
    return out


def test_patched_source_gives_npu_like_the_runtime_patch(patched_probe):
    _diffs_for_installed("device")
    # The runtime patch's answer in the same situation (tests/process/test_device.py::test_all_three_at_once);
    # stock verl answers cuda there (test_transfer_to_npu_without_plugin_reproduces_the_bug).
    assert (patched_probe["device"], patched_probe["backend"]) == ("npu", "hccl")


def test_patched_source_switches_trainer_device_like_the_runtime_patch(patched_probe):
    _diffs_for_installed("trainer_device")
    # runtime patch trainer_device: the default cuda becomes npu, cpu is kept
    assert patched_probe["config_device_before"] == "cuda"
    assert (patched_probe["trainer_device"], patched_probe["config_device_after"]) == ("npu", "npu")
    assert patched_probe["cpu_kept"] == "cpu"


def test_patched_source_dispatches_tiled_like_the_runtime_patch(patched_probe):
    _diffs_for_installed("rollout_order")
    on, off = patched_probe["rollout"]["on"], patched_probe["rollout"]["off"]
    interleaved = [p for p in range(4) for _ in range(4)]
    # Same dispatch as the runtime patch (rollout branch, tests/process/test_rollout_order_ray.py): every
    # worker gets every prompt, 2 samples each; the trainer still sees interleaved, aligned rows.
    for path in ("agent_loop", "spmd"):
        assert on[path]["dispatch"] == {"0": [0, 1, 2, 3] * 2, "1": [0, 1, 2, 3] * 2}, path
        assert on[path]["prompts"] == interleaved
        assert on[path]["uids"] == [f"uid-{p}" for p in interleaved]
    # switched off: verl's stock dispatch, whole prompts per worker
    assert off["agent_loop"]["dispatch"] == {"0": [0, 0, 0, 0, 1, 1, 1, 1], "1": [2, 2, 2, 2, 3, 3, 3, 3]}
    assert off["agent_loop"]["prompts"] == interleaved
    if on["agent_loop"]["priority"]:  # verl 0.9: per-sample priority = position in the dispatch
        assert on["agent_loop"]["priority"] == [s * 4 + p for p in range(4) for s in range(4)]


def test_patched_source_splits_mindspeed_options_like_the_runtime_patch(patched_probe):
    _diffs_for_installed("mindspeed")
    ms = patched_probe["mindspeed"]
    # With MindSpeed 2.2+ (the double's default generation) the config builds and Megatron's values
    # take effect; MindSpeed's own TransformerConfig wrapper takes its keys whatever the split does,
    # so what the diff must deliver is repatch with the MindSpeed keys in every worker.
    assert ms["tf_type"].endswith("TransformerConfig") and ms["recompute"] == "full"
    assert MINDSPEED_KEYS <= set(ms["repatch"][0])
    if "repatch_after_critic" in ms:  # legacy workers: the critic now repatches; the actor's is not repeated
        assert ms["repatch_after_critic"] == 1
        assert len(ms["repatch"]) == 2 and ms["repatch"][1].get("use_fused_rotary_pos_emb") is True
    else:  # engine workers: verl's MindspeedEngine repatches once; the engine config keeps every option
        assert len(ms["repatch"]) == 1
        assert MINDSPEED_KEYS <= set(ms["options_after"])


def test_patched_source_changes_nothing_without_ascend(patched_tree):
    # Stock verl's answer here comes from the installed verl with the plugin on, which off Ascend hosts
    # changes nothing (tests/process/test_device.py::test_without_doubles_the_answer_is_verls_own); the same
    # run shows the installed verl passes the supported-range probe. The stock answer in the Ascend
    # situation (cuda) is tests/process/test_device.py::test_transfer_to_npu_without_plugin_reproduces_the_bug.
    _diffs_for_installed("device")
    patched = last_json(run_python(DEVICE_PROBE.format(prelude="", extra=""), env=_patched_env(patched_tree, fake_npu=False)))
    extra = "from verl_ascend.core import support\nout['support'] = support.verdict()"
    proc = run_python(DEVICE_PROBE.format(prelude="", extra=extra))
    stock = last_json(proc)
    assert patched["verl_file"].startswith(str(patched_tree))
    assert (patched["device"], patched["backend"]) == (stock["device"], stock["backend"])
    assert stock["support"] == {"verl": installed_version(), "supported": True, "reason": ""}
    assert "is outside the range" not in proc.stderr


def test_patched_source_reports_broken_torch_npu_once(patched_tree):
    # The runtime patch raises with the CANN fix; the diff, fit for upstream, warns once and carries on.
    _diffs_for_installed("device")
    proc = run_python(DEVICE_PROBE.format(prelude="", extra=""),
                      env=_patched_env(patched_tree, FAKE_TORCH_NPU_BROKEN="1"))
    out = last_json(proc)
    warnings = [ln for ln in proc.stderr.splitlines() if "torch_npu is installed but cannot be imported" in ln]
    assert len(warnings) == 1, proc.stderr[-3000:]
    assert "libhccl.so" in warnings[0] and "set_env.sh" in warnings[0]
    assert out["device"] != "npu"

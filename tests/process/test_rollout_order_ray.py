"""End to end on Ray (CPU): verl's own split-and-join code with the patch on, then with it off.

One fresh interpreter (VERL_ASCEND_ROLLOUT_ORDER=tiled, so the patch lands through the plugin's
import hook) starts Ray, builds a real ``RayWorkerGroup`` of two stand-in rollout workers
(``tests/fakes/rollout/echo_rollout.py``: they echo the prompt id) and an ``AgentLoopManager``
whose agent-loop workers are those same two actors, and runs the trainer's steps around them:
``repeat(n, interleave=True)`` -> ``generate_sequences`` -> ``batch.repeat(n).union(output)``, and
validation's pad -> generate -> unpad. Then it undoes the patch (``rollout_order.revert``; for the
worker group, verl's own Functor) and runs the same steps stock.
"""

import pytest
from subproc import FAKES, clean_env, last_json, run_python

P, N, W = 4, 4, 2  # 4 prompts x 4 samples over 2 workers: stock keeps each prompt on one worker

SCRIPT = """
import json
import ray

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
from omegaconf import OmegaConf
from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto
from verl.experimental.agent_loop import agent_loop
from verl.single_controller.ray.base import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
from echo_rollout import EchoRolloutWorker, make_batch
from verl_ascend.core import registry
from verl_ascend.patches import rollout_order

P, N, W = {P}, {N}, {W}
pool = RayResourcePool([W], use_gpu=False, max_colocate_count=1)
wg = RayWorkerGroup(pool, RayClassWithInitArgs(cls=ray.remote(EchoRolloutWorker)))
manager = agent_loop.AgentLoopManager.__new__(agent_loop.AgentLoopManager)
manager.config = OmegaConf.create({{"actor_rollout_ref": {{"rollout": {{"free_cache_engine": False}}}}}})
manager.reward_model_manager = None
manager.agent_loop_workers = wg.workers  # the same two actors answer agent-loop calls


def report(merged):
    rows = merged.batch["responses"].tolist()
    dispatch = {{}}
    for prompt, worker, pos in rows:
        dispatch.setdefault(str(worker), {{}})[pos] = prompt
    return {{
        "trainer": [[int(i) // 10, u, rm["ground_truth"], r[0]] for i, u, rm, r in zip(
            merged.batch["input_ids"][:, 0].tolist(), merged.non_tensor_batch["uid"],
            merged.non_tensor_batch["reward_model"], rows)],
        "dispatch": {{w: [by_pos[k] for k in sorted(by_pos)] for w, by_pos in dispatch.items()}},
    }}


def gen_batch_of(batch):  # RayPPOTrainer._get_gen_batch: prompt tensors move to the gen batch; uid is copied
    gen_batch = batch.pop(batch_keys=["input_ids", "attention_mask"])
    gen_batch.non_tensor_batch["uid"] = batch.non_tensor_batch["uid"].copy()
    return gen_batch


def train_step(generate):
    batch = make_batch(P)
    gen_batch = gen_batch_of(batch)
    output = generate(gen_batch.repeat(repeat_times=N, interleave=True))
    return report(batch.repeat(repeat_times=N, interleave=True).union(output))


def validate_step(generate, n_val=3, prompts=3):  # 9 rows over 2 workers: verl pads to 10
    batch = make_batch(prompts).repeat(repeat_times=n_val, interleave=True)
    gen_batch = gen_batch_of(batch)
    padded, pad = pad_dataproto_to_divisor(gen_batch, W)
    output = unpad_dataproto(generate(padded), pad_size=pad)
    return report(batch.union(output))


def steps(manager_call, wg_call):
    return {{"agent_loop_train": train_step(manager_call), "agent_loop_validate": validate_step(manager_call),
             "worker_group_train": train_step(wg_call)}}


status = registry.summarize("rollout_order")
on = steps(manager.generate_sequences, wg.generate_sequences)
rollout_order.revert(agent_loop)
off = steps(manager.generate_sequences, wg.generate_sequences.functor)
ray.shutdown()
print(json.dumps({{"status": status, "on": on, "off": off, "wg_call": type(wg.generate_sequences).__name__}}))
"""


@pytest.fixture(scope="module")
def e2e():
    env = clean_env(VERL_ASCEND_ROLLOUT_ORDER="tiled", PYTHONPATH=str(FAKES / "rollout"), RAY_DEDUP_LOGS="0")
    return last_json(run_python(SCRIPT.format(P=P, N=N, W=W), env=env, timeout=900))


def expected_trainer_rows(prompts, n):
    return [[p, f"uid-{p}", f"gt-{p}", p] for p in range(prompts) for _ in range(n)]


def test_status_shows_both_dispatch_points(e2e):
    targets = {row["target"]: row for row in e2e["status"]["targets"]}
    assert e2e["status"]["state"] == "applied"
    assert targets["verl.experimental.agent_loop.agent_loop"]["state"] == "applied"
    assert targets["verl.single_controller.ray.base"]["state"] == "applied"
    assert "VERL_ASCEND_ROLLOUT_ORDER=tiled" in targets["verl.single_controller.ray.base"]["detail"]
    assert e2e["wg_call"] == "_TiledCall"


@pytest.mark.parametrize("path", ["agent_loop_train", "worker_group_train"])
def test_patch_on_dispatches_tiled_and_trainer_order_is_unchanged(e2e, path):
    on, off = e2e["on"][path], e2e["off"][path]
    # every worker got every prompt, N / W samples each, in tiled order
    assert on["dispatch"] == {"0": [0, 1, 2, 3] * 2, "1": [0, 1, 2, 3] * 2}
    # the trainer sees interleaved rows, each response next to its own prompt, uid and ground truth
    assert on["trainer"] == expected_trainer_rows(P, N)
    assert on["trainer"] == off["trainer"]


@pytest.mark.parametrize("path", ["agent_loop_train", "worker_group_train"])
def test_patch_off_is_verls_stock_dispatch(e2e, path):
    off = e2e["off"][path]
    assert off["dispatch"] == {"0": [0, 0, 0, 0, 1, 1, 1, 1], "1": [2, 2, 2, 2, 3, 3, 3, 3]}
    assert off["trainer"] == expected_trainer_rows(P, N)


def test_validation_with_padding_realigns(e2e):
    on, off = e2e["on"]["agent_loop_validate"], e2e["off"]["agent_loop_validate"]
    # 3 prompts x 3 samples + 1 padding copy of row 0, dispatched last on worker 1; unpad drops
    # its response, so the rows that reach the trainer are the 9 real ones.
    assert on["dispatch"] == {"0": [0, 1, 2, 0, 1], "1": [2, 0, 1, 2]}
    assert off["dispatch"] == {"0": [0, 0, 0, 1, 1], "1": [1, 2, 2, 2]}
    assert on["trainer"] == off["trainer"] == expected_trainer_rows(3, 3)

"""TEST DOUBLE of verl's rollout workers' generate_sequences, for the rollout_order tests: it echoes the prompt id.

A prompt row's ``input_ids`` start with ``10 * prompt_id`` (``make_batch``). Every generated row is
``responses = [prompt_id, worker, position in that worker's slice]``, so a test can tell which
worker produced a row and whether it came back next to its own prompt. The ``uid`` column is
echoed too: verl's ``union`` then refuses a misaligned join.

Models (the interface, not the generation): verl's rollout worker groups' ``generate_sequences`` —
``ActorRolloutRefWorker.generate_sequences`` in ``verl/workers/fsdp_workers.py`` (verl 0.6.1, sync/spmd
rollout: registered with ``make_nd_compute_dataproto_dispatch_fn(mesh_name="rollout")``, each rank
registering its rollout DP rank in ``ActorRolloutRefWorker._build_rollout``; with one rank per rollout
replica -- the ``hf`` rollout, or infer TP 1 -- that is ``dp_rank=self.rank, is_collect=True``) and
``AgentLoopWorker.generate_sequences`` in ``verl/experimental/agent_loop/agent_loop.py`` (0.6.1 and
0.9.1): a DataProto slice in, one response row per input row out, in input order.
Sources: https://github.com/volcengine/verl/blob/v0.6.1/verl/workers/fsdp_workers.py and
https://github.com/volcengine/verl/blob/v0.9.1/verl/experimental/agent_loop/agent_loop.py
Checked against the installed verl by tests/unit/test_echo_rollout_double.py: the same @register record as the
real ActorRolloutRefWorker.generate_sequences where verl has it, one DataProto argument like AgentLoopWorker's.
"""

import numpy as np
import torch
from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import make_nd_compute_dataproto_dispatch_fn, register

PROMPT_LEN = 3


def make_batch(prompts: int) -> DataProto:
    """A trainer-side batch: prompt tokens, uid, ground truth and an extra field per prompt."""
    ids = torch.arange(prompts).unsqueeze(1) * 10 + torch.arange(PROMPT_LEN)
    return DataProto.from_single_dict(
        {
            "input_ids": ids,
            "attention_mask": torch.ones_like(ids),
            "uid": np.array([f"uid-{p}" for p in range(prompts)], dtype=object),
            "reward_model": np.array([{"ground_truth": f"gt-{p}"} for p in range(prompts)], dtype=object),
            "extra_info": np.array([{"index": p} for p in range(prompts)], dtype=object),
        }
    )


def echo(prompts: DataProto, worker: int) -> DataProto:
    ids = prompts.batch["input_ids"]
    prompt_id = ids[:, 0] // 10
    rows = torch.arange(len(prompts))
    responses = torch.stack([prompt_id, torch.full_like(prompt_id, worker), rows], dim=1)
    out = DataProto.from_single_dict(
        {
            "prompts": ids,
            "responses": responses,
            "input_ids": torch.cat([ids, responses], dim=1),
            "attention_mask": torch.ones(len(prompts), ids.shape[1] + responses.shape[1], dtype=torch.long),
            "uid": prompts.non_tensor_batch["uid"].copy(),
        }
    )
    # what verl's agent-loop workers report per sample (superset of the keys 0.6 .. 0.9 read)
    sample = {"generate_sequences": 0.001 * (worker + 1), "tool_calls": 0.0, "compute_score": 0.0, "num_preempted": 0}
    out.meta_info["metrics"] = [dict(sample) for _ in range(len(prompts))]
    return out


class EchoRolloutWorker(Worker):
    """Stands in for the spmd rollout worker: the worker group splits the batch by DP rank.

    Its actors also serve as agent-loop workers (same ``generate_sequences(chunk)`` call), so the
    tests start only two Ray worker processes.
    """

    def __init__(self):
        super().__init__()
        # as verl 0.6.1's ActorRolloutRefWorker._build_rollout does for one rank per rollout replica
        self._register_dispatch_collect_info("rollout", dp_rank=self.rank, is_collect=True)

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="rollout"))
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return echo(prompts, self.rank)

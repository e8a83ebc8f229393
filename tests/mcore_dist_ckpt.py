"""Write a Megatron role's three dist_ckpt folders with megatron-core's own dist_checkpointing.save, on CPU.

Usage: python mcore_dist_ckpt.py ROLE_DIR   (one gloo rank; prints one JSON line: the files written)
The folders are ROLE_DIR/{model,optimizer,extra}/dist_ckpt, as verl 0.9's MegatronCheckpointManager
lays them out; the optimizer folder carries the content_metadata verl passes. megatron-core's torch_dist
writer calls torch.cuda.synchronize and torch.cuda.current_device (for a flag tensor) even for CPU
tensors, so both are pointed at the CPU here, in this writer process only.
"""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main():
    role = Path(sys.argv[1])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", sys.argv[2] if len(sys.argv) > 2 else "29531")
    dist.init_process_group("gloo", rank=0, world_size=1)
    torch.cuda.synchronize = lambda *a: None
    torch.cuda.current_device = lambda: "cpu"
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import ShardedObject, ShardedTensor

    weights = {f"decoder.layers.{i}.mlp.weight": torch.randn(64, 32) for i in range(2)}
    parts = {
        "model": {k: ShardedTensor.from_rank_offsets(k, v, replica_id=0) for k, v in weights.items()},
        "optimizer": {**{f"optimizer.exp_avg.{k}": ShardedTensor.from_rank_offsets(f"exp_avg.{k}", torch.zeros_like(v),
                                                                                 replica_id=0)
                         for k, v in weights.items()},
                      "lr_scheduler": {"num_steps": 10}},
        "extra": {"rng_state": ShardedObject("rng_state", {"torch": torch.get_rng_state()}, (1,), (0,), replica_id=0)},
    }
    written = {}
    for part, state in parts.items():
        folder = role / part / "dist_ckpt"
        folder.mkdir(parents=True)
        meta = {"distrib_optim_sharding_type": "dp_reshardable"} if part == "optimizer" else None
        dist_checkpointing.save(state, str(folder), content_metadata=meta)
        written[part] = sorted(p.name for p in folder.iterdir())
    dist.destroy_process_group()
    print(json.dumps(written), flush=True)


if __name__ == "__main__":  # megatron-core's writer may start worker processes by spawn, which re-imports this file
    main()

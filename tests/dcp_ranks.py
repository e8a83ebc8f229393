"""One rank of a real torch.distributed.checkpoint save/load on CPU (gloo), run by the tests.

Usage: RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. python dcp_ranks.py CKPT_DIR SCENARIO...
Scenarios: roundtrip (save thousands of chunks, load them in another layout, compare exactly),
overlap_load (ShardedTensor whose shards overlap, same total volume), overlap_save (a save plan
whose chunks overlap, same total volume), megatron (the three dist_ckpt folders of a Megatron role,
model/ optimizer/ extra/, each rank writing its own __R_0.distcp and rank 0 the .metadata, as on
non-shared storage the files split by node). Prints one JSON line with what happened.
Nothing here touches verl_ascend: the patch must come from the installed .pth.
"""

import dataclasses
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner

EXPERTS = (4, 64, 16, 8)  # (layers, experts, rows, cols): Megatron expert stack, scaled down
GRID = (64, 128)


def boxes(shape, pieces):
    steps = [n // p for n, p in zip(shape, pieces)]
    out = [((), ())]
    for step, p in zip(steps, pieces):
        out = [(o + (k * step,), s + (step,)) for o, s in out for k in range(p)]
    return out


def reference(name, shape):
    base = 1_000_000 if name == "experts" else 0
    return (torch.arange(math.prod(shape), dtype=torch.float64) + base).reshape(shape)


def sharded(name, shape, pieces, rank, world, fill, move=None):
    mine = [b for i, b in enumerate(boxes(shape, pieces)) if i % world == rank]
    if move is not None:  # put one of this rank's chunks where another chunk already is
        mine[move[0]] = (move[1], mine[move[0]][1])
    ref = reference(name, shape)
    shards = []
    for off, size in mine:
        index = tuple(slice(o, o + s) for o, s in zip(off, size))
        data = ref[index].clone() if fill else torch.zeros(size, dtype=torch.float64)
        md = ShardMetadata(shard_offsets=list(off), shard_sizes=list(size), placement=f"rank:{rank}/cpu")
        shards.append(Shard(tensor=data, metadata=md))
    return init_from_local_shards(shards, *shape), len(mine)


class OverlappingPlanner(DefaultSavePlanner):
    """Moves rank 1's first chunk of 'grid' onto rank 0's first chunk: a hole plus an overlap."""

    def create_local_plan(self):
        plan = super().create_local_plan()
        if dist.get_rank() != 1:
            return plan
        items = list(plan.items)
        for n, item in enumerate(items):
            if item.index.fqn == "grid" and item.tensor_data is not None:
                chunk = dataclasses.replace(item.tensor_data.chunk, offsets=torch.Size([0, 0]))
                items[n] = dataclasses.replace(item, tensor_data=dataclasses.replace(item.tensor_data, chunk=chunk))
                break
        self.plan = dataclasses.replace(plan, items=items)
        return self.plan


def error_of(func):
    try:
        func()
    except (Exception, dcp.api.CheckpointException) as exc:  # the verdict is what we report
        return f"{type(exc).__name__}: {exc}"[-600:]  # torch's own message ends the text
    return None


def main():
    ckpt, scenarios = sys.argv[1], sys.argv[2:]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    from torch.distributed._shard.sharding_spec import _internals
    from torch.distributed.checkpoint import default_planner

    out = {
        "rank": rank,
        "load_check_mode": getattr(_internals.validate_non_overlapping_shards_metadata, "verl_ascend_mode", "stock"),
        "save_check_mode": getattr(default_planner._validate_global_plan, "verl_ascend_mode", "stock"),
    }
    if "roundtrip" in scenarios:
        start = time.perf_counter()
        state = {
            "experts": sharded("experts", EXPERTS, (4, 64, 4, 1), rank, world, fill=True)[0],
            "grid": sharded("grid", GRID, (32, 32), rank, world, fill=True)[0],
        }
        dcp.save(state, checkpoint_id=f"{ckpt}/roundtrip")
        saved = dcp.FileSystemReader(f"{ckpt}/roundtrip").read_metadata().state_dict_metadata
        out["saved_chunks"] = {k: len(v.chunks) for k, v in saved.items()}
        target = {  # a different layout: every read resharded
            "experts": sharded("experts", EXPERTS, (2, 64, 2, 2), rank, world, fill=False)[0],
            "grid": sharded("grid", GRID, (16, 64), rank, world, fill=False)[0],
        }
        dcp.load(target, checkpoint_id=f"{ckpt}/roundtrip")
        exact, compared = True, 0
        for name, shape in (("experts", EXPERTS), ("grid", GRID)):
            ref = reference(name, shape)
            for shard in target[name].local_shards():
                md = shard.metadata
                index = tuple(slice(o, o + s) for o, s in zip(md.shard_offsets, md.shard_sizes))
                exact &= torch.equal(shard.tensor, ref[index])
                compared += 1
        out.update(roundtrip_exact=bool(exact), shards_compared=compared,
                   roundtrip_seconds=round(time.perf_counter() - start, 2))
    if "overlap_load" in scenarios:
        # rank 1 moves its first grid chunk onto rank 0's first one (offset (0, 0))
        move = (0, (0, 0)) if rank == 1 else None
        out["overlap_load_error"] = error_of(lambda: sharded("grid", GRID, (32, 32), rank, world, True, move))
    if "overlap_save" in scenarios:
        state = {"grid": sharded("grid", GRID, (32, 32), rank, world, fill=True)[0]}
        out["overlap_save_error"] = error_of(
            lambda: dcp.save(state, checkpoint_id=f"{ckpt}/overlap", planner=OverlappingPlanner())
        )
    if "megatron" in scenarios:
        for part in ("model", "optimizer", "extra"):
            state = {"grid": sharded("grid", GRID, (4, 4), rank, world, fill=True)[0]}
            dcp.save(state, checkpoint_id=f"{ckpt}/{part}/dist_ckpt")
        out["megatron"] = True
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(out), flush=True)
    sys.stderr.flush()
    # the verdict is printed: leave without interpreter teardown. torch 2.5.1's gloo can abort there ("terminate
    # called without an active exception", SIGABRT) after a collective that ended in an error (the overlapping save
    # plan), seen once under load in CI on 2026-12-04 with every result already printed
    os._exit(0)


if __name__ == "__main__":
    main()

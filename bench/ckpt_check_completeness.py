"""What the completeness checks of `verl-ascend ckpt check` cost: 48,000 shard entries, many-member .pt files.

Two checkpoints side by side in one run:
- a Megatron actor (model/, optimizer/, extra/ dist_ckpt, common.pt, metadata.json, data.pt) whose
  optimizer .metadata holds SHARDS storage entries, written with torch's DCP writer; the scan of the
  intact copy, then with one shard cut in half and common.pt emptied, beside torch's own .metadata
  read alone (the floor every scan pays);
- one FSDP-style rank file torch.save'd with MEMBERS tensors (an optimizer state of that many
  parameters): the zip index check beside torch.load of the same file, so the ratio says how much
  cheaper the check is than loading.

    python bench/ckpt_check_completeness.py [--shards 48000] [--members 20000] [--smoke]

``--smoke`` (CI): 200 entries and 100 tensors, seconds.

Target (issue #27): the scan of 48,000 shard entries within 5 s.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path


def build_megatron(root: Path, n: int) -> Path:
    import torch
    import torch.distributed.checkpoint as dcp

    actor = root / "global_step_1" / "actor"
    sizes = {"model": 64, "optimizer": n, "extra": 1}
    for part, count in sizes.items():
        folder = actor / part / "dist_ckpt"
        folder.mkdir(parents=True)
        dcp.save({f"t{i}": torch.zeros(4) for i in range(count)}, checkpoint_id=str(folder), no_dist=True)
        (folder / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist"}))
        torch.save({"content_metadata": {"distrib_optim_sharding_type": "dp_reshardable"}}, folder / "common.pt")
    contents = {p: {"path": f"{p}/dist_ckpt", "format": "megatron_dist_checkpoint"} for p in sizes}
    (actor / "ckpt_contents.json").write_text(json.dumps({"global_step": 1, "world_size": 1, "contents": contents}))
    torch.save({"dataloader": {}}, root / "global_step_1" / "data.pt")
    (root / "latest_checkpointed_iteration.txt").write_text("1")
    return actor


def timed(func):
    t0 = time.perf_counter()
    result = func()
    return time.perf_counter() - t0, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=48000, help="storage entries in the optimizer's .metadata")
    parser.add_argument("--members", type=int, default=20000, help="tensors (zip members) in the rank .pt file")
    parser.add_argument("--smoke", action="store_true", help="200 entries, 100 tensors: that it runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.shards, args.members = 200, 100
    import torch
    from torch.distributed.checkpoint import FileSystemReader

    from verl_ascend.ckpt.files import torch_file
    from verl_ascend.ckpt.scan import scan

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        built, actor = timed(lambda: build_megatron(root, args.shards))
        optim = actor / "optimizer" / "dist_ckpt"
        floor, meta = timed(lambda: FileSystemReader(str(optim)).read_metadata())
        intact, (found, _) = timed(lambda: scan(root))
        bad = [f for f in found if f.severity != "info"]
        shard = sorted(optim.glob("*.distcp"))[0]
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
        (actor / "model" / "dist_ckpt" / "common.pt").write_bytes(b"")
        damaged, (found, _) = timed(lambda: scan(root))
        named = sorted({Path(f.subject).name for f in found if f.severity == "error"})

        rank_file = root / "optim_world_size_2_rank_1.pt"
        torch.save({"state": {i: torch.zeros(2) for i in range(args.members)}}, rank_file)
        index, verdict = timed(lambda: torch_file(rank_file))
        load, _ = timed(lambda: torch.load(rank_file, weights_only=True))
    print(f"{len(meta.storage_data)} storage entries in optimizer/dist_ckpt (+ model, extra), built in {built:.1f} s")
    print(f"ckpt check, intact: {intact:.2f} s; torch's .metadata read alone: {floor:.2f} s; ratio {intact / floor:.2f}"
          f"; findings: {'none' if not bad else '; '.join(f.message for f in bad)}")
    print(f"ckpt check, one shard cut in half and common.pt emptied: {damaged:.2f} s; errors name: {', '.join(named)}")
    print(f"rank .pt with {args.members} members: zip index check {index * 1000:.0f} ms, torch.load {load * 1000:.0f} ms,"
          f" ratio {index / load:.3f}; verdict: {verdict or 'intact'}")


if __name__ == "__main__":
    main()

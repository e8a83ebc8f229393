"""How long `verl-ascend ckpt check` takes on a checkpoint with many shard entries.

Writes a Megatron-style dist_ckpt with torch's DCP writer (N tensors = N storage entries in its
.metadata, spread over FILES shard files by writing it in FILES DCP "ranks" folders merged), then
times the scan and, beside it, torch's own metadata read alone (the floor: the check adds the
per-entry bounds and one stat per shard file).

    python bench/ckpt_check_speed.py [--shards 48000] [--smoke]

``--smoke`` (CI): 200 entries, seconds.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path


def build(root: Path, n: int) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    actor = root / "global_step_1" / "actor"
    folder = actor / "optimizer" / "dist_ckpt"
    folder.mkdir(parents=True)
    dcp.save({f"t{i}": torch.zeros(4) for i in range(n)}, checkpoint_id=str(folder), no_dist=True)
    (folder / "metadata.json").write_text("{}")
    torch.save({}, folder / "common.pt")  # Megatron loads it on every rank: ckpt check requires it
    (actor / "ckpt_contents.json").write_text(json.dumps(
        {"global_step": 1, "world_size": 1,
         "contents": {"optimizer": {"path": "optimizer/dist_ckpt", "format": "megatron_dist_checkpoint"}}}))
    torch.save({}, root / "global_step_1" / "data.pt")
    (root / "latest_checkpointed_iteration.txt").write_text("1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=48000, help="storage entries in the .metadata")
    parser.add_argument("--smoke", action="store_true", help="200 entries: that it runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.shards = 200
    from torch.distributed.checkpoint import FileSystemReader

    from verl_ascend.ckpt.scan import scan

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        build(root, args.shards)
        built = time.perf_counter() - t0
        t0 = time.perf_counter()
        meta = FileSystemReader(str(root / "global_step_1/actor/optimizer/dist_ckpt")).read_metadata()
        floor = time.perf_counter() - t0
        t0 = time.perf_counter()
        findings, _ = scan(root)
        took = time.perf_counter() - t0
    bad = [f for f in findings if f.severity != "info"]
    print(f"{len(meta.storage_data)} shards (storage entries) written in {built:.1f} s")
    print(f"ckpt check: {took:.2f} s; torch's .metadata read alone: {floor:.2f} s; ratio {took / floor:.2f}")
    print("findings: " + ("none" if not bad else "; ".join(f.message for f in bad)))


if __name__ == "__main__":
    main()

"""One conversion: HF checkpoint -> Megatron distributed checkpoint at --output_path.

Nothing half-written is ever visible at --output_path: every rank writes into a temporary
sibling directory, and rank 0 renames it into place only after all ranks saved and the tensor
coverage check passed. A killed run leaves only a hidden ``.<name>.tmp-*`` sibling behind, which
the next run removes.
"""

import glob
import json
import os
import shutil
import signal
import time

from . import runtime
from .hf_source import ConvertError, HFCheckpoint, Layout
from .model import build_empty_model, make_bridge

INFO_FILE = "verl_ascend_convert.json"


def check_output(path: str, overwrite: bool) -> None:
    if os.path.isfile(path):
        raise ConvertError(f"--output_path {path!r} is a file. Fix: pass a directory path.")
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise ConvertError(f"--output_path {path!r} is not empty. Fix: choose a new path, or pass --overwrite "
                           "to replace it (the old content is removed only after the new checkpoint is complete).")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ConvertError(f"the parent folder of --output_path does not exist: {parent!r}. Fix: create it.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConvertError(f"the parent folder of --output_path is not writable by this user: {parent!r} (the "
                           "checkpoint is written beside it first, then renamed). Fix: choose another --output_path.")


def record_verification(output_path: str, verification: dict) -> None:
    """Add how --verify / --verify_only went to the checkpoint's INFO_FILE (rank 0; rename, never half-written)."""
    from verl_ascend.core import outfiles

    path = os.path.join(output_path, INFO_FILE)
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return  # converted by another tool: its folder is not ours to add to
    info["verification"] = verification
    with outfiles.atomic(path) as tmp, open(tmp, "w") as f:
        json.dump(info, f, indent=1)


def _temp_dir(path: str) -> str:
    path = os.path.abspath(path)
    base = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-")
    for stale in glob.glob(base + "*"):  # left by a killed run: never a usable checkpoint
        shutil.rmtree(stale, ignore_errors=True)
    tmp = f"{base}{os.getpid()}-{int(time.time())}"
    os.makedirs(tmp)
    return tmp


def _broadcast(obj):
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _all_union(items: set) -> set:
    import torch.distributed as dist

    parts = [None] * dist.get_world_size()
    dist.all_gather_object(parts, sorted(items))
    return set().union(*map(set, parts))


def _raise_on_sigterm():
    """SIGTERM (a scheduler's kill) unwinds like Ctrl-C, so the temp directory is removed."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        pass


def convert(ckpt: HFCheckpoint, output_path: str, layout: Layout, dtype, device: str,
            on_host: bool, progress) -> dict:
    """Write the checkpoint; return a summary dict (rank 0's view)."""
    import torch.distributed as dist
    from megatron.core import dist_checkpointing

    rank = dist.get_rank()
    _raise_on_sigterm()
    tmp = None
    try:
        tmp = _broadcast(_temp_dir(output_path) if rank == 0 else None)
        runtime.init_model_parallel(layout.tp, layout.pp, layout.ep)
        bridge = make_bridge(ckpt, dtype)
        model = build_empty_model(bridge)
        if not on_host:  # --use_cpu_initialization keeps the weights in host memory (gloo saves them)
            model.to(device)
        from .weights import load_hf_into

        used = _all_union(load_hf_into(model, bridge, ckpt, progress))
        unused = sorted(set(ckpt.weight_map) - used)
        if unused:
            raise ConvertError(f"{len(unused)} HF tensor(s) were not converted, e.g. {unused[:3]}. "
                               "The model variant differs from what mbridge maps; nothing was written.")
        with runtime.cpu_cuda_calls(device):
            dist_checkpointing.save(sharded_state_without_views(model), tmp, async_sharded_save=False)
        del model  # its host copies are now owned by the saved state alone
        info = {"hf_model_path": os.path.abspath(ckpt.path), "model_type": ckpt.model_type,
                "dtype": str(dtype).replace("torch.", ""), "tp": layout.tp, "pp": layout.pp, "ep": layout.ep,
                "world_size": layout.world, "tensors": len(ckpt.weight_map),
                "verification": {"status": "not run", "how": "run the converter with --verify_only to check it"}}
        dist.barrier()
        if rank == 0:
            with open(os.path.join(tmp, INFO_FILE), "w") as f:
                json.dump(info, f, indent=1)
            _move_into_place(tmp, output_path)
        tmp = None
        dist.barrier()
        return info
    finally:
        if tmp and rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        runtime.destroy_model_parallel()


def sharded_state_without_views(model) -> dict:
    """``model.sharded_state_dict()`` with its factories applied and every view of a host
    parameter turned into its own tensor, the parameter freed as soon as its parts are copied.

    Why: Megatron's file writer clones every view it is given, all of them before the first byte is
    written (``_clone_if_needed`` in filesystem_async.py). Dense SwiGLU layers save fc1 as two views
    (gate and up halves), about a third of a Qwen model: the writer's clones held that third twice.
    Copying here, one parameter at a time, keeps the extra at one parameter. The model must not be
    used afterwards (its split parameters are emptied).
    """
    import torch
    from megatron.core.dist_checkpointing.dict_utils import nested_values
    from megatron.core.dist_checkpointing.mapping import ShardedTensor, apply_factories

    sharded = model.sharded_state_dict()
    apply_factories(sharded)  # what dist_checkpointing.save does first; a no-op when repeated
    by_storage = {}
    for item in nested_values(sharded):
        data = getattr(item, "data", None) if isinstance(item, ShardedTensor) else None
        if isinstance(data, torch.Tensor) and data.device.type == "cpu" and data.numel():
            by_storage.setdefault(data.untyped_storage().data_ptr(), []).append(item)
    owners = {p.untyped_storage().data_ptr(): p for p in model.parameters() if p.device.type == "cpu"}
    for ptr, items in by_storage.items():
        if not all(_is_view(item.data) for item in items):
            continue  # some shard saves the storage whole: nothing to gain, keep it as it is
        for item in items:
            item.data = item.data.clone(memory_format=torch.contiguous_format)
        owner = owners.get(ptr)
        if owner is not None:
            owner.data = torch.empty(0, dtype=owner.dtype)
    return sharded


def _is_view(tensor) -> bool:
    return tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size()


def _move_into_place(tmp: str, output_path: str) -> None:
    old = None
    if os.path.isdir(output_path):  # empty, or --overwrite was given (checked before any work)
        old = f"{tmp}-old"
        os.rename(output_path, old)
    os.rename(tmp, output_path)
    if old:
        shutil.rmtree(old, ignore_errors=True)

"""Is a verl checkpoint folder complete enough to resume from? Offline, from the files alone.

The layout is verl 0.9's (``verl/utils/checkpoint/checkpoint_manager.py`` for the tracker,
``megatron_checkpoint_manager.py`` for the role folders and the ``ckpt_contents.json`` manifest that
rank 0 writes last, ``fsdp_checkpoint_manager.py`` for the per-rank FSDP files)::

    ROOT/latest_checkpointed_iteration.txt      the step resume_mode=auto loads
    ROOT/global_step_N/data.pt                  the dataloader position
    ROOT/global_step_N/{actor,critic}/          Megatron: ckpt_contents.json, transformer_config.json,
                                                model/ optimizer/ extra/ ... dist_ckpt/
                                                FSDP: fsdp_config.json, {model,optim,extra_state}_world_size_W_rank_R.pt

Each ``dist_ckpt/`` is read with torch's own ``FileSystemReader``: every byte range its ``.metadata``
names must exist in a shard file long enough to hold it.
"""

import dataclasses
import json
import re
from pathlib import Path

from verl_ascend.core.findings import ERROR, INFO, WARNING, Finding

TRACKER = "latest_checkpointed_iteration.txt"
MANIFEST = "ckpt_contents.json"
ROLES = ("actor", "critic")
FSDP_KINDS = ("model", "optim", "extra_state")
SHARD_MISSING = "shard_missing"  # code of: per-rank files (dist_ckpt shards, FSDP rank files) not on this node


@dataclasses.dataclass
class Role:
    """What one role folder of one step holds, as far as the files say."""

    name: str
    path: Path
    kind: str                 # "megatron" | "fsdp" | "unknown"
    world_size: int = None
    parallel: dict = None     # tp/pp/cp/ep from transformer_config.json (Megatron)
    optim_sharding: str = None  # Megatron distributed-optimizer format saved, when readable
    moe: bool = False


def steps(root: Path) -> list:
    found = []
    for p in root.glob("global_step_*"):
        m = re.fullmatch(r"global_step_(\d+)", p.name)
        if m and p.is_dir():
            found.append(int(m.group(1)))
    return sorted(found)


def tracker_step(root: Path, out: list):
    path = root / TRACKER
    if not path.exists():
        return None
    text = path.read_text().strip()
    if not text.isdigit():
        out.append(Finding(ERROR, str(path), f"the tracker holds {text[:40]!r}, not a step number: verl's resume "
                           "fails reading it", "write the number of the last complete step into it (e.g. 100)"))
        return None
    return int(text)


def check_dist_ckpt(folder: Path, out: list) -> None:
    """Megatron torch_dist folder: metadata files, and every shard byte range on disk."""
    for name in (".metadata", "metadata.json"):
        if not (folder / name).is_file():
            out.append(Finding(ERROR, str(folder / name), f"{name} is missing: this node cannot load {folder.name}/ "
                               "(Megatron writes it on the saving rank's node only)",
                               "copy it from the node of rank 0 (rsync), or use shared storage"))
    if not (folder / ".metadata").is_file():
        return
    from torch.distributed.checkpoint import FileSystemReader

    try:
        meta = FileSystemReader(str(folder)).read_metadata()
    except Exception as exc:  # a torn or foreign file: torch's own reader refused it
        out.append(Finding(ERROR, str(folder / ".metadata"), f"torch cannot read it: {type(exc).__name__}: {exc}",
                           "copy an intact .metadata from the saving node, or resume from an earlier step"))
        return
    need = {}
    for item in (meta.storage_data or {}).values():
        end = item.offset + item.length
        need[item.relative_path] = max(need.get(item.relative_path, 0), end)
    for rel, end in sorted(need.items()):
        shard = folder / rel
        if not shard.is_file():
            out.append(Finding(ERROR, str(shard), "a shard the checkpoint's .metadata names is missing on this node",
                               "copy the step's shards here (rsync from that node), or use shared storage",
                               code=SHARD_MISSING))
        elif shard.stat().st_size < end:
            out.append(Finding(ERROR, str(shard), f"shard is {shard.stat().st_size} bytes, .metadata needs {end}: "
                               "the save was cut short or the copy is incomplete", "copy it again from where it was "
                               "written, or resume from an earlier step"))


def _optim_sharding(folder: Path):
    """The distributed-optimizer format from common.pt's content_metadata, or None if unreadable."""
    common = folder / "common.pt"
    if not common.is_file():
        return None
    try:
        import torch

        state = torch.load(common, map_location="cpu", weights_only=True)
    except Exception:
        return None
    meta = state.get("content_metadata") if isinstance(state, dict) else None
    return (meta or {}).get("distrib_optim_sharding_type")


def check_megatron(role: Role, step: int, out: list) -> None:
    manifest_path = role.path / MANIFEST
    if not manifest_path.is_file():
        out.append(Finding(ERROR, str(manifest_path), f"{role.name} of step {step} has no {MANIFEST}: rank 0 writes it "
                           "last, so this save did not finish", f"resume from an earlier step, or delete "
                           f"global_step_{step}/{role.name} and let the tracker point at the last complete step"))
        return
    manifest = json.loads(manifest_path.read_text())
    role.world_size = manifest.get("world_size")
    if manifest.get("global_step") not in (None, step):
        out.append(Finding(ERROR, str(manifest_path), f"manifest says global_step {manifest.get('global_step')}, the "
                           f"folder is global_step_{step}: files of two saves are mixed", "resume from another step"))
    for what, entry in sorted((manifest.get("contents") or {}).items()):
        path = role.path / entry.get("path", "")
        if not path.exists() or (path.is_dir() and not any(path.iterdir())):
            out.append(Finding(ERROR, str(path), f"the manifest lists {what} here, but it is missing or empty on "
                               "this node", "copy it from the node that wrote it (rsync), or use shared storage"))
        elif entry.get("format") == "megatron_dist_checkpoint":
            check_dist_ckpt(path, out)
    tc = role.path / "transformer_config.json"
    if tc.is_file():
        cfg = json.loads(tc.read_text())
        role.parallel = {k: int(cfg.get(f"{k}_model_parallel_size" if k != "cp" else "context_parallel_size", 1) or 1)
                         for k in ("tensor", "pipeline", "expert", "cp")}
        role.moe = bool(cfg.get("num_moe_experts"))
    optim = role.path / "optimizer" / "dist_ckpt"
    role.optim_sharding = _optim_sharding(optim) if optim.is_dir() else None


def check_fsdp(role: Role, step: int, out: list) -> None:
    cfg = json.loads((role.path / "fsdp_config.json").read_text())
    world = role.world_size = int(cfg.get("world_size", 0))
    missing = [f"{kind}_world_size_{world}_rank_{r}.pt" for kind in FSDP_KINDS for r in range(world)
               if not (role.path / f"{kind}_world_size_{world}_rank_{r}.pt").is_file()]
    if missing:
        out.append(Finding(ERROR, str(role.path), f"{len(missing)} of {3 * world} per-rank files are missing on this "
                           f"node, e.g. {', '.join(missing[:3])}: every rank 0..{world - 1} loads its own",
                           "copy them from the nodes that wrote them (rsync), or use shared "
                           "storage", code=SHARD_MISSING))
    if not (role.path / "huggingface").is_dir():
        out.append(Finding(WARNING, str(role.path / "huggingface"), "the HF config/tokenizer export (rank 0) is "
                           "missing here: resume works, converting this step to HF does not", "copy it from rank 0's node"))


def role_of(path: Path) -> Role:
    if (path / "fsdp_config.json").is_file():
        return Role(path.name, path, "fsdp")
    if (path / MANIFEST).is_file() or (path / "model").is_dir() or (path / "optimizer").is_dir():
        return Role(path.name, path, "megatron")
    return Role(path.name, path, "unknown")


def check_step(root: Path, step: int, out: list) -> list:
    folder = root / f"global_step_{step}"
    roles = []
    for name in ROLES:
        if not (folder / name).is_dir():
            continue
        role = role_of(folder / name)
        if role.kind == "megatron":
            check_megatron(role, step, out)
        elif role.kind == "fsdp":
            check_fsdp(role, step, out)
        else:
            out.append(Finding(ERROR, str(role.path), f"{name} of step {step} is neither a Megatron checkpoint ("
                               f"{MANIFEST}) nor an FSDP one (fsdp_config.json): the save did not finish",
                               "resume from an earlier step"))
        roles.append(role)
    if not roles:
        out.append(Finding(ERROR, str(folder), f"step {step} has no actor/ folder: nothing to resume from here "
                           "(verl's retention removes role folders, leaving data.pt alone)",
                           "point the tracker at a step that has one"))
    if not (folder / "data.pt").is_file():
        out.append(Finding(WARNING, str(folder / "data.pt"), "data.pt is missing here: verl resumes the model but "
                           "restarts the data stream from the first batch", "copy data.pt from the node that ran "
                           "verl's TaskRunner"))
    return roles


def scan(root: Path) -> tuple:
    """([Finding], {step: [Role]} for the step resume would load)."""
    out = []
    if not root.is_dir():
        return [Finding(ERROR, str(root), "no such folder", "pass trainer.default_local_dir of the run")], {}
    found = steps(root)
    tracked = tracker_step(root, out)
    if not found:
        out.append(Finding(ERROR, str(root), "no global_step_N folder: nothing was saved here",
                           "pass the folder that holds global_step_N/ (trainer.default_local_dir)"))
        return out, {}
    if tracked is None and not (root / TRACKER).exists():
        out.append(Finding(WARNING, str(root / TRACKER), f"no tracker, but steps {found} exist: resume_mode=auto "
                           "starts from scratch (an async FSDP save never writes it, verl issue #7952)",
                           f"write {found[-1]} into {TRACKER} after checking that step, or resume with "
                           f"trainer.resume_mode=resume_path trainer.resume_from_path={root}/global_step_{found[-1]}"))
    step = tracked if tracked is not None else found[-1]
    if tracked is not None and tracked not in found:
        out.append(Finding(ERROR, str(root / TRACKER), f"the tracker says step {tracked}, but global_step_{tracked}/ "
                           "is not here: verl prints 'Checkpoint does not exist' and trains from scratch",
                           f"copy global_step_{tracked} to this node, or write {found[-1]} into the tracker"))
        return out, {}
    if tracked is not None and found[-1] > tracked:
        out.append(Finding(INFO, str(root), f"steps after the tracked {tracked} exist ({[s for s in found if s > tracked]}): "
                           "a later save did not finish, or is still being written"))
    return out, {step: check_step(root, step, out)}

"""Is a verl checkpoint folder complete enough to resume from? Offline, from the files alone.

The layout is verl 0.9's (``verl/utils/checkpoint/checkpoint_manager.py`` for the tracker,
``megatron_checkpoint_manager.py`` for the role folders and the ``ckpt_contents.json`` manifest that
rank 0 writes last, ``fsdp_checkpoint_manager.py`` for the per-rank FSDP files)::

    ROOT/latest_checkpointed_iteration.txt      the step resume_mode=auto loads
    ROOT/global_step_N/data.pt                  the dataloader position
    ROOT/global_step_N/{actor,critic}/          Megatron: ckpt_contents.json, transformer_config.json,
                                                model/ optimizer/ extra/ ... dist_ckpt/
                                                FSDP: fsdp_config.json, {model,optim,extra_state}_world_size_W_rank_R.pt

verl 0.6's Megatron layout (``dist_ckpt/`` and ``huggingface/`` right in the role folder, no
manifest) is read too. Each ``dist_ckpt/`` is read with torch's own ``FileSystemReader``: every byte
range its ``.metadata`` names must exist in a shard file long enough to hold it. Every other file a
resume loads (rank ``.pt`` files, ``data.pt``, ``common.pt``, the JSON files) gets the cheap
structural check of :mod:`.files`, which never loads a tensor.
"""

import dataclasses
import json
import re
from pathlib import Path

from verl_ascend.core.findings import ERROR, INFO, WARNING, Finding

from . import files

TRACKER = "latest_checkpointed_iteration.txt"
MANIFEST = "ckpt_contents.json"
ROLES = ("actor", "critic")
FSDP_KINDS = ("model", "optim", "extra_state")
SHARD_MISSING = "shard_missing"  # code of: per-rank files (dist_ckpt shards, FSDP rank files) not on this node
DAMAGED = "file_damaged"  # code of: a file present but cut short or unreadable (ckpt sync replaces shorter copies)


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
    fix: str = ""             # what to do about a damaged file of this step (see damaged_fix)


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


def damaged_fix(root: Path, step: int) -> str:
    """The way out of a damaged file of ``step``: the step saved before it, or an intact copy elsewhere."""
    sync = f"if another node holds an intact copy: verl-ascend ckpt sync {root} --nodes NODE... (it replaces " \
           "shorter copies)"
    earlier = [s for s in steps(root) if s < step]
    if not earlier:
        return f"{sync}; there is no earlier step here to resume from, otherwise train this step again"
    prev = earlier[-1]
    return (f"resume from global_step_{prev}: write {prev} into {root / TRACKER} (or trainer.resume_mode=resume_path "
            f"trainer.resume_from_path={root}/global_step_{prev}); or {sync}")


def check_file(path: Path, out: list, fix: str, what: str, severity: str = ERROR) -> bool:
    """A finding naming ``path`` if its structure says it is cut short; True when it is intact."""
    wrong = files.problem(path)
    if wrong:
        out.append(Finding(severity, str(path), f"{what} {wrong}: the save or the copy was cut short", fix,
                           code=DAMAGED))
    return not wrong


def check_hf(folder: Path, out: list, fix: str, severity: str) -> None:
    """The HF export: present files must be whole, and the weight files an index names present."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        check_file(path, out, fix, "the HF export file", severity)
    for index in folder.glob("*.index.json"):
        try:
            names = set(json.loads(index.read_text()).get("weight_map", {}).values())
        except (ValueError, OSError, AttributeError):
            continue  # check_file named it already
        for name in sorted(n for n in names if not (folder / n).is_file()):
            out.append(Finding(severity, str(folder / name), f"{index.name} names it, but it is not here", fix,
                               code=DAMAGED))


def check_dist_ckpt(folder: Path, out: list, fix: str = "resume from an earlier step") -> None:
    """Megatron torch_dist folder: metadata files, common state, and every shard byte range on disk."""
    for name in (".metadata", "metadata.json", "common.pt"):
        if not (folder / name).is_file():
            out.append(Finding(ERROR, str(folder / name), f"{name} is missing: this node cannot load {folder.name}/ "
                               "(Megatron writes it on the saving rank's node only)",
                               "copy it from the node of rank 0 (rsync), or use shared storage"))
    # metadata.json names the backends, common.pt holds the non-sharded state (Megatron loads it on every
    # rank); other .pt files are ShardedObjects of the "torch" common backend
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and (p.suffix == ".pt" or p.name == "metadata.json")):
        check_file(path, out, fix, f"{path.name} of {folder.parent.name}/{folder.name}")
    if not (folder / ".metadata").is_file():
        return
    from torch.distributed.checkpoint import FileSystemReader

    try:
        meta = FileSystemReader(str(folder)).read_metadata()
    except Exception as exc:  # a torn or foreign file: torch's own reader refused it
        out.append(Finding(ERROR, str(folder / ".metadata"), f"torch cannot read it: {type(exc).__name__}: {exc}",
                           f"copy an intact .metadata from the saving node; or {fix}", code=DAMAGED))
        return
    need = {}
    for item in (meta.storage_data or {}).values():  # 48,000 entries in the bench: keep this loop bare
        end = item.offset + item.length
        if end > need.get(item.relative_path, -1):
            need[item.relative_path] = end
    for rel, end in sorted(need.items()):
        shard = folder / rel
        if not shard.is_file():
            out.append(Finding(ERROR, str(shard), "a shard the checkpoint's .metadata names is missing on this node",
                               "copy the step's shards here (rsync from that node), or use shared storage",
                               code=SHARD_MISSING))
        elif shard.stat().st_size < end:
            out.append(Finding(ERROR, str(shard), f"shard is {shard.stat().st_size} bytes, .metadata needs {end}: "
                               "the save was cut short or the copy is incomplete", fix, code=DAMAGED))


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


def _read_json(path: Path, out: list, fix: str):
    """The parsed file, or None with a finding when it is cut short (verl's json.load would raise)."""
    return json.loads(path.read_text()) if check_file(path, out, fix, path.name) else None


def _parallel(role: Role, out: list) -> None:
    tc = role.path / "transformer_config.json"
    cfg = _read_json(tc, out, role.fix) if tc.is_file() else None
    if isinstance(cfg, dict):
        role.parallel = {k: int(cfg.get(f"{k}_model_parallel_size" if k != "cp" else "context_parallel_size", 1) or 1)
                         for k in ("tensor", "pipeline", "expert", "cp")}
        role.moe = bool(cfg.get("num_moe_experts"))


def check_megatron_v1(role: Role, out: list) -> None:
    """verl 0.6's layout: one dist_ckpt/ (model, optimizer and RNG state together) and huggingface/."""
    check_dist_ckpt(role.path / "dist_ckpt", out, role.fix)
    if (role.path / "huggingface").is_dir():
        check_hf(role.path / "huggingface", out, role.fix, ERROR)
    _parallel(role, out)
    role.optim_sharding = _optim_sharding(role.path / "dist_ckpt")


def check_megatron(role: Role, step: int, out: list) -> None:
    manifest_path = role.path / MANIFEST
    if not manifest_path.is_file() and (role.path / "dist_ckpt").is_dir():
        return check_megatron_v1(role, out)
    if not manifest_path.is_file():
        out.append(Finding(ERROR, str(manifest_path), f"{role.name} of step {step} has no {MANIFEST}: rank 0 writes it "
                           "last, so this save did not finish", f"resume from an earlier step, or delete "
                           f"global_step_{step}/{role.name} and let the tracker point at the last complete step"))
        return
    manifest = _read_json(manifest_path, out, role.fix)
    if not isinstance(manifest, dict):
        return
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
            check_dist_ckpt(path, out, role.fix)
        elif entry.get("format") == "huggingface" and path.is_dir():
            check_hf(path, out, role.fix, ERROR)
        elif path.is_file() and path.name != "transformer_config.json":  # that one is read below
            check_file(path, out, role.fix, f"{what} ({path.name})")
    _parallel(role, out)
    optim = role.path / "optimizer" / "dist_ckpt"
    role.optim_sharding = _optim_sharding(optim) if optim.is_dir() else None


def check_fsdp(role: Role, step: int, out: list) -> None:
    cfg = _read_json(role.path / "fsdp_config.json", out, role.fix)
    if not isinstance(cfg, dict):
        return
    world = role.world_size = int(cfg.get("world_size", 0))
    names = [f"{kind}_world_size_{world}_rank_{r}.pt" for kind in FSDP_KINDS for r in range(world)]
    missing = [n for n in names if not (role.path / n).is_file()]
    if missing:
        out.append(Finding(ERROR, str(role.path), f"{len(missing)} of {3 * world} per-rank files are missing on this "
                           f"node, e.g. {', '.join(missing[:3])}: every rank 0..{world - 1} loads its own",
                           "copy them from the nodes that wrote them (rsync), or use shared "
                           "storage", code=SHARD_MISSING))
    for name in names:  # each rank torch.loads its three files whole at resume (FSDPCheckpointManager)
        if name not in missing:
            check_file(role.path / name, out, role.fix, f"rank file {name}")
    if not (role.path / "huggingface").is_dir():
        out.append(Finding(WARNING, str(role.path / "huggingface"), "the HF config/tokenizer export (rank 0) is "
                           "missing here: resume works, converting this step to HF does not", "copy it from rank 0's node"))
    else:  # resume does not read it, conversion does: a warning, as above
        check_hf(role.path / "huggingface", out, "copy it from rank 0's node", WARNING)


def role_of(path: Path) -> Role:
    if (path / "fsdp_config.json").is_file():
        return Role(path.name, path, "fsdp")
    if any((path / p).exists() for p in (MANIFEST, "model", "optimizer", "dist_ckpt")):
        return Role(path.name, path, "megatron")
    return Role(path.name, path, "unknown")


def check_step(root: Path, step: int, out: list) -> list:
    folder = root / f"global_step_{step}"
    fix = damaged_fix(root, step)
    roles = []
    for name in ROLES:
        if not (folder / name).is_dir():
            continue
        role = role_of(folder / name)
        role.fix = fix
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
    else:  # verl torch.loads it when present: a torn one fails the resume, it does not restart the data
        check_file(folder / "data.pt", out, fix, "the dataloader state")
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

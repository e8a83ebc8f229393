"""`verl-ascend ckpt sync DIR --nodes NODE...`: give every node what a resume reads, without shared storage.

What a resume reads, from verl 0.9's code (the file list below follows it):

* ``DIR/latest_checkpointed_iteration.txt``: written by the driver (``RayPPOTrainer._save_checkpoint``
  in ``verl/trainer/ppo/ray_trainer.py``, ``trainer/ppo/v1/trainer_base.py`` the same), or by rank 0
  in ``MegatronCheckpointManager._finalize_save`` with async save; read by
  ``find_latest_ckpt_path`` (``verl/utils/checkpoint/checkpoint_manager.py``) on resume_mode=auto.
* ``global_step_N/data.pt`` and, in the async trainer modes, ``global_step_N/transfer_queue/``:
  written and read by the driver (``_save_checkpoint`` / ``_load_checkpoint``).
* Megatron role folders (``megatron_checkpoint_manager.py``, ``save_checkpoint``): rank 0 alone
  writes ``ckpt_contents.json`` (``_write_checkpoint_manifest``, last), ``transformer_config.json``
  (``_save_transformer_config``) and ``model/huggingface/`` (``_save_hf_config_and_tokenizer``,
  the bridge export); in each ``*/dist_ckpt/`` torch's coordinator writes ``.metadata`` and Megatron's
  rank 0 ``common.pt`` and ``metadata.json``, while every rank writes its own ``__R_I.distcp``
  (torch ``FileSystemWriter``).
* FSDP role folders (``fsdp_checkpoint_manager.py``, ``save_checkpoint``): each rank writes
  ``{model,optim,extra_state}_world_size_W_rank_R.pt``; rank 0 ``fsdp_config.json``,
  ``lora_train_meta.json`` and ``huggingface/``.

So the rule is: in a finished step folder, every file that is not a per-rank shard is written on one
node and read on all of them: copy it everywhere. Shards (``__R_I.distcp``, ``*_rank_R.pt``,
Megatron's legacy ``mp_rank_*``) are copied with ``--all``, and always to a node whose copy is
shorter than another's (a cut-off earlier copy). A copy the node's own ``ckpt check`` finds damaged (cut short,
unreadable) is never a source: a file damaged on every node that holds it is named and left where it is, so a sync
never spreads it (the check reads headers and lengths, no tensor: a fraction of a second per node). A shard is
judged against ``.metadata``, which its own node may lack: such damage shows in the check after the copy, and the
copy is withdrawn from the node it was brought to. A step is finished when every role folder in it has
its completion file on some node: ``ckpt_contents.json`` (Megatron, written last) or
``fsdp_config.json`` with every rank's files (FSDP); other steps are skipped and named. Per
destination the copy goes in three waves: step files, then the completion files, then the tracker,
so a node never points at a step that is not complete there, even if a copy fails midway.
"""

import dataclasses
import os
import re
import shlex
import sys
from pathlib import PurePosixPath

from verl_ascend.core.findings import ERROR, INFO, WARNING, BadInput, Finding, exit_code, lines, to_json, verdict

from . import nodes
from .scan import DAMAGED, MANIFEST, ROLES, SHARD_MISSING, TRACKER

_STEP = re.compile(r"global_step_(\d+)/")
_SHARD = re.compile(r"(^|/)(__\d+_\d+\.distcp|(model|optim|extra_state)_world_size_\d+_rank_\d+\.pt)$|/mp_rank_\d+(_\d+)?/")
_FSDP_RANK = re.compile(r"(model|optim|extra_state)_world_size_(\d+)_rank_(\d+)\.pt")
FSDP_CONFIG = "fsdp_config.json"


def unfinished(step: int, union: dict):
    """Why global_step_N cannot be synced, '' if it can, None if it holds no role folder at all (verl's
    retention deletes role folders and leaves data.pt: not a checkpoint any more, nothing to say)."""
    prefix = f"global_step_{step}/"
    roles = sorted({rel.split("/")[1] for rel in union if rel.startswith(prefix) and rel.count("/") >= 2}
                   & set(ROLES))
    if not roles:
        return None
    for role in roles:
        folder = prefix + role + "/"
        if folder + MANIFEST in union:
            continue
        if folder + FSDP_CONFIG not in union:
            return (f"{role}/ has no {MANIFEST} (Megatron) or {FSDP_CONFIG} (FSDP) on any node: the save did "
                    "not finish, or is still being written")
        ranks = [m.groups() for rel in union if rel.startswith(folder)
                 and (m := _FSDP_RANK.fullmatch(rel[len(folder):]))]
        world = max((int(w) for _, w, _ in ranks), default=0)
        lost = [f"{k}_world_size_{world}_rank_{r}.pt" for k in ("model", "optim", "extra_state") for r in range(world)
                if (k, str(world), str(r)) not in ranks]
        if not world or lost:
            return f"{role}/: {len(lost) or 'all'} per-rank files are on no node{f' (e.g. {lost[0]})' if lost else ''}"
    return ""


def make_plan(order: list, listings: dict, trackers: dict, everything: bool, damaged: dict = None) -> tuple:
    """({node: [(rel, source node, size)]}, [(step, reason)], kept steps). ``damaged``: {node: rels its own ``ckpt
    check`` found cut short or unreadable}; such a copy is never a source (a sync must not spread it)."""
    damaged = damaged or {}
    best = {}  # rel -> (size, node): the longest whole copy, the first node listed on a tie
    for node in order:
        for rel, size in listings[node].items():
            if rel in damaged.get(node, ()):
                continue
            if rel not in best or size > best[rel][0]:
                best[rel] = (size, node)
    steps = sorted({int(m.group(1)) for rel in best if (m := _STEP.match(rel))})
    skipped, kept = [], set()
    for step in steps:
        why = unfinished(step, best)
        if why:
            skipped.append((step, why))
        elif why == "":
            kept.add(step)
    plan = {node: [] for node in order}
    for rel, (size, src) in sorted(best.items()):
        m = _STEP.match(rel)
        if not m or int(m.group(1)) not in kept:
            continue
        shard = bool(_SHARD.search(rel))
        for node in order:
            have = listings[node].get(rel)
            if have != size and (have is not None or everything or not shard):
                plan[node].append((rel, src, size))
    good = [(int(text), node) for node, text in trackers.items() if text and text.isdigit() and int(text) in kept]
    if good:
        _, src = max(good, key=lambda vn: (vn[0], -order.index(vn[1])))
        for node in order:
            if trackers[node] != trackers[src]:
                plan[node].append((TRACKER, src, listings[src].get(TRACKER, 0)))
    for node, text in trackers.items():
        if text is not None and not (text.isdigit() and int(text) in kept):
            skipped.append((None, f"the tracker on {node} says {text!r}, not a finished step here: not copied from it"))
    return plan, skipped, kept


def damaged_on(ssh, node, root, python) -> set:
    """The files ``ckpt check`` on the node finds cut short or unreadable (relative to ``root``); it reads headers and
    lengths only, no tensor. A node whose check gives no usable report: none known (the re-check after the copy
    still runs there)."""
    try:
        _, report = nodes.remote_check(ssh, node, root, python)
        return {os.path.relpath(f["subject"], root) for f in report.get("findings", []) if f.get("code") == DAMAGED}
    except (nodes.NodeError, TypeError, AttributeError, KeyError):
        return set()


def not_copied(listings: dict, damaged: dict) -> dict:
    """{rel: [nodes]} of the files every node that holds them holds damaged: nowhere to copy them from."""
    holders = {}
    for node, files in listings.items():
        for rel in files:
            holders.setdefault(rel, []).append(node)
    return {rel: where for rel, where in sorted(holders.items()) if all(rel in damaged.get(n, ()) for n in where)}


def waves(files: list) -> list:
    """Step files, then completion files, then the tracker: each wave only once the previous one is there."""
    last = {MANIFEST, FSDP_CONFIG}
    return [[f for f in files if f[0] != TRACKER and PurePosixPath(f[0]).name not in last],
            [f for f in files if PurePosixPath(f[0]).name in last], [f for f in files if f[0] == TRACKER]]


def recheck(ssh, node, root, python, union, kept, here) -> dict:
    """ckpt check on the node itself; a per-rank file that is on another node turns into one warning.
    A node where the check cannot run is an error of that node; the other nodes are still checked."""
    try:
        code, report = nodes.remote_check(ssh, node, root, python)
        checked = [Finding(**f) for f in report.get("findings", [])]
    except nodes.NodeError as exc:
        return _unchecked(node, exc.message, exc.fix)
    except TypeError as exc:  # a report without the shared finding fields: another verl-ascend there
        return _unchecked(node, f"its `ckpt check --json` report is of another verl-ascend version ({exc})",
                          "install this verl-ascend version on every node, or pass its python as --remote-python")
    findings, elsewhere = [], []
    for f in checked:
        rel = os.path.relpath(f.subject, root)
        m = _STEP.match(rel + "/")
        if f.code == SHARD_MISSING and (rel in union or (m and int(m.group(1)) in kept
                                                          and rel + "/" + FSDP_CONFIG in union)):
            elsewhere.append(rel)
        else:
            findings.append(f)
    if elsewhere:  # counted from the listings: an FSDP finding stands for all of a role's missing rank files
        away = sorted(rel for rel in union - here
                      if _SHARD.search(rel) and (m := _STEP.match(rel)) and int(m.group(1)) in kept)
        findings.append(Finding(WARNING, root, f"{len(away)} shard file(s) of the finished steps are on other nodes "
                                f"only (e.g. {(away or elsewhere)[0]}): enough if every rank resumes on the node that "
                                "wrote its files; Megatron ranks also read replicated tensors from other ranks' shards",
                                "ckpt sync --all copies every shard to every node", code="shards_elsewhere"))
    return {"exit_code": exit_code(findings), "check_exit_code": code, "findings": findings}


def withdraw(ssh, node, root, had: dict, copied: list, checked: dict) -> None:
    """Remove from the node every file this sync brought there that its check now finds damaged, where the node
    had no copy before: a shard is judged against ``.metadata``, which its source node may not hold, so such damage
    shows only once both are on one node. The finding then says the copy was withdrawn (the source keeps its own)."""
    brought = {rel: src for rel, src, _ in copied if rel not in had}
    out = []
    for f in checked["findings"]:
        rel = os.path.relpath(f.subject, root)
        if f.code == DAMAGED and rel in brought:
            gone = nodes.run(ssh, node, "rm -f -- " + shlex.quote(f"{root}/{rel}")).returncode == 0
            f = dataclasses.replace(f, severity=WARNING, code="damaged_not_copied", message=(
                f"{f.message}; {'withdrew' if gone else 'could not remove'} the copy this sync brought from "
                f"{brought[rel]}, where it is damaged"), fix="resume from an earlier step that is whole on every node "
                "(trainer.resume_from_path)")
        out.append(f)
    checked["findings"], checked["exit_code"] = out, exit_code(out)


def _unchecked(node, message: str, fix: str) -> dict:
    found = [Finding(ERROR, str(node), message, fix)]
    return {"exit_code": exit_code(found), "check_exit_code": None, "findings": found}


class BadSyncInput(BadInput):
    pass


def run(args) -> int:
    """Plan, copy, re-check; print the result. Bad input raises :class:`BadSyncInput`; a node that cannot be
    listed or copied to is an error finding of that node (exit 2), the JSON still printed."""
    root = args.dir.rstrip("/") or "/"
    if not os.path.isabs(root):
        raise BadSyncInput(f"DIR {args.dir!r} is relative; pass the absolute trainer.default_local_dir "
                           "(the same path on every node)")
    try:
        order = [nodes.parse(spec) for spec in args.nodes]
    except ValueError as exc:
        raise BadSyncInput(str(exc)) from None
    if len(set(order)) != len(order):
        raise BadSyncInput(f"--nodes names a node twice ({' '.join(args.nodes)}); list each node once")
    result = {"dir": root, "plan": {}, "skipped": [], "nodes": {}, "dry_run": args.dry_run}
    found = []
    try:
        listings, trackers = {}, {}
        for node in order:
            listings[node], trackers[node] = nodes.listing(args.ssh, node, root, TRACKER)
        if not any(listings.values()):
            raise BadSyncInput(f"{root} holds no files on any of the nodes; pass the run's trainer.default_local_dir")
        damaged = {node: damaged_on(args.ssh, node, root, args.remote_python) for node in order}
        plan, skipped, kept = make_plan(order, listings, trackers, args.all, damaged)
        for rel, where in not_copied(listings, damaged).items():
            found.append(Finding(WARNING, f"{root}/{rel}", f"not copied: damaged on {', '.join(map(str, where))}, the "
                                 "only node(s) holding it", "resume from an earlier step that is whole on every node "
                                 "(trainer.resume_from_path)", code="damaged_not_copied"))
        result["plan"] = {str(n): [{"path": r, "from": str(s), "size": z} for r, s, z in files]
                          for n, files in plan.items()}
        result["skipped"] = [{"step": s, "reason": why} for s, why in skipped]
        found += [Finding(WARNING, root if step is None else f"{root}/global_step_{step}", why, code="step_skipped")
                  for step, why in skipped]
        if not args.dry_run:
            for dst in order:
                for wave in waves(plan[dst]):
                    for src in order:
                        rels = [r for r, s, _ in wave if s == src]
                        if rels:
                            nodes.copy(args.ssh, src, dst, root, rels, args.progress or sys.stderr.isatty())
            union = {rel for files in listings.values() for rel in files}  # the copies added no new name
            for dst in order:
                here = set(listings[dst]) | {rel for rel, _, _ in plan[dst]}
                result["nodes"][str(dst)] = recheck(args.ssh, dst, root, args.remote_python, union, kept, here)
                withdraw(args.ssh, dst, root, listings[dst], plan[dst], result["nodes"][str(dst)])
                found += [dataclasses.replace(f, where={"node": str(dst)})
                          for f in result["nodes"][str(dst)]["findings"]]
    except nodes.NodeError as exc:  # the run stops here: what was planned so far is still shown
        found.append(Finding(ERROR, str(exc.node), exc.message, exc.fix, code="node_failed",
                             where={"node": str(exc.node)}))
    if args.json:
        print(to_json("ckpt sync", found, **result))
    else:
        _print(result, found)
    return exit_code(found)


def _print(result: dict, found: list) -> None:
    verb = "would copy" if result["dry_run"] else "copied"
    for node, files in result["plan"].items():
        if files:
            print(f"{node}: {verb} {len(files)} files, {sum(f['size'] for f in files) / 1e6:.1f} MB")
            if result["dry_run"]:
                for f in files:
                    print(f"  {f['path']}  <- {f['from']}")
    if not any(result["plan"].values()):
        print("nothing to copy: every node holds the files a resume reads" + ("" if not result["skipped"] else
                                                                              " (of the finished steps)"))
    for skip in result["skipped"]:
        step = skip["step"]
        print(f"skipped{'' if step is None else f' global_step_{step}'}: {skip['reason']}")
    for node, r in result["nodes"].items():
        print(f"{node}: ckpt check {['resumable', 'warnings', 'errors'][r['exit_code']]} (exit {r['exit_code']})")
        for line in lines([f for f in r["findings"] if f.severity != INFO], indent="  "):
            print(line)
    for line in lines([f for f in found if f.code == "node_failed"]):
        print(line)
    print(verdict(exit_code(found), ok="ok"))

"""`verl-ascend ckpt check DIR [--recipe RECIPE.sh] [--json]`."""

import json
import sys
from pathlib import Path

_HELP = """Check, offline and without an NPU, that the checkpoint verl would resume from DIR
(trainer.default_local_dir) is complete on this node: the tracker and global_step_N agree, every
role's save finished (Megatron's ckpt_contents.json, written last), every dist_ckpt has its
.metadata and metadata.json and every shard byte range torch's reader names is on disk, FSDP has
every rank's files, data.pt is there. With --recipe, also whether that recipe can load it: world
size and TP/PP/EP/CP against the saved layout and optimizer format. Run it on every node.
Exit 0 = resumable, 1 = warnings, 2 = errors or bad input."""

_MARK = {"error": "ERROR", "warning": "WARN ", "info": "info "}


def register(sub) -> None:
    p = sub.add_parser("ckpt", help="check a verl checkpoint folder before resuming from it", description=_HELP)
    what = p.add_subparsers(dest="ckpt_command", metavar="ACTION")
    what.required = True
    c = what.add_parser("check", help="is the checkpoint in DIR complete here, and loadable by the recipe?",
                        description=_HELP)
    c.add_argument("dir", metavar="DIR", help="trainer.default_local_dir of the run (holds global_step_N/)")
    c.add_argument("--recipe", metavar="RECIPE.sh", help="the launch script that will resume (read, never run)")
    c.add_argument("--json", action="store_true", help="print the report as one JSON object")
    c.set_defaults(func=main)


def main(args) -> int:
    from .scan import ERROR, WARNING, scan

    root = Path(args.dir)
    if not root.is_dir():
        print(f"verl-ascend ckpt check: {args.dir}: no such folder; pass trainer.default_local_dir", file=sys.stderr)
        return 2
    findings, by_step = scan(root)
    report = {"dir": str(root), "step": next(iter(by_step), None)}
    if args.recipe:
        from .recipe import compare, planned

        try:
            plan = planned(args.recipe)
        except (ValueError, RuntimeError, OSError) as exc:
            print(f"verl-ascend ckpt check: --recipe {args.recipe}: {exc}", file=sys.stderr)
            return 2
        report["recipe"] = plan
        for roles in by_step.values():
            findings += compare(roles, plan)
    states = {f.severity for f in findings}
    report["exit_code"] = 2 if ERROR in states else 1 if WARNING in states else 0
    report["findings"] = [f.as_dict() for f in findings]
    report["roles"] = {r.name: {"kind": r.kind, "world_size": r.world_size, "parallel": r.parallel,
                                "optimizer_format": r.optim_sharding} for roles in by_step.values() for r in roles}
    if args.json:
        print(json.dumps(report))
    else:
        print(f"checkpoint: {root}" + (f" (resume would load global_step_{report['step']})" if report["step"] is not None
                                       else ""))
        for name, r in report["roles"].items():
            print(f"  {name}: {r['kind']}, world size {r['world_size']}"
                  + (f", {r['parallel']}" if r["parallel"] else "")
                  + (f", optimizer {r['optimizer_format']}" if r["optimizer_format"] else ""))
        for f in findings:
            print(f"{_MARK[f.severity]} {f.path}: {f.message}")
            if f.fix and f.severity != "info":
                print(f"       fix: {f.fix}")
        print(f"result: {['resumable', 'warnings', 'errors'][report['exit_code']]} (exit {report['exit_code']})")
    return report["exit_code"]

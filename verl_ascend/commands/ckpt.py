"""`verl-ascend ckpt check DIR [--recipe RECIPE.sh] [--json]`."""

import argparse
import sys

_HELP = """Check, offline and without an NPU, that the checkpoint verl would resume from DIR
(trainer.default_local_dir) is complete on this node: the tracker and global_step_N agree, every
role's save finished (Megatron's ckpt_contents.json, written last), every dist_ckpt has its
.metadata and metadata.json and every shard byte range torch's reader names is on disk, FSDP has
every rank's files, data.pt is there. With --recipe, also whether that recipe can load it: world
size and TP/PP/EP/CP against the saved layout and optimizer format. Run it on every node.
Exit 0 = resumable, 1 = warnings, 2 = errors or bad input."""

_SYNC_HELP = """For a run whose checkpoints are on each node's own disk: verl writes the tracker, data.pt,
each role's manifest, transformer_config.json, the HF export and every dist_ckpt's .metadata,
common.pt and metadata.json on one node only, so the other nodes cannot resume. This lists DIR on
every node over ssh, copies each of those files (from the node that has it) to every node that
lacks it, with rsync run on the source node, and then runs `ckpt check DIR` on every node.

  verl-ascend ckpt sync /data/ckpt/run1 --nodes node0 node1 node2 node3 --dry-run
  verl-ascend ckpt sync /data/ckpt/run1 --nodes root@10.0.0.1 root@10.0.0.2:2222 --all

A global_step_N folder whose save did not finish (no ckpt_contents.json / fsdp_config.json on any
node) is skipped and named. Each file arrives whole (rsync's temp file, then rename); the tracker is
copied last. Needs: passwordless ssh from here to each node and between nodes, rsync and GNU find on
the nodes, verl-ascend on the nodes for the re-check (--remote-python).
Exit 0 = every node resumable, 1 = warnings (a skipped step, shards on other nodes only),
2 = errors or bad input (a node unreachable, a copy failed, a node still not resumable)."""

def register(sub) -> None:
    p = sub.add_parser("ckpt", help="check a verl checkpoint folder before resuming from it; sync it between nodes",
                      description=_HELP + "\n\n`ckpt sync DIR --nodes NODE...` copies what a resume needs to every "
                      "node when the checkpoint is not on shared storage (see `ckpt sync --help`).")
    what = p.add_subparsers(dest="ckpt_command", metavar="ACTION")
    what.required = True
    c = what.add_parser("check", help="is the checkpoint in DIR complete here, and loadable by the recipe?",
                        description=_HELP)
    c.add_argument("dir", metavar="DIR", help="trainer.default_local_dir of the run (holds global_step_N/)")
    c.add_argument("--recipe", metavar="RECIPE.sh", help="the launch script that will resume (read, never run)")
    c.add_argument("--json", action="store_true", help="print the report as one JSON object")
    c.set_defaults(func=run)
    s = what.add_parser("sync", help="copy what a resume needs to every node (non-shared storage), then check each",
                        description=_SYNC_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("dir", metavar="DIR", help="trainer.default_local_dir, absolute, the same path on every node")
    s.add_argument("--nodes", nargs="+", required=True, metavar="NODE",
                   help="every node of the run as [user@]host[:port] (or a Host alias of ~/.ssh/config); list "
                        "the node of rank 0 / the trainer driver first: it is preferred as the source on a tie")
    s.add_argument("--all", action="store_true", help="also copy every shard (__R_I.distcp, *_rank_R.pt) to "
                   "every node: needed unless every rank resumes on the node that wrote its files")
    s.add_argument("--dry-run", action="store_true", help="print the plan (per node: each file and the node it "
                   "comes from) and change nothing")
    s.add_argument("--ssh", default="ssh", metavar="CMD", help="ssh command, as rsync's -e (default: ssh); used "
                   "from here and from node to node, so any key file it names must exist on every node")
    s.add_argument("--remote-python", default=sys.executable, metavar="PATH", help="python with verl-ascend on "
                   "the nodes, for the re-check (default: this one's path, %(default)s)")
    s.add_argument("--progress", action="store_true", help="show rsync's progress even when stderr is not a "
                   "terminal (it is shown on a terminal)")
    s.add_argument("--json", action="store_true", help="print the plan and the re-check as one JSON object")
    s.set_defaults(func=run)


def run(args) -> int:
    if args.ckpt_command == "sync":
        from verl_ascend.ckpt import sync

        return sync.run(args)
    from verl_ascend.ckpt import report

    return report.run(args.dir, args.recipe, as_json=args.json)  # BadInput: cli.main, exit 2

"""``verl-ascend supervise [options] -- COMMAND...``: keep a long verl run going; ``--status RUN_DIR`` reads its report."""

import argparse

from verl_ascend.commands._args import comma_names, non_negative_int, positive_seconds


def run(args) -> int:
    from verl_ascend.supervise import launch, report
    from verl_ascend.supervise import run as supervise_run

    if args.status:
        return report.status(args.status, as_json=args.json)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    options = supervise_run.Options(
        run_dir=args.run_dir or "supervise-run", max_restarts=args.max_restarts, hang_after=args.hang_after,
        stop_on=tuple(args.stop_on), retry_unknown=args.retry_unknown, dry_run=args.dry_run,
        deadline=launch.deadline_of(args.deadline) if args.deadline else None,
        wait_nodes=args.wait_nodes, nodes=tuple(args.nodes), ssh=args.ssh, remote_python=args.remote_python)
    result = supervise_run.supervise(command, options=options)  # BadInput: cli.main says it, exit 2
    print(result.text())
    return result.exit


def register(sub) -> None:
    p = sub.add_parser(
        "supervise",
        help="run a verl command and keep it going: hangs and crashes caught, failures classified, resumed, reported",
        description="Starts COMMAND (a verl trainer line or a launch script, e.g. `-- bash recipe.sh`), keeps each "
        "attempt's console in the run folder and watches it: failure lines while it lives (a Ray node or actor "
        "dead, a collective timeout, an HCCL / CANN error), a hang inside a step (a phase over k=5 x the longest "
        "seen, or --hang-after, with nothing moving: no console line, no process busy, no checkpoint byte), an "
        "exit 0 before the last step, NaN losses and collapsing rewards. At a failure it saves the evidence "
        "before ending anything (py-spy stacks of every process of the run, their states, the logs' ends), "
        "classifies it with `diagnose` and decides: transient (node or actor died, collective timeout, link "
        "errors, a first hang) -> ends exactly the run's processes and relaunches with trainer.resume_mode=auto "
        "after a back-off; configuration, data, version or resource failures, unknown ones and the same failure "
        "twice without checkpoint progress -> stops with the fix. report.json in the run folder holds every "
        "attempt and the time lost (docs/supervise.md). Exit 0 the run finished; 1 not finished but a requeue "
        "may help (retry budget spent, the deadline, --dry-run saw a failure); 2 bad input; 93 stopped, do not "
        "requeue (nvidia-resiliency-ext's no-restart code).",
    )
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND...",
                   help="the command to run, after --")
    p.add_argument("--run-dir", metavar="DIR", help="the run folder: report.json, each attempt's console, evidence "
                   "and timeline (default ./supervise-run); a supervisor started again on it picks up the running attempt")
    p.add_argument("--max-restarts", type=non_negative_int, default=3, metavar="N",
                   help="relaunches after transient failures before giving up (default 3; back-off 30 s doubling, "
                   "at most 600 s)")
    p.add_argument("--hang-after", type=positive_seconds, metavar="S",
                   help="a step (or the start-up) over S seconds with nothing moving is a hang, instead of the "
                   "budgets learned from the run's own phase times")
    p.add_argument("--stop-on", type=comma_names, default=[], metavar="FLAG,...",
                   help="stop on these health flags (nan, reward_collapse, entropy_blowup, rollout_probs_diff, "
                   "response_length_collapse, memory_growth, throughput_drop); otherwise they are reported only")
    p.add_argument("--retry-unknown", action="store_true", help="retry a failure no family explains, once")
    p.add_argument("--dry-run", action="store_true",
                   help="observe and report only: say what would be done, end nothing, relaunch nothing")
    p.add_argument("--deadline", metavar="TIME",
                   help="the end of the allocation (epoch seconds or ISO time): verl forces a save before it "
                   "through its ESI path (MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP, trainer.esi_redundant_time), "
                   "(on verl 0.9's default trainer v1 through verl-ascend's deadline_save patch, which every node "
                   "with verl-ascend installed has), and the supervisor ends the run at it (exit 1: requeue to go on)")
    p.add_argument("--nodes", nargs="+", default=[], metavar="NODE",
                   help="every node of the run ([user@]host[:port], head first; as ckpt sync takes them): at a failure "
                   "each node's stacks and process states are saved (evidence/nodes/NODE); before a relaunch the "
                   "attempt's processes there are ended by its mark, the nodes must answer, the checkpoint is synced "
                   "(ckpt sync --all) and checked on each; a node unreachable at the start is exit 2")
    p.add_argument("--ssh", default="ssh", metavar="CMD", help="how --nodes are reached (default ssh)")
    p.add_argument("--remote-python", metavar="PATH", help="python with verl-ascend on the nodes (default: this one's)")
    p.add_argument("--wait-nodes", type=positive_seconds, default=600.0, metavar="S",
                   help="how long to wait before a relaunch for --nodes to answer again and, where a Ray cluster "
                   "outlives the command (RAY_ADDRESS, or `ray start` on this node), for Ray to show trainer.nnodes "
                   "nodes alive; then give up, exit 1 (default 600)")
    p.add_argument("--status", metavar="RUN_DIR", help="print the report of the run folder and exit with its code")
    p.add_argument("--json", action="store_true", help="with --status: the report as one JSON line")
    p.set_defaults(func=run)

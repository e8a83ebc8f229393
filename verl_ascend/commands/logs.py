"""`verl-ascend logs LOGFILE...`: table, CSV, plot and a last-step summary of verl's step lines."""

from verl_ascend.commands._args import positive_int
from verl_ascend.logs import report


def run(args) -> int:
    return report.run(args.logfiles, args.csv, args.plot, args.world_size, args.samples_per_step,
                      as_json=args.json)  # BadInput: cli.main, exit 2


def register(sub) -> None:
    p = sub.add_parser(
        "logs",
        help="turn verl's console step lines into a table, CSV, plots and tokens/card/s",
        description="Reads verl's per-step console lines ('step:N - key:value - ...', with or without Ray's "
        "'(TaskRunner pid=...)' prefix and colours) from one or more log files (later files win for repeated "
        "steps), computes end-to-end / update / rollout tokens per card per second (the formulas in verl-ascend's docs/field-reports.md), "
        "prints the last step, and flags training-health problems with the step where each started (rollout/"
        "training probability mismatch, reward or response-length collapse, entropy blow-up, memory growth, "
        "throughput drop). Exit 0 ok, 1 when malformed step lines were skipped or a health flag was raised, "
        "2 on bad input.",
    )
    p.add_argument("logfiles", nargs="+", metavar="LOGFILE", help="driver console log(s) or grep output of Ray logs")
    p.add_argument("--csv", metavar="OUT", help="write every step's metrics (and throughput columns) as CSV")
    p.add_argument("--plot", metavar="OUT.png", help="write reward, response length, timing and throughput panels "
                   "(.png, .pdf or .svg, from the file name)")
    p.add_argument("--world-size", type=positive_int, metavar="N",
                   help="NPUs of the job (nnodes x n_gpus_per_node); default: inferred from perf/throughput")
    p.add_argument("--samples-per-step", type=positive_int, metavar="N",
                   help="train_batch_size x rollout.n, for logs without perf/total_num_tokens")
    p.add_argument("--json", action="store_true", help="print the last step, the health flags and the files written "
                   "as one JSON object (the envelope every command prints)")
    p.set_defaults(func=run)

"""`verl-ascend logs LOGFILE...` (table, CSV, plot, last-step summary) and `verl-ascend logs compare BASELINE RUN...`
(a run against its baseline in bands: verl_ascend/logs/compare.py). The first word picks the parser, so both keep
their own positionals and --help."""

import argparse

from verl_ascend.commands._args import positive_int


class _LogsParser(argparse.ArgumentParser):
    """`logs compare ...` goes to the compare parser; anything else is `logs LOGFILE...`."""

    compare = None

    def parse_known_args(self, args=None, namespace=None):
        if self.compare is not None and args and args[0] == "compare":
            return self.compare.parse_args(args[1:], namespace), []
        return super().parse_known_args(args, namespace)


def run(args) -> int:
    from verl_ascend.logs import compare, report

    if getattr(args, "logs_action", None) == "compare":
        baseline, groups = (args.files, args.run) if args.run else (args.files[:1], [[f] for f in args.files[1:]])
        return compare.run(baseline, groups, args.profile, args.band, args.steps, args.plot, args.world_size,
                           args.samples_per_step, as_json=args.json)  # BadInput: cli.main, exit 2
    return report.run(args.logfiles, args.csv, args.plot, args.world_size, args.samples_per_step,
                      as_json=args.json)  # BadInput: cli.main, exit 2


def _shared(p, plot_help: str) -> None:
    p.add_argument("--plot", metavar="OUT.png", help=plot_help + " (.png, .pdf or .svg, from the file name)")
    p.add_argument("--world-size", type=positive_int, metavar="N",
                   help="NPUs of the job (nnodes x n_gpus_per_node); default: inferred from perf/throughput")
    p.add_argument("--samples-per-step", type=positive_int, metavar="N",
                   help="train_batch_size x rollout.n, for logs without perf/total_num_tokens")


def register(sub) -> None:
    from verl_ascend.logs import bands, compare

    shown = sub.add_parser("logs", help="turn verl's console step lines into a table, CSV, plots and tokens/card/s; "
                           "`logs compare`: a run against its baseline")
    p = _LogsParser(prog=shown.prog, usage="%(prog)s LOGFILE... [options]\n       %(prog)s compare BASELINE RUN [RUN...] "
                    "[options] (see `%(prog)s compare --help`)", description=(
        "Reads verl's per-step console lines ('step:N - key:value - ...', with or without Ray's "
        "'(TaskRunner pid=...)' prefix and colours) from one or more log files (later files win for repeated "
        "steps), computes end-to-end / update / rollout tokens per card per second (the formulas in verl-ascend's docs/field-reports.md), "
        "prints the last step, and flags training-health problems with the step where each started (rollout/"
        "training probability mismatch, reward or response-length collapse, entropy blow-up, memory growth, "
        "throughput drop). Exit 0 ok, 1 when malformed step lines were skipped or a health flag was raised, "
        "2 on bad input. `logs compare` judges runs against a baseline."))
    sub.choices["logs"] = p
    p.add_argument("logfiles", nargs="+", metavar="LOGFILE", help="driver console log(s) or grep output of Ray logs")
    p.add_argument("--csv", metavar="OUT", help="write every step's metrics (and throughput columns) as CSV")
    _shared(p, "write reward, response length, timing and throughput panels")
    p.add_argument("--json", action="store_true", help="print the last step, the health flags and the files written "
                   "as one JSON object (the envelope every command prints)")
    p.set_defaults(func=run, logs_action="summary")
    c = p.compare = argparse.ArgumentParser(prog=f"{shown.prog} compare", description=compare.DESCRIPTION)
    c.add_argument("files", nargs="+", metavar="BASELINE RUN", help="the baseline, then each run: a file or a folder "
                   "(with --run: every file given here is the baseline's)")
    c.add_argument("--run", action="append", nargs="+", metavar="RUN_FILE", help="the files (or folder) of one run; "
                   "repeat for more runs")
    c.add_argument("--profile", default="nightly", choices=("nightly", "gpu-alignment", "none"),
                   help="nightly: verl's Ascend nightly gate (mean of steps 5..14; memory +1 GB, throughput -5%%, step "
                   "time +5%%, rewards ±0.05, rollout_probs_diff_mean ±5%%); gpu-alignment: an NPU run against a GPU "
                   "run (rewards mae ≤ 4%%, rollout_probs_diff_mean ≤ 0.01, throughput ratios reported); none: only "
                   "--band (default: %(default)s)")
    c.add_argument("--band", action="append", default=[], type=bands.band_arg, metavar="METRIC=SPEC",
                   help="judge METRIC in SPEC, replacing the profile's band for it: ±0.05, +5%%, -5%%, +1@last, "
                   "mae:4%%, <0.01, report")
    c.add_argument("--steps", type=compare.window_arg, metavar="FIRST:LAST", help="the window of steps compared (5:14, 5:, :14 "
                   "or all; default: the profile's, 5:14 for nightly, all for gpu-alignment)")
    _shared(c, "write one panel per metric: the runs over the baseline, its band and the window")
    c.add_argument("--json", action="store_true", help="print the verdicts as one JSON object (the envelope)")
    c.set_defaults(func=run, logs_action="compare")

"""`verl-ascend logs LOGFILE...`: table, CSV, plot and a last-step summary of verl's step lines."""

import csv
import os
import sys

from verl_ascend.commands._args import positive_int
from verl_ascend.core import outfiles, progress
from verl_ascend.logs import health, parse, throughput

SUMMARY_PHASES = ("gen", "old_log_prob", "ref", "update_actor", "update_critic", "reward", "adv", "testing", "save_checkpoint")


def write_csv(parsed, out_path: str) -> int:
    columns = ["step"] + parsed.keys()
    with outfiles.atomic(out_path, ".csv") as tmp, open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for step, metrics in parsed.steps.items():
            writer.writerow([step] + [repr(metrics[k]) if k in metrics else "" for k in columns[1:]])
    return len(columns)


def _fmt(value, digits=4):
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:.0f}"


def summarize(parsed, world_sizes, given_world_size) -> str:
    steps = list(parsed.steps)
    lines = [f"parsed {len(steps)} step(s) ({steps[0]}..{steps[-1]}) from {len(parsed.files)} file(s)"]
    if parsed.duplicates:
        lines.append(f"{parsed.duplicates} repeated step line(s): the later one was kept")
    if parsed.malformed:
        lines.append(f"skipped {len(parsed.malformed)} malformed step line(s):")
        for bad in parsed.malformed[:5]:
            lines.append(f"  {bad.path}:{bad.line}: {bad.reason}")
        if len(parsed.malformed) > 5:
            lines.append(f"  ... and {len(parsed.malformed) - 5} more")
    last = steps[-1]
    m = parsed.steps[last]
    g = m.get
    lines.append(f"last step {last}:")
    lines.append(f"  reward mean       {_fmt(g('critic/rewards/mean'))}   (score mean {_fmt(g('critic/score/mean'))})")
    lines.append(f"  response length   mean {_fmt(g('response_length/mean'), 6)}  max {_fmt(g('response_length/max'), 6)}"
                 f"  clip ratio {_fmt(g('response_length/clip_ratio'))}")
    lines.append(f"  prompt length     mean {_fmt(g('prompt_length/mean'), 6)}")
    step_time = g("timing_s/step")
    if step_time:
        parts = [f"{p} {m[f'timing_s/{p}']:.1f} s ({100 * m[f'timing_s/{p}'] / step_time:.0f}%)"
                 for p in SUMMARY_PHASES if m.get(f"timing_s/{p}")]
        lines.append(f"  step time         {step_time:.1f} s: " + ", ".join(parts))
    tps = {k: g(k) for k in throughput.COLUMNS}
    ws = world_sizes.get(last)
    if any(v is not None for v in tps.values()):
        how = "given" if given_world_size else "inferred from perf/throughput"
        lines.append(f"  tokens/card/s     e2e {_fmt(tps['throughput/e2e_tps'])}  update {_fmt(tps['throughput/update_tps'])}"
                     f"  rollout {_fmt(tps['throughput/rollout_tps'])}  (world size {ws}, {how})")
    else:
        lines.append("  tokens/card/s     not computed: pass --world-size N (and --samples-per-step when the log "
                     "has no perf/total_num_tokens)")
    return "\n".join(lines)


def _run(args) -> int:
    missing = [p for p in args.logfiles if not os.path.isfile(p)]
    if missing:
        print(f"verl-ascend logs: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    from verl_ascend.logs.plot import FORMATS

    for option, path in (("--csv", args.csv), ("--plot", args.plot)):
        why = path and outfiles.problem(option, path)
        if why:
            print(f"verl-ascend logs: {why}", file=sys.stderr)
            return 2
    if args.plot and os.path.splitext(args.plot)[1].lower() not in FORMATS:
        print(f"verl-ascend logs: --plot {args.plot}: the file name must end in one of {', '.join(FORMATS)} "
              "(the format is taken from it)", file=sys.stderr)
        return 2
    parsed = parse.parse_files(args.logfiles, progress.bytes_bar)
    if not parsed.steps:
        print(f"verl-ascend logs: no verl step lines ('step:N - key:value - ...') in {', '.join(args.logfiles)}"
              + (f"; {len(parsed.malformed)} malformed ones skipped" if parsed.malformed else "")
              + ". Point it at the driver's console log or `grep -rh 'step:' /tmp/ray/session_latest/logs`.",
              file=sys.stderr)
        return 2
    world_sizes = throughput.add_columns(parsed, args.world_size, args.samples_per_step)
    print(summarize(parsed, world_sizes, args.world_size))
    flags = health.flags(parsed)
    if flags:
        print(f"training health: {len(flags)} flag(s)")
        for flag in flags:
            print(f"  step {flag.step}: {flag.message}")
    if args.csv:
        columns = write_csv(parsed, args.csv)
        print(f"wrote {args.csv}: {len(parsed.steps)} rows x {columns} columns")
    if args.plot:
        from verl_ascend.logs.plot import PlotUnavailable, draw

        try:
            panels = draw(parsed, args.plot)
        except PlotUnavailable as exc:
            print(f"verl-ascend logs: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.plot}: {', '.join(panels)}")
    return 1 if parsed.malformed or flags else 0


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
    p.set_defaults(func=_run)

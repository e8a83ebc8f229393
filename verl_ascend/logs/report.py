"""One `verl-ascend logs` run: parse the step lines, print the last step and the health flags, write CSV / plot."""

import csv
import os

from verl_ascend.core import findings, outfiles, progress
from verl_ascend.logs import health, parse, throughput


class BadInput(findings.BadInput):
    """A missing file, an unusable output path, no step lines: exit 2 with this message."""


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


def _findings(parsed, flags) -> list:
    """Health flags, and one warning for the malformed step lines skipped (exit 1 either way)."""
    found = list(flags)
    if parsed.malformed:
        first = parsed.malformed[0]
        found.insert(0, findings.Finding(
            findings.WARNING, "malformed step lines", f"{len(parsed.malformed)} step line(s) skipped, the first at "
            f"{first.path}:{first.line}: {first.reason}", "look at those lines: a log cut mid-line, or two processes "
            "writing one line", code="malformed_lines", where={"file": first.path, "line": first.line}))
    return found


def run(logfiles, csv_path=None, plot=None, world_size=None, samples_per_step=None, as_json=False) -> int:
    """Print the summary (and write the CSV / plot when asked): 0 ok, 1 malformed lines skipped or a
    health flag raised. Bad input raises :class:`BadInput` (output paths are checked before parsing)."""
    missing = [p for p in logfiles if not os.path.isfile(p)]
    if missing:
        raise BadInput(f"no such file: {', '.join(missing)}")
    from verl_ascend.logs.plot import FORMATS

    for option, path in (("--csv", csv_path), ("--plot", plot)):
        why = path and outfiles.problem(option, path)
        if why:
            raise BadInput(why)
    if plot and os.path.splitext(plot)[1].lower() not in FORMATS:
        raise BadInput(f"--plot {plot}: the file name must end in one of {', '.join(FORMATS)} (the format is taken from it)")
    parsed = parse.parse_files(logfiles, None if as_json else progress.bytes_bar)
    if not parsed.steps:
        raise BadInput(f"no verl step lines ('step:N - key:value - ...') in {', '.join(logfiles)}"
                       + (f"; {len(parsed.malformed)} malformed ones skipped" if parsed.malformed else "")
                       + ". Point it at the driver's console log or `grep -rh 'step:' /tmp/ray/session_latest/logs`.")
    world_sizes = throughput.add_columns(parsed, world_size, samples_per_step)
    flags = health.flags(parsed)
    written = {}
    if csv_path:
        written[csv_path] = f"{len(parsed.steps)} rows x {write_csv(parsed, csv_path)} columns"
    if plot:
        from verl_ascend.logs.plot import draw

        written[plot] = ", ".join(draw(parsed, plot))  # no matplotlib: PlotUnavailable, a BadInput
    found = _findings(parsed, flags)
    if as_json:
        last = list(parsed.steps)[-1]
        print(findings.to_json("logs", found, files=parsed.files, steps=len(parsed.steps),
                               first_step=next(iter(parsed.steps)), last_step=last, duplicates=parsed.duplicates,
                               world_size=world_sizes.get(last), last=parsed.steps[last], written=written))
        return findings.exit_code(found)
    print(summarize(parsed, world_sizes, world_size))
    if flags:
        print(f"training health: {len(flags)} flag(s)")
        for flag in flags:
            print(f"  step {flag.where['step']}: {flag.message}")
    for path, what in written.items():
        print(f"wrote {path}: {what}")
    return findings.exit_code(found)

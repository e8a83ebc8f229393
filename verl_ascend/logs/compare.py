"""`verl-ascend logs compare BASELINE RUN [RUN...]`: each run against the baseline, metric by metric, in bands.

Reads every run (``sources.load``: console logs, CSV, verl's JSONL, TensorBoard; resumed steps once, the later),
keeps the steps both have in the window, judges each band of the profile (``bands``, ``judge``), states the
baseline's noise beside each band, and prints a verdict per metric and a total (text, or the ``--json``
envelope); ``--plot`` overlays the runs (``compare_plot``).

Exit 0 when every judged metric is inside its band, 1 when one is outside or missing from a run, 2 on bad input
(a file that is not there or holds no steps, no common steps in the window, a metric of ``--band`` that no run
has, a bad band or window), raised as ``BadInput`` before anything is written.
"""

import argparse
import dataclasses
import difflib
import os

from verl_ascend.core import findings, outfiles
from verl_ascend.logs import bands, judge, sources

DESCRIPTION = ("Judges each RUN against BASELINE, metric by metric, over the steps both have in a window: the nightly "
               "gate verl's Ascend CI runs (verl-ascend-recipe baseline/check_npu.py), or alignment with a GPU run "
               "(verl's Ascend docs), or bands of your own; states the baseline's step-to-step noise beside each band. A "
               "run is a console log, a `logs --csv` table, verl's file-logger .jsonl, TensorBoard event files, or a "
               "folder of them; several files of one run (a resume) go as BASELINE_FILE... --run RUN_FILE..., repeated "
               "steps count once (the later). Exit 0 all inside, 1 a metric outside its band or missing, 2 bad input.")


class CompareError(findings.BadInput):
    """Runs that cannot be compared: no common steps in the window, an unknown metric."""


def parse_window(text: str) -> tuple:
    """``5:14``, ``5:``, ``:14``, ``all`` -> (first, last), None for an open end; ValueError otherwise."""
    if text.strip() == "all":
        return (None, None)
    first, sep, last = text.partition(":")
    if not sep:
        raise ValueError(f"{text!r} is not FIRST:LAST (e.g. 5:14, 5:, :14 or all)")
    window = tuple(int(x) if x.strip() else None for x in (first, last))
    if None not in window and window[0] > window[1]:
        raise ValueError(f"{text!r}: the first step is after the last")
    return window


def window_arg(text: str) -> tuple:
    """argparse type of --steps (its error is argparse's exit 2, naming the value)."""
    try:
        return parse_window(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def window_text(window) -> str:
    first, last = window
    return "all steps" if window == (None, None) else f"steps {'' if first is None else first}..{'' if last is None else last}"


@dataclasses.dataclass
class Run:
    label: str
    parsed: object  # parse.Parsed

    def as_dict(self) -> dict:
        steps = list(self.parsed.steps)
        return {"label": self.label, "files": self.parsed.files, "steps": len(steps), "first_step": steps[0],
                "last_step": steps[-1], "duplicates": self.parsed.duplicates, "malformed": len(self.parsed.malformed)}


def _label(paths) -> str:
    names = [os.path.basename(os.path.normpath(p)) for p in paths]
    return names[0] + (f" +{len(names) - 1}" if len(names) > 1 else "")


def _labels(groups) -> list:
    labels = [_label(g) for g in groups]
    return [f"{i}:{lab}" if labels.count(lab) > 1 else lab for i, lab in enumerate(labels)]


def _check_bands(chosen, extra, runs):
    """A ``--band`` metric no run carries is bad input, named with the closest metrics the runs have."""
    known = set()
    for run in runs:
        known.update(run.parsed.keys())
    for band in extra:
        if band.metric not in known:
            close = difflib.get_close_matches(band.metric, sorted(known), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; the runs have e.g. {', '.join(sorted(known)[:5])}"
            raise CompareError(f"--band {band.metric}: no run has this metric{hint}")


def _common_steps(base, run, window, label):
    common = [s for s in base.parsed.steps if s in run.parsed.steps and judge.in_window(s, window)]
    if not common:
        b, r = list(base.parsed.steps), list(run.parsed.steps)
        raise CompareError(f"{label}: no step both it ({r[0]}..{r[-1]}) and the baseline ({b[0]}..{b[-1]}) have in "
                           f"{window_text(window)}; choose a window both cover with --steps FIRST:LAST (e.g. --steps "
                           f"{max(b[0], r[0])}:{min(b[-1], r[-1])}) or --steps all")
    return common


def _finding(v: judge.Verdict) -> list:
    b = v.band
    where = {"run": v.run, "metric": b.metric}
    if v.steps:
        where["steps"] = [v.steps[0], v.steps[-1]]
    if v.status == judge.MISSING:
        return [findings.Finding(findings.WARNING, b.metric, f"{v.run}: not judged, {v.key or b.metric} missing in "
                                 f"{' and '.join(v.missing_in)}", "log the metric in both runs (verl prints it when the "
                                 "feature behind it is on), or judge without it: --band with another metric, or "
                                 "--profile none", code="metric_missing", where=where, sources=(b.source,) if b.source else ())]
    found = []
    text = describe(v)
    if v.status == judge.FAIL:
        found.append(findings.Finding(findings.WARNING, b.metric, f"{v.run}: outside {b.describe()}: {text}",
                                      "look at the run's change since the baseline; if the shift is intended, "
                                      "record a new baseline", code="outside_band", where=where,
                                      sources=(b.source,) if b.source else ()))
    elif v.status == judge.REPORT:
        found.append(findings.Finding(findings.INFO, b.metric, f"{v.run}: {text}", code="ratio", where=where))
    else:
        found.append(findings.Finding(findings.OK, b.metric, f"{v.run}: inside {b.describe()}: {text}",
                                      code="inside_band", where=where))
    if v.narrower_than_noise:
        found.append(findings.Finding(
            findings.INFO, b.metric, f"{v.run}: band {b.describe()} is narrower than the noise it is judged in: the "
            f"baseline moves {_g(v.noise_step)} step to step, so {_judged_text(v, v.noise)} from noise alone; an "
            f"unchanged run falls outside about {v.false_alarm:.0%} of the time", code="band_narrower_than_noise",
            where=where))
    return found


def _g(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def _judged_text(v, x) -> str:
    if v.band.kind in ("rel", "mae", "report"):
        return f"±{x * 100:.2g}%" if v.band.kind != "mae" else f"mae ≈ {x * 100:.2g}%"
    return f"±{x:.3g}"


def describe(v: judge.Verdict) -> str:
    """``baseline 40.33, run 72.3 (+79.3%), steps 1..3`` in the band's own terms."""
    b = v.band
    span = f"step {v.steps[0]}" if len(v.steps) == 1 else f"steps {v.steps[0]}..{v.steps[-1]} ({len(v.steps)})"
    if b.kind == "mae":
        change = f"mae {_g(v.delta)} = {v.judged * 100:.3g}% of the baseline's mean |value|"
    elif b.kind == "report":
        ref = f" (field report A2/H100: {b.reference:g})" if b.reference is not None else ""
        change = f"ratio run/baseline {_g(v.judged)}{ref}"
    elif b.kind == "below":
        change = f"run mean {_g(v.value)} against the limit {b.limit:g}"
    elif b.kind == "rel":
        change = f"{v.judged * 100:+.3g}%"
    else:
        change = f"{v.delta:+.4g}"
    noise = f", noise ±{_g(v.noise_step)}/step" if v.noise_step is not None else ""
    return f"baseline {_g(v.baseline)}, run {_g(v.value)} ({change}), {span}{noise}"


def _change(v) -> str:
    kind = v.band.kind
    if kind == "rel":
        return f"{v.judged * 100:+.2f}%"
    if kind == "mae":
        return f"mae {v.judged * 100:.2f}%"
    if kind == "below":
        return f"mean {_g(v.value)}"
    if kind == "report":
        return f"x{_g(v.judged)}" + (f" (A2/H100 {v.band.reference:g})" if v.band.reference is not None else "")
    return f"{v.delta:+.4g}"


def table(verdicts) -> list:
    rows = [("metric", "band", "baseline", "run", "change", "noise", "verdict")]
    for v in verdicts:
        b = v.band
        if v.status == judge.MISSING:
            rows.append((b.metric, b.describe(), "-", "-", "-", "-", "MISSING (" + ", ".join(v.missing_in) + ")"))
            continue
        change = _change(v)
        noise = "-" if v.noise is None else _judged_text(v, v.noise) + (" (!)" if v.narrower_than_noise else "")
        mark = {"pass": "pass", "fail": "FAIL", "report": "reported"}[v.status]
        rows.append((v.key or b.metric, b.describe(), _g(v.baseline), _g(v.value), change, noise, mark))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _read(groups, world_size, samples_per_step):
    return [Run(label, sources.load(paths, world_size, samples_per_step)) for label, paths in zip(_labels(groups), groups)]


def run(baseline_paths, run_groups, profile="nightly", extra_bands=(), window=None, plot=None, world_size=None,
        samples_per_step=None, as_json=False) -> int:
    """Judge every run against the baseline: 0 all inside, 1 outside or missing; BadInput for bad input."""
    if plot:
        from verl_ascend.logs.plot import FORMATS

        why = outfiles.problem("--plot", plot)
        if why:
            raise CompareError(why)
        if os.path.splitext(plot)[1].lower() not in FORMATS:
            raise CompareError(f"--plot {plot}: the file name must end in one of {', '.join(FORMATS)}")
    if not run_groups:
        raise CompareError("nothing to compare with the baseline: give BASELINE RUN [RUN...] or BASELINE_FILE... "
                           "--run RUN_FILE...")
    prof = bands.PROFILES[profile]
    window = prof.window if window is None else window
    base, *runs = _read([baseline_paths] + list(run_groups), world_size, samples_per_step)
    chosen = bands.bands_for(profile, extra_bands)
    if not chosen:
        raise CompareError("--profile none judges only --band METRIC=SPEC bands, and none was given")
    _check_bands(chosen, extra_bands, [base] + runs)
    commons = {r.label: _common_steps(base, r, window, r.label) for r in runs}
    verdicts = [judge.judge(r.label, band, base.parsed.steps, r.parsed.steps, window) for r in runs for band in chosen]
    found = [f for v in verdicts for f in _finding(v)]
    written = {}
    if plot:
        from verl_ascend.logs import compare_plot

        written[plot] = ", ".join(compare_plot.draw(base, runs, verdicts, window, plot))
    code = findings.exit_code(found)
    total = "pass" if code == 0 else "fail"
    if as_json:
        print(findings.to_json("logs compare", found, profile=profile, window=list(window), total=total,
                               baseline=base.as_dict(), runs=[r.as_dict() for r in runs],
                               common_steps={k: len(v) for k, v in commons.items()},
                               verdicts=[v.as_dict() for v in verdicts], written=written))
        return code
    print(f"baseline  {base.label}: {_steps_line(base)}")
    for r in runs:
        print(f"run       {r.label}: {_steps_line(r)}")
    print(f"profile   {profile}{' (' + prof.source + ')' if prof.source else ''}, {window_text(window)}")
    for r in runs:
        mine = [v for v in verdicts if v.run == r.label]
        print(f"\n{r.label} against {base.label}, {len(commons[r.label])} common step(s) in the window:")
        print("\n".join(table(mine)))
    notes = [f for f in found if f.severity in (findings.WARNING, findings.INFO) and f.code != "ratio"]
    if notes:
        print()
        print("\n".join(findings.lines(notes)))
    for path, what in written.items():
        print(f"wrote {path}: {what}")
    judged = [v for v in verdicts if v.status != judge.REPORT]
    counts = {s: sum(v.status == s for v in judged) for s in (judge.PASS, judge.FAIL, judge.MISSING)}
    print(f"\ntotal: {total.upper()} ({counts['pass']} inside, {counts['fail']} outside, {counts['missing']} missing)")
    print(findings.verdict(code, ok="all inside"))
    return code


def _steps_line(r: Run) -> str:
    steps = list(r.parsed.steps)
    extra = [f"{r.parsed.duplicates} repeated (later kept)"] if r.parsed.duplicates else []
    extra += [f"{len(r.parsed.malformed)} malformed skipped"] if r.parsed.malformed else []
    return (f"{len(steps)} step(s) {steps[0]}..{steps[-1]} from {len(r.parsed.files)} file(s)"
            + (f" ({', '.join(extra)})" if extra else ""))

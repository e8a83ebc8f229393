"""`logs compare --plot`: one panel per metric, the baseline in black with its band shaded around it, each run in
colour, the window shaded grey, the panel's title saying the verdict (green inside, red outside).

The panels: the metrics the bands judge or report, then those a person reads a run by (reward, response length,
KL, grad norm, entropy, step time with its generation and update phases, throughput, memory), each drawn where
at least one run has it (``logs``' own four panels are in ``plot.py``; the 235B field report compared runs curve
by curve in a web page, docs/field-reports.md#235b-a2-against-h100).
"""

import math

from verl_ascend.logs import judge
from verl_ascend.logs.plot import DPI, PlotUnavailable

WATCHED = (
    ("critic/rewards/mean", "critic/score/mean"),
    ("response_length/mean",),
    ("actor/kl_loss", "actor/ppo_kl"),
    ("actor/grad_norm",),
    ("actor/entropy",),
    ("timing_s/step",),
    ("perf/throughput", "throughput/e2e_tps"),
    ("actor/perf/max_memory_allocated_gb", "perf/max_memory_allocated_gb"),
)
PHASES = (("timing_s/gen", "--"), ("timing_s/update_actor", ":"))  # drawn in the step-time panel
COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
NCOLS = 3
BAND_LABEL = "band around the baseline (in each title)"


def _series(steps, key):
    points = [(s, m[key]) for s, m in steps.items() if key in m and not math.isnan(m[key])]
    return [p[0] for p in points], [p[1] for p in points]


def _panels(base, runs, verdicts):
    """[(key, [verdicts of that metric])] in order: judged metrics first, then the watched ones present."""
    keys, seen = [], set()
    for v in verdicts:
        key = v.key or v.band.metric
        if key not in seen:
            seen.add(key)
            keys.append((key, [w for w in verdicts if (w.key or w.band.metric) == key]))
    carried = set()
    for r in [base] + runs:
        carried.update(r.parsed.keys())
    for spellings in WATCHED:
        key = next((k for k in spellings if k in carried), None)
        if key and not (set(spellings) & seen):
            seen.add(key)
            keys.append((key, []))
    return keys


def _band_edges(v, ys):
    """Lower and upper edge of the band around the baseline's curve, per point (None where open)."""
    b = v.band
    if b.kind == "abs":
        lo, hi = [y - b.limit for y in ys], [y + b.limit for y in ys]
    elif b.kind == "rel":
        lo, hi = [y - abs(y) * b.limit for y in ys], [y + abs(y) * b.limit for y in ys]
    elif b.kind == "mae":
        level = sum(abs(y) for y in ys) / len(ys) * b.limit
        lo, hi = [y - level for y in ys], [y + level for y in ys]
    elif b.kind == "below":
        return None, [b.limit] * len(ys)
    else:
        return None, None
    if b.direction == "up":
        lo = None
    elif b.direction == "down":
        hi = None
    return lo, hi


def _draw_panel(ax, key, mine, base, runs, window):
    xs, ys = _series(base.parsed.steps, key)
    ax.plot(xs, ys, color="black", linewidth=1.6, label=f"baseline {base.label}")
    for v in mine[:1]:
        bx, by = xs, ys
        if v.band.stat == "last" and v.steps:  # judged at one step: the band there only
            at, half = v.steps[-1], max(0.3, 0.01 * (max(base.parsed.steps) - min(base.parsed.steps)))
            bx, by = [at - half, at + half], [base.parsed.steps[at][v.key]] * 2
        lo, hi = _band_edges(v, by)
        if bx and (lo or hi):
            ax.fill_between(bx, lo or by, hi or by, color="grey", alpha=0.3, linewidth=0, label=BAND_LABEL)
    for i, r in enumerate(runs):
        rx, ry = _series(r.parsed.steps, key)
        ax.plot(rx, ry, color=COLOURS[i % len(COLOURS)], linewidth=1.2, label=r.label)
    if key == "timing_s/step":
        for phase, style in PHASES:
            for i, r in enumerate([base] + runs):
                px, py = _series(r.parsed.steps, phase)
                colour = "black" if i == 0 else COLOURS[(i - 1) % len(COLOURS)]
                ax.plot(px, py, color=colour, linestyle=style, linewidth=0.9,
                        label=phase.split("/")[-1] if i == 0 else None)
    first, last = window
    lo_x = first if first is not None else min(base.parsed.steps)
    hi_x = last if last is not None else max(base.parsed.steps)
    ax.axvspan(lo_x - 0.5, hi_x + 0.5, color="tab:blue", alpha=0.08, label="window")
    for edge in (lo_x - 0.5, hi_x + 0.5):
        ax.axvline(edge, color="tab:blue", linewidth=0.6, linestyle="--", alpha=0.6)
    title, colour = key, "black"
    if mine:
        states = [v.status for v in mine]
        worst = judge.FAIL if judge.FAIL in states else judge.MISSING if judge.MISSING in states else states[0]
        title += f"  [{worst}, {mine[0].band.describe()}]"
        colour = {judge.FAIL: "tab:red", judge.MISSING: "tab:red", judge.PASS: "tab:green"}.get(worst, "black")
    ax.set_title(title, fontsize=9, color=colour)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)
    if not xs and not any(_series(r.parsed.steps, key)[0] for r in runs):
        ax.text(0.5, 0.5, "in no run", ha="center", va="center", transform=ax.transAxes, color="grey")


def draw(base, runs, verdicts, window, out_path: str) -> list:
    """Writes the figure (format from the suffix; temp file, then rename); returns the panel titles."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise PlotUnavailable(f"--plot needs matplotlib ({exc}): pip install 'verl-ascend[plot]'") from None
    from verl_ascend.core import outfiles

    panels = _panels(base, runs, verdicts)
    rows = max(1, math.ceil(len(panels) / NCOLS))
    fig, axes = plt.subplots(rows, NCOLS, figsize=(5 * NCOLS, 3.2 * rows + 0.6), dpi=DPI, squeeze=False)
    for ax, (key, mine) in zip(axes.flat, panels):
        _draw_panel(ax, key, mine, base, runs, window)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("step", fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    legend = {}
    for ax in axes.flat:  # one legend for the figure: every label once (the phases live in the step-time panel)
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    handles, labels = list(legend.values()), list(legend)
    fig.legend(handles, labels, loc="upper center", ncol=min(6, len(labels)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (3.2 * rows + 0.6)))
    fmt = out_path.rsplit(".", 1)[-1].lower()
    titles = [key for key, _ in panels]
    try:
        with outfiles.atomic(out_path) as tmp:
            meta = {"Description": "panels: " + "; ".join(titles)} if fmt == "png" else None
            fig.savefig(tmp, format=fmt, metadata=meta)
    finally:
        plt.close(fig)
    return titles

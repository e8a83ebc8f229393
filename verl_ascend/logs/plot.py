"""One figure (PNG, PDF or SVG) with the panels a GRPO run is watched by: reward, response length, time per phase,
throughput per card (the 235B field report had users load logs into a web page for the first of these;
docs/field-reports.md#235b-throughput-formulas)."""

import os

from verl_ascend.core.findings import BadInput

REWARD_KEYS = ("critic/rewards/mean", "critic/score/mean")
LENGTH_KEYS = ("response_length/mean", "response_length/max")
# top-level phases timed inside timing_s/step by verl's trainer (gen includes generate_sequences and reshard)
PHASES = ("gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor",
          "update_weights", "testing", "save_checkpoint")
PANELS = ("reward mean", "response length", "time per step by phase", "throughput per card")
FIGSIZE = (12, 8)
DPI = 100


FORMATS = (".png", ".pdf", ".svg")  # matplotlib writes each natively; the name's suffix picks one


class PlotUnavailable(BadInput, RuntimeError):
    pass


def _series(steps, key):
    xs, ys = [], []
    for step, metrics in steps.items():
        value = metrics.get(key)
        if value is not None and value == value:  # drop missing and NaN
            xs.append(step)
            ys.append(value)
    return xs, ys


def _lines(ax, steps, keys, ylabel):
    drawn = False
    for key in keys:
        xs, ys = _series(steps, key)
        if xs:
            ax.plot(xs, ys, marker="o", markersize=3, label=key)
            drawn = True
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "not in the log", ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_ylabel(ylabel)


def _timing(ax, steps):
    present = [p for p in PHASES if any(f"timing_s/{p}" in m for m in steps.values())]
    xs = [s for s, m in steps.items() if "timing_s/step" in m]
    if not xs:
        ax.text(0.5, 0.5, "no timing_s/step in the log", ha="center", va="center", transform=ax.transAxes, color="grey")
        return
    bottom = [0.0] * len(xs)
    for phase in present + ["other"]:
        if phase == "other":  # the rest of the step: data loading, metrics, logging
            heights = [max(0.0, steps[s]["timing_s/step"] - b) for s, b in zip(xs, bottom)]
        else:
            heights = [steps[s].get(f"timing_s/{phase}", 0.0) for s in xs]
        ax.bar(xs, heights, bottom=bottom, label=phase, width=0.8)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_ylabel("seconds")
    ax.legend(fontsize=7, ncol=2)


def draw(parsed, out_path: str, title: str = "") -> list:
    """Writes the figure in the format of ``out_path``'s suffix (temp file, then rename); returns the
    panel titles in order."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(f"--plot needs matplotlib ({exc}): pip install 'verl-ascend[plot]'") from None
    from .throughput import COLUMNS

    steps = parsed.steps
    fig, axes = plt.subplots(2, 2, figsize=FIGSIZE, dpi=DPI, sharex=True)
    reward, length, timing, tps = axes.flat
    _lines(reward, steps, REWARD_KEYS, "reward")
    _lines(length, steps, LENGTH_KEYS, "tokens")
    _timing(timing, steps)
    _lines(tps, steps, COLUMNS, "tokens / card / s")
    for ax, name in zip(axes.flat, PANELS):
        ax.set_title(name)
        ax.grid(alpha=0.3)
    from matplotlib.ticker import MaxNLocator

    for ax in axes[1]:
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title or ", ".join(os.path.basename(p) for p in parsed.files))
    fig.tight_layout()
    fmt = os.path.splitext(out_path)[1].lower().lstrip(".") or "png"
    from verl_ascend.core import outfiles

    try:
        with outfiles.atomic(out_path) as tmp:
            meta = {"Description": "panels: " + "; ".join(PANELS)} if fmt == "png" else {"Subject": "; ".join(PANELS)}
            fig.savefig(tmp, format=fmt, metadata=meta if fmt != "svg" else None)
    finally:
        plt.close(fig)
    return list(PANELS)

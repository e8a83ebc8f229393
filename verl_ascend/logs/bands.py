"""The bands `logs compare` judges a run in: one per metric, with its direction, the statistic it is judged on and
where it comes from; the two published profiles; ``--band METRIC=SPEC`` for one's own.

``nightly`` is verl's nightly Ascend gate: verl's .github/workflows/nightly_ascend.yml downloads
verl-ascend-recipe's ``baseline/check_npu.py`` and a stored baseline and runs ``check_npu.py --log RUN.log --base
baseline.txt`` after each job (https://github.com/verl-project/verl/pull/7541). That script, as read at
https://github.com/verl-project/verl-ascend-recipe/blob/main/baseline/check_npu.py:

- takes the mean of steps 5..14 (those the log has) for ``perf/throughput``, ``timing_s/step``,
  ``critic/rewards/mean`` and ``training/rollout_probs_diff_mean``;
- takes ``actor/perf/max_memory_allocated_gb`` at the log's *last* step, not a mean (older baselines spell it
  ``perf/max_memory_allocated_gb``, which it maps);
- fails memory more than 1 GB above the baseline, throughput more than 5 % below, step time more than 5 % above
  (one-sided since https://github.com/verl-project/verl-ascend-recipe/pull/130: an improvement of 5.38 % had failed
  the nightly, and memory has ~3 GB of night-to-night spread from the rollout's token draw); rewards more than
  0.05 away either way; rollout_probs_diff_mean more than 5 % away either way (relative). A value exactly on the
  limit passes (the script fails on ``>``).

``gpu-alignment`` is what verl's Ascend docs ask of an NPU run against a GPU run of the same recipe:

- rewards' mean absolute error at most 4 % (RL; 2 % of the loss for SFT): docs/ascend_tutorial/ascend_quick_start.rst
  at v0.5.0, https://github.com/volcengine/verl/blob/v0.5.0/docs/ascend_tutorial/ascend_quick_start.rst. Its formula
  is an image (loss_comparison.png) that is not in the text; we compute mean |npu - gpu| over the steps divided by
  mean |gpu|, and give the absolute MAE beside it.
- ``training/rollout_probs_diff_mean`` within 0.01 ("it is recommended to keep this metric within 0.01"):
  docs/ascend_tutorial/en/dev_guide/model_dev/transfer_to_npu_guide.md, section 3.1.
- throughput ratios NPU / GPU reported, not judged, beside the field report's A2 / H100 figures
  (docs/field-reports.md#235b-a2-against-h100: end to end 0.29, update 0.12, rollout 0.36). The quick start's own
  "throughput ratio" averages ``perf/throughput`` over the first 4 steps: ``--steps 1:4`` gives that.
  Its window is every step both runs have (the docs' error is over the N steps of the run).
"""

import argparse
import dataclasses
import re

from verl_ascend.core.findings import BadInput

CHECK_NPU = "https://github.com/verl-project/verl-ascend-recipe/blob/main/baseline/check_npu.py"
PR_130 = "https://github.com/verl-project/verl-ascend-recipe/pull/130"
QUICK_START = "https://github.com/volcengine/verl/blob/v0.5.0/docs/ascend_tutorial/ascend_quick_start.rst"
MIGRATION = "https://github.com/verl-project/verl/blob/main/docs/ascend_tutorial/en/dev_guide/model_dev/transfer_to_npu_guide.md"
FIELD = "docs/field-reports.md#235b-a2-against-h100"

KINDS = ("abs", "rel", "mae", "below", "report")
DIRECTIONS = ("both", "up", "down")  # up: only a higher run fails (time, memory); down: only a lower one (throughput)
STATS = ("mean", "last")

SPEC_HELP = ("SPEC is ±X or X (absolute, either way), +X (at most X above), -X (at most X below), the same with % "
             "(relative to the baseline), mae:X% (mean absolute error over the steps, relative), <X (the run's "
             "mean at most X), or report (ratio shown, not judged); @last judges the last step both runs have "
             "instead of the window's mean. Examples: critic/rewards/mean=±0.05, timing_s/step=+5%, "
             "perf/throughput=-5%, actor/perf/max_memory_allocated_gb=+1@last, actor/grad_norm=mae:10%")


class BandError(BadInput):
    """A --band that does not parse, or names a metric neither run has."""


@dataclasses.dataclass(frozen=True)
class Band:
    metric: str
    kind: str
    limit: float = 0.0  # absolute units (abs, below), a fraction (rel, mae)
    direction: str = "both"
    stat: str = "mean"
    aliases: tuple = ()  # other spellings tried after ``metric``, in order
    source: str = ""
    reference: float = None  # report: a published ratio shown beside the measured one

    @property
    def keys(self) -> tuple:
        return (self.metric,) + tuple(self.aliases)

    def describe(self) -> str:
        """``±0.05``, ``+5%``, ``-5%``, ``+1 @last``, ``mae ≤ 4%``, ``≤ 0.01``, ``report``."""
        if self.kind == "report":
            return "report"
        if self.kind == "mae":
            return f"mae ≤ {_num(self.limit * 100)}%"
        if self.kind == "below":
            return f"≤ {_num(self.limit)}"
        sign = {"both": "±", "up": "+", "down": "-"}[self.direction]
        amount = f"{_num(self.limit * 100)}%" if self.kind == "rel" else _num(self.limit)
        return f"{sign}{amount}" + (" @last" if self.stat == "last" else "")

    def as_dict(self) -> dict:
        return {"metric": self.metric, "kind": self.kind, "limit": self.limit, "direction": self.direction,
                "stat": self.stat, "aliases": list(self.aliases), "source": self.source, "text": self.describe(),
                "reference": self.reference}


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    bands: tuple
    window: tuple  # (first, last) step, None for open
    source: str


def _num(x: float) -> str:
    return f"{x:g}"


PROFILES = {
    "nightly": Profile("nightly", window=(5, 14), source=CHECK_NPU, bands=(
        Band("actor/perf/max_memory_allocated_gb", "abs", 1.0, "up", "last", aliases=("perf/max_memory_allocated_gb",),
             source=PR_130),
        Band("perf/throughput", "rel", 0.05, "down", source=PR_130),
        Band("timing_s/step", "rel", 0.05, "up", source=PR_130),
        Band("critic/rewards/mean", "abs", 0.05, source=CHECK_NPU),
        Band("training/rollout_probs_diff_mean", "rel", 0.05, source=CHECK_NPU),
    )),
    "gpu-alignment": Profile("gpu-alignment", window=(None, None), source=QUICK_START, bands=(
        Band("critic/rewards/mean", "mae", 0.04, source=QUICK_START),
        Band("training/rollout_probs_diff_mean", "below", 0.01, source=MIGRATION),
        Band("perf/throughput", "report", aliases=("throughput/e2e_tps",), source=FIELD, reference=0.29),
        Band("throughput/update_tps", "report", source=FIELD, reference=0.12),
        Band("throughput/rollout_tps", "report", source=FIELD, reference=0.36),
        Band("timing_s/step", "report", source=FIELD),
    )),
    "none": Profile("none", window=(5, 14), source="", bands=()),
}

_SPEC = re.compile(r"^(?P<sign>±|\+-|\+|-)?(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)(?P<pct>%)?$")


def parse_band(text: str) -> Band:
    """``METRIC=SPEC`` -> Band; BandError naming the bad part and the grammar."""
    metric, sep, spec = text.partition("=")
    metric, spec = metric.strip(), spec.strip().replace(" ", "")
    if not sep or not metric or not spec:
        raise BandError(f"--band {text!r} is not METRIC=SPEC. {SPEC_HELP}")
    stat = "mean"
    if spec.endswith(("@last", "@mean")):
        spec, stat = spec[:-5], spec[-4:]
    if spec == "report":
        return Band(metric, "report", stat=stat, source="--band")
    if spec.startswith("mae:") and spec.endswith("%"):
        return Band(metric, "mae", _fraction(text, spec[4:-1]), stat=stat, source="--band")
    if spec.startswith(("<=", "<", "≤")):
        return Band(metric, "below", _fraction(text, spec.lstrip("<=≤"), scale=1.0), stat=stat, source="--band")
    m = _SPEC.match(spec)
    if not m:
        raise BandError(f"--band {text!r}: {spec!r} is not a band. {SPEC_HELP}")
    direction = {"+": "up", "-": "down"}.get(m["sign"], "both")
    kind = "rel" if m["pct"] else "abs"
    limit = float(m["num"]) / (100 if m["pct"] else 1)
    return Band(metric, kind, limit, direction, stat, source="--band")


def band_arg(text: str) -> Band:
    """argparse type of --band (its error is argparse's exit 2, naming the value and the grammar)."""
    try:
        return parse_band(text)
    except BandError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fraction(text, number, scale=0.01):
    try:
        value = float(number) * scale
    except ValueError:
        raise BandError(f"--band {text!r}: {number!r} is not a number. {SPEC_HELP}") from None
    if value < 0:
        raise BandError(f"--band {text!r}: the limit must not be negative. {SPEC_HELP}")
    return value


def bands_for(profile: str, extra=()) -> list:
    """The profile's bands with ``--band`` ones replacing those of the same metric (or alias), in profile order,
    new metrics after."""
    chosen = list(PROFILES[profile].bands)
    for band in extra:
        same = [i for i, b in enumerate(chosen) if band.metric in b.keys]
        if same:
            old = chosen[same[0]]
            chosen[same[0]] = dataclasses.replace(band, aliases=tuple(k for k in old.keys if k != band.metric))
        else:
            chosen.append(band)
    return chosen

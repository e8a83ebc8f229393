"""One metric of one run against the baseline, in one band: the statistic, the delta, pass or fail, and the noise.

The statistic is the mean over the window's steps that both runs have (``stat="mean"``) or the value at the last
step both have (``"last"``, check_npu.py's memory). ``mae`` is mean |run - baseline| over those steps divided by
mean |baseline|; ``below`` judges the run's mean alone; ``report`` gives run / baseline and judges nothing.

Noise: the baseline's own step-to-step spread, sigma = sqrt(sum of squared successive differences / (2 (n - 1)))
(von Neumann's estimator: a trend such as a rising reward does not inflate it as a plain standard deviation
would), from the baseline's values in the window, when it has at least ``MIN_NOISE_STEPS`` of them. What the
band is judged on moves by that noise alone between two runs that differ in nothing else: the difference of two
n-step means by sigma * sqrt(2 / n), of two single steps by sigma * sqrt(2) (relative bands: over |baseline|). The
chance that such an unchanged run lands outside the band (normal noise) is stated, and a band is called narrower
than its noise when that chance exceeds ``FALSE_ALARM``.
"""

import dataclasses
import math
import statistics

MIN_NOISE_STEPS = 5
FALSE_ALARM = 0.05
PASS, FAIL, MISSING, REPORT = "pass", "fail", "missing", "report"


@dataclasses.dataclass
class Verdict:
    run: str
    band: object  # bands.Band
    status: str
    key: str = ""  # the spelling both runs carry
    value: float = None  # the run's statistic
    baseline: float = None
    delta: float = None  # run - baseline (mae: the absolute MAE)
    judged: float = None  # what the band's limit is compared with (delta, relative delta, mae, the run's mean, ratio)
    steps: list = dataclasses.field(default_factory=list)
    noise_step: float = None  # baseline sigma per step
    noise: float = None  # sigma of ``judged`` from step noise alone
    false_alarm: float = None
    missing_in: list = dataclasses.field(default_factory=list)

    @property
    def narrower_than_noise(self) -> bool:
        return self.false_alarm is not None and self.false_alarm > FALSE_ALARM

    def as_dict(self) -> dict:
        return {"run": self.run, "metric": self.band.metric, "key": self.key, "status": self.status,
                "value": self.value, "baseline": self.baseline, "delta": self.delta, "judged": self.judged,
                "band": self.band.as_dict(), "steps": [self.steps[0], self.steps[-1]] if self.steps else [],
                "n_steps": len(self.steps), "noise_per_step": self.noise_step, "noise": self.noise,
                "false_alarm": self.false_alarm, "band_narrower_than_noise": self.narrower_than_noise,
                "missing_in": self.missing_in}


def in_window(step: int, window) -> bool:
    first, last = window
    return (first is None or step >= first) and (last is None or step <= last)


def step_noise(values) -> float:
    if len(values) < MIN_NOISE_STEPS:
        return None
    diffs = [b - a for a, b in zip(values, values[1:])]
    return math.sqrt(sum(d * d for d in diffs) / (2 * len(diffs)))


def _outside_chance(limit: float, sigma: float, both: bool) -> float:
    if not sigma:
        return 0.0
    tail = 0.5 * math.erfc(limit / sigma / math.sqrt(2))  # P(Z > limit / sigma)
    return 2 * tail if both else tail


def _key(band, base, run):
    """The first spelling of the band's metric both runs carry, else (None, the runs lacking every spelling)."""
    for key in band.keys:
        if any(key in m for m in base.values()) and any(key in m for m in run.values()):
            return key, []
    lacking = [name for name, steps in (("baseline", base), ("run", run))
               if not any(k in m for k in band.keys for m in steps.values())]
    return None, lacking or ["baseline", "run"]


def judge(label: str, band, base: dict, run: dict, window) -> Verdict:
    """``base`` and ``run`` are {step: {metric: value}} (the whole runs: ``@last`` looks past the window)."""
    key, lacking = _key(band, base, run)
    if key is None:
        return Verdict(label, band, MISSING, missing_in=lacking)
    both = [s for s in base if s in run and key in base[s] and key in run[s]]
    steps = both[-1:] if band.stat == "last" else [s for s in both if in_window(s, window)]
    if not steps:
        return Verdict(label, band, MISSING, key=key, missing_in=["the window (no step both runs have it in)"])
    b_vals, r_vals = [base[s][key] for s in steps], [run[s][key] for s in steps]
    b, a = statistics.fmean(b_vals), statistics.fmean(r_vals)
    verdict = Verdict(label, band, PASS, key=key, value=a, baseline=b, delta=a - b, steps=steps)
    window_base = [m[key] for s, m in base.items() if key in m and in_window(s, window)]
    verdict.noise_step = step_noise(window_base)
    spread = None if verdict.noise_step is None else verdict.noise_step * math.sqrt(2 / len(steps))
    scale = abs(b) if b else None
    if band.kind == "abs":
        verdict.judged, verdict.noise = a - b, spread
    elif band.kind in ("rel", "report"):
        verdict.judged = (a - b) / abs(b) if b else (0.0 if a == b else math.copysign(math.inf, a - b))
        verdict.noise = spread / scale if spread is not None and scale else None
        if band.kind == "report":
            verdict.judged = a / b if b else None
    elif band.kind == "mae":
        mae = statistics.fmean(abs(x - y) for x, y in zip(r_vals, b_vals))
        mean_abs = statistics.fmean(abs(y) for y in b_vals)
        verdict.delta = mae
        verdict.judged = mae / mean_abs if mean_abs else (0.0 if mae == 0 else math.inf)
        if verdict.noise_step is not None and mean_abs:  # E|x - y| of two equal runs: 2 sigma / sqrt(pi)
            verdict.noise = 2 * verdict.noise_step / math.sqrt(math.pi) / mean_abs
    elif band.kind == "below":
        verdict.judged = a
        verdict.noise = None if verdict.noise_step is None else verdict.noise_step / math.sqrt(len(steps))
    verdict.status = _status(band, verdict.judged)
    if verdict.noise is not None and band.kind in ("abs", "rel"):
        verdict.false_alarm = _outside_chance(band.limit, verdict.noise, band.direction == "both")
    elif verdict.noise is not None and band.kind == "mae":
        verdict.false_alarm = 1.0 if verdict.noise > band.limit else 0.0  # an unchanged run's expected MAE alone
    return verdict


def _status(band, judged) -> str:
    if band.kind == "report":
        return REPORT
    if judged is None:
        return FAIL
    if band.kind in ("mae", "below"):
        return PASS if judged <= band.limit else FAIL
    if band.direction == "up":
        return PASS if judged <= band.limit else FAIL
    if band.direction == "down":
        return PASS if judged >= -band.limit else FAIL
    return PASS if abs(judged) <= band.limit else FAIL

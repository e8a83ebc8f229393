"""Training-health flags on verl's step table, each with the step where the problem started.

- rollout/training mismatch: ``training/rollout_probs_diff_mean`` (verl's own metric,
  verl/utils/debug/metrics.py: mean |p_rollout - p_actor| over response tokens) above 0.01;
- reward or response length collapsing: the trailing mean falls below half of its best;
- entropy blowing up: ``actor/entropy`` above twice its level over the first steps;
- memory growing step over step: ``perf/max_memory_allocated_gb`` (else reserved) rising in most
  steps and ending more than 2 GB / 10 % above where it began (vllm-ascend sleep/wake leaks look so);
- throughput dropping: ``perf/throughput`` (else our ``throughput/e2e_tps``) trailing mean below 70 %
  of its level over the first steps.

Trends need at least ``2 * WINDOW`` steps with the metric; the trailing mean over ``WINDOW`` steps
keeps one noisy step from raising a flag. Thresholds are module constants, named in the output.

A flag is a ``warning`` :class:`~verl_ascend.core.findings.Finding`: ``subject`` and ``code`` the check,
``where`` ``{"step": N}``, the step where the problem started.
"""

import statistics

from verl_ascend.core.findings import WARNING, Finding

from .parse import finite

PROBS_DIFF_MAX = 0.01
COLLAPSE_FRACTION = 0.5
ENTROPY_FACTOR = 2.0
MEMORY_GROWTH_GB = 2.0
MEMORY_GROWTH_FRACTION = 0.10
THROUGHPUT_FRACTION = 0.7
WINDOW = 3


def _flag(check: str, step: int, message: str) -> Finding:
    return Finding(WARNING, check, message, code=check, where={"step": step})


def _series(parsed, *keys):
    """(key, [(step, value)...]) for the first key the steps carry."""
    for key in keys:
        points = [(s, m[key]) for s, m in parsed.steps.items() if finite(m.get(key))]
        if points:
            return key, points
    return None, []


def _trailing(points):
    """(step, mean of the WINDOW values ending at that step) from the WINDOW-th point on."""
    values = [v for _, v in points]
    return [(points[i][0], statistics.fmean(values[i - WINDOW + 1:i + 1])) for i in range(WINDOW - 1, len(points))]


def _probs_diff(parsed):
    key, points = _series(parsed, "training/rollout_probs_diff_mean")
    above = [(s, v) for s, v in points if v > PROBS_DIFF_MAX]
    if not above:
        return []
    step, value = above[0]
    return [_flag("rollout_probs_diff", step,
                 f"{key} {value:.4g} > {PROBS_DIFF_MAX} from step {step} ({len(above)} of {len(points)} steps above): "
                 "rollout and training disagree on token probabilities — compare the rollout and actor precision "
                 "(dtype, vllm-ascend `rl_config`), see verl's rollout correction options")]


def _collapse(parsed, check, keys, what):
    key, points = _series(parsed, *keys)
    if len(points) < 2 * WINDOW:
        return []
    trail = _trailing(points)
    peak_step, peak = max(trail, key=lambda p: p[1])
    if peak <= 0:
        return []
    after = [(s, v) for s, v in trail if s > peak_step and v < COLLAPSE_FRACTION * peak]
    if not after or trail[-1][1] >= COLLAPSE_FRACTION * peak:
        return []
    step, value = after[0]
    return [_flag(check, step, f"{what} collapsing: {key} trailing mean {value:.4g} at step {step}, below "
                 f"{COLLAPSE_FRACTION:.0%} of its best {peak:.4g} (step {peak_step}); last {trail[-1][1]:.4g}")]


def _versus_start(parsed, keys, factor, above):
    """(key, first-steps level, step, trailing mean there, last trailing mean) for the first step whose trailing
    mean is beyond ``factor`` x the level of the first WINDOW steps (above it, or below it), else None."""
    key, points = _series(parsed, *keys)
    if len(points) < 2 * WINDOW:
        return None
    base = statistics.median(v for _, v in points[:WINDOW])
    if base <= 0:
        return None
    trail = _trailing(points)
    beyond = [(s, v) for s, v in trail if (v > factor * base if above else v < factor * base)]
    if not beyond:
        return None
    return key, base, beyond[0][0], beyond[0][1], trail[-1][1]


def _entropy(parsed):
    found = _versus_start(parsed, ("actor/entropy",), ENTROPY_FACTOR, above=True)
    if not found:
        return []
    key, base, step, value, _ = found
    return [_flag("entropy_blowup", step, f"entropy blowing up: {key} trailing mean {value:.4g} at step {step}, over "
                 f"{ENTROPY_FACTOR:g}x its first-steps level {base:.4g}")]


def _memory(parsed):
    key, points = _series(parsed, "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb")
    if len(points) < 2 * WINDOW:
        return []
    values = [v for _, v in points]
    base = statistics.median(values[:WINDOW])
    end = statistics.median(values[-WINDOW:])
    rising = sum(b >= a for a, b in zip(values, values[1:])) / (len(values) - 1)
    if end - base < max(MEMORY_GROWTH_GB, MEMORY_GROWTH_FRACTION * base) or rising < 0.8:
        return []
    # started: the last step still at the first-steps level; the growth runs from the step after it
    step = next((points[i + 1][0] for i in range(len(values) - 1, -1, -1) if values[i] <= base), points[0][0])
    return [_flag("memory_growth", step, f"memory growing step over step: {key} {base:.1f} -> {end:.1f} GB, rising in "
                 f"{rising:.0%} of steps, from step {step} — a leak across rollout sleep/wake or cached tensors")]


def _throughput(parsed):
    found = _versus_start(parsed, ("perf/throughput", "throughput/e2e_tps"), THROUGHPUT_FRACTION, above=False)
    if not found or found[4] >= THROUGHPUT_FRACTION * found[1]:  # recovered by the end: no flag
        return []
    key, base, step, value, last = found
    return [_flag("throughput_drop", step, f"throughput dropping: {key} trailing mean {value:.4g} at step {step}, below "
                 f"{THROUGHPUT_FRACTION:.0%} of its first-steps level {base:.4g}; last {last:.4g}")]


def flags(parsed) -> list:
    found = _probs_diff(parsed)
    found += _collapse(parsed, "reward_collapse", ("critic/rewards/mean", "critic/score/mean"), "reward")
    found += _collapse(parsed, "response_length_collapse", ("response_length/mean",), "response length")
    found += _entropy(parsed)
    found += _memory(parsed)
    found += _throughput(parsed)
    return sorted(found, key=lambda f: f.where["step"])

"""Tokens per card per second, by the formulas of docs/field-reports.md#235b-throughput-formulas:

    tps = (response_length/mean + prompt_length/mean) x global_batch_size x n / world_size / time

with time = timing_s/step (end to end), timing_s/update_actor (training) or timing_s/gen
(rollout). verl logs the numerator itself as perf/total_num_tokens, and perf/throughput =
total / (timing_s/step x world_size), which gives the world size when the user does not.
"""

TIMES = {"e2e_tps": "timing_s/step", "update_tps": "timing_s/update_actor", "rollout_tps": "timing_s/gen"}
COLUMNS = tuple(f"throughput/{name}" for name in TIMES)


def tokens(metrics: dict, samples_per_step=None):
    """Prompt + response tokens of the step's batch, or None when the log and the user do not say."""
    if metrics.get("perf/total_num_tokens"):
        return metrics["perf/total_num_tokens"]
    resp, prompt = metrics.get("response_length/mean"), metrics.get("prompt_length/mean")
    if samples_per_step and resp is not None and prompt is not None:
        return (resp + prompt) * samples_per_step
    return None


def inferred_world_size(metrics: dict):
    total = metrics.get("perf/total_num_tokens")
    step_time = metrics.get("perf/time_per_step") or metrics.get("timing_s/step")
    per_card = metrics.get("perf/throughput")
    if not (total and step_time and per_card):
        return None
    return round(total / (step_time * per_card))


def for_step(metrics: dict, world_size=None, samples_per_step=None) -> dict:
    """{throughput/e2e_tps: ..., ...} for the times the step has; empty when tokens or world size are unknown."""
    total = tokens(metrics, samples_per_step)
    cards = world_size or inferred_world_size(metrics)
    if not total or not cards:
        return {}
    out = {}
    for name, key in TIMES.items():
        seconds = metrics.get(key)
        if seconds:
            out[f"throughput/{name}"] = total / cards / seconds
    return out


def add_columns(parsed, world_size=None, samples_per_step=None) -> dict:
    """Adds the throughput columns to each step in place; returns {step: world size used or None}."""
    used = {}
    for step, metrics in parsed.steps.items():
        metrics.update(for_step(metrics, world_size, samples_per_step))
        used[step] = world_size or inferred_world_size(metrics)
    return used

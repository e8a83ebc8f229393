"""`verl-ascend logs` training-health flags, each with the step where the problem started."""

import json

import pytest

from verl_ascend import cli
from verl_ascend.logs import health, parse

pytestmark = pytest.mark.verl_agnostic


def table(rows):
    parsed = parse.Parsed()
    for step, metrics in enumerate(rows, 1):
        parsed.steps[step] = metrics
    return parsed


def steady(n=12, **over):
    rows = []
    for i in range(n):
        m = {"critic/rewards/mean": 0.5 + 0.01 * i, "response_length/mean": 900.0 + 5 * (i % 3),
             "actor/entropy": 0.5 + 0.01 * (i % 2), "perf/max_memory_allocated_gb": 50.0 + 0.1 * (i % 2),
             "perf/throughput": 8.0 + 0.1 * (i % 3), "training/rollout_probs_diff_mean": 0.004}
        for key, values in over.items():
            m[key.replace("__", "/")] = values[i]
        rows.append(m)
    return table(rows)


def checks(parsed):
    found = health.flags(parsed)
    assert all(f.severity == "warning" and f.code == f.subject for f in found), found  # a flag is a warning
    return {f.subject: f.where["step"] for f in found}


def test_a_steady_run_raises_no_flag():
    assert checks(steady()) == {}


def test_probs_diff_above_verls_bound_from_its_first_step():
    diffs = [0.004] * 6 + [0.02, 0.008, 0.03, 0.03, 0.03, 0.03]
    assert checks(steady(training__rollout_probs_diff_mean=diffs)) == {"rollout_probs_diff": 7}


def test_reward_collapse_starts_where_the_trailing_mean_halves():
    rewards = [0.5, 0.55, 0.6, 0.62, 0.6, 0.4, 0.2, 0.1, 0.05, 0.02, 0.01, 0.0]
    flags = checks(steady(critic__rewards__mean=rewards))
    # trailing-3 means: peak 0.607 (step 4); first below 0.303 at step 8 (0.233)
    assert flags == {"reward_collapse": 8}


def test_a_dip_that_recovers_is_no_collapse():
    rewards = [0.5, 0.55, 0.6, 0.62, 0.1, 0.1, 0.1, 0.6, 0.65, 0.7, 0.7, 0.7]
    assert checks(steady(critic__rewards__mean=rewards)) == {}


def test_response_length_collapse():
    lengths = [900, 950, 1000, 1000, 980, 700, 300, 100, 60, 40, 30, 30]
    # trailing-3 means: peak 993.3 (step 5); step 7 660, step 8 366.7 (< 496.7)
    assert checks(steady(response_length__mean=lengths)) == {"response_length_collapse": 8}


def test_entropy_blowup():
    entropy = [0.5, 0.5, 0.5, 0.55, 0.6, 0.8, 1.2, 1.8, 2.5, 3.0, 3.5, 4.0]
    # base 0.5; trailing means: step 7 0.867, step 8 1.267 (> 1.0)
    assert checks(steady(actor__entropy=entropy)) == {"entropy_blowup": 8}


def test_memory_growth_and_where_it_started():
    memory = [50.0, 50.0, 50.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0]
    assert checks(steady(perf__max_memory_allocated_gb=memory)) == {"memory_growth": 5}
    noisy = [50.0, 53.0, 50.0, 53.0, 50.0, 53.0, 50.0, 53.0, 50.0, 53.0, 50.0, 53.0]  # up and down: no leak
    assert checks(steady(perf__max_memory_allocated_gb=noisy)) == {}


def test_throughput_drop():
    tput = [8.0, 8.1, 7.9, 8.0, 7.0, 6.0, 5.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    # base 8.0; threshold 5.6; trailing means: step 7 6.0, step 8 5.0
    assert checks(steady(perf__throughput=tput)) == {"throughput_drop": 8}


def test_too_few_steps_for_trends():
    assert checks(steady(n=5, critic__rewards__mean=[0.9, 0.8, 0.1, 0.0, 0.0])) == {}


def test_cli_prints_flags_and_exits_1_in_text_and_json(tmp_path, capsys):
    log = tmp_path / "run.log"
    lines = []
    for step, reward in enumerate([0.5, 0.55, 0.6, 0.62, 0.6, 0.4, 0.2, 0.1, 0.05, 0.02], 1):
        lines.append(f"(TaskRunner pid=1) step:{step} - critic/rewards/mean:{reward} - response_length/mean:900.0 - "
                     f"timing_s/step:100.0 - training/rollout_probs_diff_mean:0.002")
    log.write_text("\n".join(lines) + "\n")
    assert cli.main(["logs", str(log)]) == 1
    out = capsys.readouterr().out
    assert "training health: 1 flag(s)" in out and "step 8: reward collapsing" in out
    assert cli.main(["logs", "--json", str(log)]) == 1
    got = json.loads(capsys.readouterr().out)
    assert got["exit_code"] == 1 and got["last_step"] == 10
    assert [(f["subject"], f["where"]) for f in got["findings"]] == [("reward_collapse", {"step": 8})]

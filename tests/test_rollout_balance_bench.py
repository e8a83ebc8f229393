"""bench/rollout_balance.py: its length model hits the seed's figures, and its claims hold on its draws.

The bench prints the ratios (nothing timed here); these tests keep the model and the floor argument
it prints honest: a calibration that drifted, or a tiled order that stopped being the floor, fails.
"""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from subproc import ROOT, clean_env

BENCH = ROOT / "bench" / "rollout_balance.py"
pytestmark = pytest.mark.verl_agnostic


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("rollout_balance", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_calibrated_model_reproduces_seed_step_1(bench):
    model = bench.calibrate(bench.SEED_BATCH)
    lengths = bench.draw_lengths(np.random.default_rng(1), 128 * 200, 16, model, rho=0.5)  # 200 steps
    assert abs(lengths.mean() / bench.TARGET["mean"] - 1) < 0.02
    assert abs((lengths >= bench.TARGET["max"]).mean() - bench.TARGET["clipped"]) < 0.004
    assert lengths.max() == bench.TARGET["max"]
    batch_minima = lengths.reshape(-1, bench.SEED_BATCH).min(axis=1)  # one 2048-row step each
    assert abs(np.median(batch_minima) / bench.TARGET["min"] - 1) < 0.1


def test_tiled_is_the_floor_when_every_worker_holds_every_prompt(bench):
    """Any other length-blind order puts unequal prompt mixes on workers: never better on average."""
    rng = np.random.default_rng(2)
    model = bench.calibrate(bench.SEED_BATCH)
    prompts, n, workers = 32, 8, 8
    uids = np.repeat(np.arange(prompts), n)
    tiled = np.asarray(bench.tiled_permutation(uids.tolist()))
    others = [rng.permutation(prompts * n) for _ in range(5)]
    tiled_sum, other_sums = 0.0, np.zeros(len(others))
    for _ in range(400):
        lengths = bench.draw_lengths(rng, prompts, n, model, rho=0.5)
        tiled_sum += bench.imbalance(lengths, tiled, workers)
        other_sums += [bench.imbalance(lengths, order, workers) for order in others]
    assert tiled_sum < other_sums.min()


def test_json_report_names_the_prompt_share_the_target_needs():
    proc = subprocess.run([sys.executable, str(BENCH), "--steps", "40", "--json"], env=clean_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    for name, result in report["results"].items():
        assert result["tiled_max_over_mean"] < result["stock_max_over_mean"], name
        need = result["rho_needed"]
        if need["rho"] is not None:
            assert need["tiled_max_over_mean"] <= 1.05
    big = report["results"]["qwen3-235b"]
    assert big["samples_per_worker_per_prompt"] == 1
    assert big["rho_needed"]["rho"] > 0.5  # the shape's figure at the default rho misses the target


def test_bad_rho_exits_2():
    proc = subprocess.run([sys.executable, str(BENCH), "--rho", "1.5"], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--rho 1.5" in proc.stderr

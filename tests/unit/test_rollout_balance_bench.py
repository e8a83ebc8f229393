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


def test_tiled_order_stays_near_the_floor_and_beats_stock_on_the_235b_shape(bench):
    """Tiled within 2 % of the independently computed floor; stock/tiled >= 1.2 on the 235B shape."""
    rng = np.random.default_rng(3)
    model = bench.calibrate(bench.SEED_BATCH)
    for name, (prompts, n, workers) in bench.SHAPES.items():
        r = bench.run_shape(rng, prompts, n, workers, model, 0.5, 60)
        assert r["tiled_max_over_mean"] <= r["floor_max_over_mean"] * bench.FLOOR_SLACK, name
        if name == "qwen3-235b":
            assert r["stock_max_over_mean"] / r["tiled_max_over_mean"] >= bench.SPEEDUP_BAR


# Long-tail prompt: its samples are 100x longer than the rest. Two agent-loop workers, four servers.
LONG, SHORT = 1000.0, 10.0


def _long_tail_requests(bench, order):
    lengths = np.array([LONG] * 4 + [SHORT] * 4)  # prompt 0 (4 samples) is the long one, then prompt 1
    return bench.agent_loop_requests(lengths, order, workers=2)


def test_request_model_takes_the_long_prompt_off_one_worker_whatever_the_order(bench):
    """verl's balancer sees requests, not positions. In stock order one agent-loop worker holds the
    whole long prompt (the positional model's straggler: 4 long samples on one worker), yet the
    requests are spread by count: every server gets 2, never more than 2 long ones, and the chance
    that two long samples share a server is the same in both orders (so tiling buys nothing here)."""
    stock = np.arange(8)
    tiled = np.asarray(bench.tiled_permutation([0] * 4 + [1] * 4))
    shared = {}
    for name, perm in (("stock", stock), ("tiled", tiled)):
        requests = _long_tail_requests(bench, perm)
        if name == "stock":
            assert [r[2] for r in requests if r[1] == 0] == [LONG] * 4
        collisions = 0
        for seed in range(400):  # ties are broken at random, as verl does
            out = bench.serve(requests, servers=4, slots=8, router=bench.LeastInFlight(4, np.random.default_rng(seed)))
            assert np.bincount(out["servers"], minlength=4).tolist() == [2, 2, 2, 2]
            longs = np.bincount([s for s, r in zip(out["servers"], requests) if r[2] == LONG], minlength=4)
            assert longs.max() <= 2
            collisions += int(longs.max() == 2)
        shared[name] = collisions / 400
    assert abs(shared["stock"] - shared["tiled"]) < 0.1
    assert abs(shared["stock"] - 5 / 6) < 0.1  # round 2's two long samples miss round 1's servers 1 time in 6


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
    # the default per path follows the numbers: tiled only where dispatch position decides server load
    assert report["defaults"] == {"spmd": True, "global": False, "per-worker": False}
    big_paths = big["paths"]
    assert big_paths["spmd"]["gain"] >= 1.2 and big_paths["per-worker"]["gain"] < 1.0
    assert big["rho_needed"]["rho"] > 0.5  # the shape's figure at the default rho misses the target


def test_bad_rho_exits_2():
    proc = subprocess.run([sys.executable, str(BENCH), "--rho", "1.5"], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--rho 1.5" in proc.stderr

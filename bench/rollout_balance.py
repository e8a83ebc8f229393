"""Tokens per rollout worker with verl's interleaved dispatch vs verl-ascend's tiled dispatch.

Response-length model (a prompt's samples share its difficulty):
    length(i, j) = min(cap, floor + exp(m + s * (sqrt(rho) * a_i + sqrt(1 - rho) * e_ij)))
    a_i ~ N(0, 1) is prompt i's difficulty, e_ij ~ N(0, 1) the sample's own noise, rho the share of
    the log-variance that belongs to the prompt (default 0.5), cap = max_response_length = 4096.
    floor, m and s are solved so that the model matches the step-1 log of docs/field-reports.md#235b-step-1-figures (Qwen3-235B GRPO on
    A2): mean 1329 tokens, 4.7% of responses clipped at 4096, min 227 (the expected minimum of the
    batch). The bench prints the simulated mean / max / min / clipped share next to the targets.

For each shape (prompts x samples over workers) and each step, the batch is put in the order verl
dispatches it (stock: interleaved; tiled: ``verl_ascend.patches.rollout_order.order.tiled_permutation`` over
the prompts' uids), cut into equal contiguous slices like ``DataProto.chunk(workers)``, and the
response tokens per worker are summed. Printed: max/mean tokens per worker (1.0 = perfectly
balanced; the slowest worker sets the step time), stock and tiled measured on the same draws, and
their ratio. This positional model is verl 0.6.x's spmd rollout (``rollout.mode=sync``): each DP
rank's engine generates exactly the slice it was handed. Bar: tiled within 2 % of the
floor below, and stock/tiled >= 1.2 on the Qwen3-235B shape.

Request-level model (agent-loop rollout): the batch is still cut positionally, but into agent-loop
workers, which send every sample as its own request; verl routes each request to a server:
- ``global`` (verl 0.7.1+, ``GlobalRequestLoadBalancer`` in ``verl/workers/rollout/router.py``,
  shared by all agent-loop workers): the server with the fewest requests in flight, ties at random;
  a request counts from acquire until it finishes;
- ``per-worker`` (verl 0.6.x / 0.7.0, ``AsyncLLMServerManager._choose_server`` in
  ``verl/experimental/agent_loop/agent_loop.py``): each agent-loop worker sends to the server it
  has sent the fewest requests so far (a heap of counts that never go down).
Agent-loop workers launch their whole slice at once (``asyncio.gather``), so requests arrive
together, worker after worker in turn. Each server pulls its requests first come first served into
``--slots`` concurrent sequences that decode one token per tick. Printed per path: max/mean tokens
per server and the step's makespan (slowest server), stock vs tiled. A path gets tiled by default
when stock/tiled of its max/mean tokens reaches 1.05 (``GAIN_BAR``) on the 235B shape and tiled is
not worse on the other.

The floor no order can beat: when n is a multiple of the worker count, tiled gives every worker
the same prompts (n / workers samples of each). A worker's total is then the sum of independent
per-sample deviations around the same prompt means, whose variance is the same for every
assignment of 128 samples per worker; any other order only adds the spread of prompt means. So
tiled is the best order chosen before the lengths are known, and what is left depends only on how
much of the length variance is the sample's own. The script prints the smallest prompt share rho
at which tiled reaches the target, and what verl's global_seqlen would then show.
"""

import argparse
import heapq
import json
import math
import sys

import numpy as np

from verl_ascend.patches.rollout_order.order import tiled_permutation

TARGET = {"mean": 1329.0, "max": 4096, "min": 227.0, "clipped": 0.047}
# Same log, same step: verl's global_seqlen/min|max|mean cut the interleaved batch (2048 rows) into
# 128 contiguous parts = one prompt's 16 samples each (prompt + response tokens; prompt mean 84).
SEED_PROMPT_SUMS = {"max_over_mean": 32712 / 22615.3, "min_over_mean": 13889 / 22615.3, "prompt_tokens": 84}
SWEEP = (0.0, 0.25, 0.5, 0.75)
GOAL = 1.05  # a target once set for the 235B shape, withdrawn: it lies below the floor computed above
FLOOR_SLACK = 1.02  # tiled within 2 % of the computed floor
SPEEDUP_BAR = 1.2  # stock / tiled on the 235B shape, positional path
GAIN_BAR = 1.05  # a path gets tiled by default when stock/tiled reaches this (smaller gains are within run noise)
SERVERS = {"qwen3-235b": 16, "qwen2.5-7b": 2}  # rollout servers (one per DP replica) in the same shapes
AGENT_WORKERS = 8  # verl's rollout.agent.num_workers default
SLOTS = 256  # vLLM max_num_seqs, verl's rollout default
RHO_GRID = tuple(round(0.05 * i, 2) for i in range(20))  # 0.0 .. 0.95
SEED_BATCH = 128 * 16  # the log the model is calibrated to: 128 prompts x 16 samples
SHAPES = {"qwen3-235b": (128, 16, 16), "qwen2.5-7b": (32, 16, 2)}  # prompts, samples (n), workers


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _bisect(f, lo: float, hi: float, steps: int = 80) -> float:
    """Root of an increasing function on [lo, hi]."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def calibrate(batch_size: int, target=TARGET) -> dict:
    """floor, m, s of the shifted, capped log-normal that hits the target mean, clip share, min."""
    cap = target["max"]
    z_clip = -_inverse_phi(target["clipped"])  # P(length >= cap) = clipped
    z_min = _inverse_phi(1.0 / (batch_size + 1))  # where the smallest of batch_size draws sits

    def solve_s(floor: float) -> float:
        room = cap - floor

        def mean_minus_target(s: float) -> float:
            m = math.log(room) - z_clip * s
            capped = math.exp(m + s * s / 2) * _phi((math.log(room) - m - s * s) / s) + room * (1 - _phi(z_clip))
            return target["mean"] - (floor + capped)  # larger s -> smaller mean for a fixed clip share

        return _bisect(mean_minus_target, 1e-3, 5.0)

    def min_minus_target(floor: float) -> float:
        s = solve_s(floor)
        m = math.log(cap - floor) - z_clip * s
        return floor + math.exp(m + z_min * s) - target["min"]

    floor = _bisect(min_minus_target, 0.0, target["min"] - 1.0)
    s = solve_s(floor)
    return {"floor": floor, "m": math.log(cap - floor) - z_clip * s, "s": s, "cap": cap}


def _inverse_phi(p: float) -> float:
    return _bisect(lambda x: _phi(x) - p, -10.0, 10.0)


def draw_lengths(rng, prompts: int, n: int, model: dict, rho: float) -> np.ndarray:
    """Lengths in verl's interleaved order: row p * n + j is sample j of prompt p."""
    difficulty = rng.standard_normal(prompts)[:, None]
    noise = rng.standard_normal((prompts, n))
    z = math.sqrt(rho) * difficulty + math.sqrt(1 - rho) * noise
    lengths = model["floor"] + np.exp(model["m"] + model["s"] * z)
    return np.minimum(np.rint(lengths), model["cap"]).reshape(-1)


def imbalance(lengths: np.ndarray, order, workers: int) -> float:
    per_worker = np.array([chunk.sum() for chunk in np.array_split(lengths[order], workers)])
    return float(per_worker.max() / per_worker.mean())


def run_shape(rng, prompts: int, n: int, workers: int, model: dict, rho: float, steps: int) -> dict:
    uids = np.repeat(np.arange(prompts), n)  # the interleaved batch's uid column
    stock_order = np.arange(prompts * n)
    tiled_order = np.asarray(tiled_permutation(uids.tolist()))
    stock, tiled, floor, sums_max, sums_min, first = [], [], [], [], [], None
    for _ in range(steps):
        lengths = draw_lengths(rng, prompts, n, model, rho)
        first = lengths if first is None else first
        stock.append(imbalance(lengths, stock_order, workers))
        tiled.append(imbalance(lengths, tiled_order, workers))
        floor.append(floor_imbalance(rng, lengths, prompts, n, workers))
        sums = (lengths.reshape(prompts, n) + SEED_PROMPT_SUMS["prompt_tokens"]).sum(axis=1)
        sums_max.append(sums.max() / sums.mean())
        sums_min.append(sums.min() / sums.mean())
    stock, tiled = np.array(stock), np.array(tiled)
    return {
        "shape": f"{prompts} prompts x {n} samples, {workers} workers",
        "stock_max_over_mean": float(stock.mean()),
        "tiled_max_over_mean": float(tiled.mean()),
        "stock_p95": float(np.percentile(stock, 95)),
        "tiled_p95": float(np.percentile(tiled, 95)),
        "tiled_over_stock": float((tiled / stock).mean()),
        "floor_max_over_mean": float(np.mean(floor)),
        "prompt_sums": {"max_over_mean": float(np.mean(sums_max)), "min_over_mean": float(np.mean(sums_min))},
        "step1_lengths": {
            "mean": float(first.mean()), "max": float(first.max()), "min": float(first.min()),
            "clipped": float((first >= model["cap"]).mean()),
        },
    }


def floor_imbalance(rng, lengths: np.ndarray, prompts: int, n: int, workers: int) -> float:
    """max/mean tokens per worker when every worker gets n / workers random samples of every prompt.

    Computed independently of ``tiled_permutation``: the best any length-blind order can do in
    expectation (samples of a prompt are exchangeable), so tiled should sit on it.
    """
    grid = lengths.reshape(prompts, n)
    per_worker = np.zeros(workers)
    for row in grid:
        shuffled = rng.permutation(row)
        per_worker += np.array([part.sum() for part in np.array_split(shuffled, workers)])
    return float(per_worker.max() / per_worker.mean())


class LeastInFlight:
    """verl 0.7.1+ GlobalRequestLoadBalancer.acquire_server/release_server: fewest in flight, random ties."""

    def __init__(self, servers: int, rng):
        self.inflight = np.zeros(servers, dtype=np.int64)
        self.rng = rng

    def acquire(self, worker: int) -> int:
        candidates = np.flatnonzero(self.inflight == self.inflight.min())
        server = int(candidates[self.rng.integers(len(candidates))])
        self.inflight[server] += 1
        return server

    def release(self, server: int) -> None:
        self.inflight[server] -= 1


class LeastAssigned:
    """verl 0.6.x/0.7.0 AsyncLLMServerManager._choose_server: per agent-loop worker, a heap of
    requests sent to each server (never decremented), servers in a shuffled order."""

    def __init__(self, servers: int, rng, workers: int):
        self.sent = [np.zeros(servers, dtype=np.int64) for _ in range(workers)]
        self.order = [rng.permutation(servers) for _ in range(workers)]  # stands in for hash order

    def acquire(self, worker: int) -> int:
        sent, order = self.sent[worker], self.order[worker]
        server = int(order[np.argmin(sent[order])])
        sent[server] += 1
        return server

    def release(self, server: int) -> None:
        pass


ROUTERS = {"global": LeastInFlight, "per-worker": LeastAssigned}


def serve(requests, servers: int, slots: int, router) -> dict:
    """Route requests at arrival and run them first come first served on ``slots`` per server.

    ``requests``: (arrival tick, agent-loop worker, length) in arrival order. Returns the server of
    each request, tokens and makespan per server. A request is in flight from arrival to finish.
    """
    free = [[0.0] * slots for _ in range(servers)]  # per server: heap of slot free times
    running = []  # (finish, server): releases due
    chosen, tokens, makespan = [], np.zeros(servers), np.zeros(servers)
    for arrival, worker, length in requests:
        while running and running[0][0] <= arrival:
            router.release(heapq.heappop(running)[1])
        server = router.acquire(worker)
        start = max(arrival, heapq.heappop(free[server]))
        finish = start + float(length)
        heapq.heappush(free[server], finish)
        heapq.heappush(running, (finish, server))
        chosen.append(server)
        tokens[server] += length
        makespan[server] = max(makespan[server], finish)
    return {"servers": chosen, "tokens": tokens, "makespan": makespan}


def agent_loop_requests(lengths: np.ndarray, order, workers: int) -> list:
    """Arrival sequence: the batch in dispatch order cut into agent-loop workers, which all launch
    their slices at tick 0; arrivals alternate between workers."""
    slices = np.array_split(np.asarray(order), workers)
    requests = []
    for k in range(max(len(part) for part in slices)):
        for worker, part in enumerate(slices):
            if k < len(part):
                requests.append((0.0, worker, lengths[part[k]]))
    return requests


def run_requests(rng, prompts: int, n: int, workers: int, servers: int, model: dict, rho: float, steps: int,
                 router: str, slots: int) -> dict:
    uids = np.repeat(np.arange(prompts), n)
    orders = {"stock": np.arange(prompts * n), "tiled": np.asarray(tiled_permutation(uids.tolist()))}
    tokens = {name: [] for name in orders}
    span = {name: [] for name in orders}
    for _ in range(steps):
        lengths = draw_lengths(rng, prompts, n, model, rho)
        for name, order in orders.items():
            route = ROUTERS[router](servers, rng) if router == "global" else ROUTERS[router](servers, rng, workers)
            out = serve(agent_loop_requests(lengths, order, workers), servers, slots, route)
            tokens[name].append(out["tokens"].max() / out["tokens"].mean())
            span[name].append(out["makespan"].max())
    return {
        "router": router, "servers": servers, "slots": slots,
        **{f"{name}_tokens_max_over_mean": float(np.mean(tokens[name])) for name in orders},
        "stock_over_tiled_makespan": float(np.mean(np.array(span["stock"]) / np.array(span["tiled"]))),
    }


def rho_needed(rng, prompts: int, n: int, workers: int, model: dict, steps: int):
    """Smallest rho on RHO_GRID where tiled meets GOAL (None if none does), with that run's numbers."""
    for rho in RHO_GRID:
        r = run_shape(rng, prompts, n, workers, model, rho, steps)
        if r["tiled_max_over_mean"] <= GOAL:
            return rho, r
    return None, None


def paths_for_shape(rng, name, prompts, n, workers, model, args, positional) -> dict:
    """stock vs tiled on each trainer path, and whether tiled is worth being the default there."""
    steps = max(args.steps // 5, 1)
    paths = {"spmd": {"what": "verl 0.6.x rollout.mode=sync (positional: each DP rank generates its slice)",
                      "gain": positional["stock_max_over_mean"] / positional["tiled_max_over_mean"],
                      "metric": "max/mean tokens per worker",
                      "stock": positional["stock_max_over_mean"], "tiled": positional["tiled_max_over_mean"]}}
    for router, what in (("global", "agent loop, verl 0.7.1+ GlobalRequestLoadBalancer"),
                         ("per-worker", "agent loop, verl 0.6.x/0.7.0 AsyncLLMServerManager")):
        r = run_requests(rng, prompts, n, AGENT_WORKERS, SERVERS[name], model, args.rho, steps, router, args.slots)
        paths[router] = {"what": what, "gain": r["stock_tokens_max_over_mean"] / r["tiled_tokens_max_over_mean"],
                         "metric": "max/mean tokens per server", "makespan_gain": r["stock_over_tiled_makespan"],
                         "stock": r["stock_tokens_max_over_mean"], "tiled": r["tiled_tokens_max_over_mean"]}
    return paths


def path_defaults(results: dict) -> dict:
    """Per trainer path: tiled by default when it gains GAIN_BAR on the 235B shape (the shape the
    straggler was seen on) and is never worse on another shape."""
    names = results["qwen3-235b"]["paths"]
    return {path: results["qwen3-235b"]["paths"][path]["gain"] >= GAIN_BAR
            and all(r["paths"][path]["gain"] >= 1.0 for r in results.values()) for path in names}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500, help="simulated training steps per shape (default 500)")
    parser.add_argument("--rho", type=float, default=0.5,
                        help="share of log-length variance shared by a prompt's samples, in [0, 1) (default 0.5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slots", type=int, default=SLOTS,
                        help=f"concurrent sequences per rollout server in the request-level model (default {SLOTS}, "
                             "vLLM max_num_seqs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--smoke", action="store_true", help="2 steps per shape, seconds: that it runs (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps = 2
    if args.slots < 1:
        parser.error(f"--slots {args.slots} must be at least 1")
    if not 0.0 <= args.rho < 1.0:
        parser.error(f"--rho {args.rho} is outside [0, 1); use e.g. --rho 0.5")
    if args.steps < 1:
        parser.error(f"--steps {args.steps} must be at least 1")

    rng = np.random.default_rng(args.seed)
    results, sweep = {}, {}
    for name, (prompts, n, workers) in SHAPES.items():
        model = calibrate(SEED_BATCH)
        results[name] = {**run_shape(rng, prompts, n, workers, model, args.rho, args.steps), "model": model}
        sweep[name] = {rho: run_shape(rng, prompts, n, workers, model, rho, max(args.steps // 5, 1)) for rho in SWEEP}
        rho, at = rho_needed(rng, prompts, n, workers, model, max(args.steps // 5, 1))
        results[name]["rho_needed"] = {"rho": rho, "prompt_sums": at and at["prompt_sums"],
                                       "tiled_max_over_mean": at and at["tiled_max_over_mean"]}
        results[name]["samples_per_worker_per_prompt"] = n // workers if n % workers == 0 else None
        results[name]["paths"] = paths_for_shape(rng, name, prompts, n, workers, model, args, results[name])
    defaults = path_defaults(results)
    if args.json:
        print(json.dumps({"rho": args.rho, "steps": args.steps, "target": TARGET, "results": results,
                          "sweep": sweep, "defaults": defaults}, indent=2))
        return 0

    print(f"response-length model: shifted log-normal, prompt share of variance rho={args.rho}, "
          f"{args.steps} steps per shape; targets {TARGET}")
    for name, r in results.items():
        m, s1 = r["model"], r["step1_lengths"]
        print(f"\n{name}: {r['shape']}")
        print(f"  model: floor {m['floor']:.0f}, m {m['m']:.3f}, s {m['s']:.3f}, cap {m['cap']}; step 1 draws: "
              f"mean {s1['mean']:.0f}, max {s1['max']:.0f}, min {s1['min']:.0f}, clipped {s1['clipped']:.1%}")
        print(f"  max/mean tokens per worker  stock {r['stock_max_over_mean']:.3f} (p95 {r['stock_p95']:.3f})"
              f"  tiled {r['tiled_max_over_mean']:.3f} (p95 {r['tiled_p95']:.3f})"
              f"  tiled/stock {r['tiled_over_stock']:.3f}")
        floor_ok = r["tiled_max_over_mean"] <= r["floor_max_over_mean"] * FLOOR_SLACK
        print(f"  floor (every worker n/W random samples of every prompt): {r['floor_max_over_mean']:.3f}; "
              f"tiled within {FLOOR_SLACK - 1:.0%} of it: {'yes' if floor_ok else 'NO'}")
        if name == "qwen3-235b":
            speedup = r["stock_max_over_mean"] / r["tiled_max_over_mean"]
            print(f"  stock/tiled {speedup:.3f} (bar >= {SPEEDUP_BAR}: {'meets' if speedup >= SPEEDUP_BAR else 'MISSES'})")
        print(f"  per trainer path ({r['paths']['global']['metric']} for agent loops, {args.slots} slots per server):")
        for key, path in r["paths"].items():
            verdict = "tiled by default" if defaults[key] else "no gain: not applicable by default"
            span = f", makespan stock/tiled {path['makespan_gain']:.3f}" if "makespan_gain" in path else ""
            print(f"    {path['what']}: {path['metric']} stock {path['stock']:.3f} tiled {path['tiled']:.3f}, "
                  f"stock/tiled {path['gain']:.3f}{span}  => {verdict}")
        print("    verl 0.9.x trainer.use_v1 (TransferQueue): not modelled, no positional order to change => not applicable")
        if r["samples_per_worker_per_prompt"]:
            print(f"  every worker holds {r['samples_per_worker_per_prompt']} sample(s) of every prompt: "
                  "tiled is the floor for any order chosen before generation")
        need = r["rho_needed"]
        if need["rho"] is None:
            print(f"  withdrawn 1.05 target: no rho up to {RHO_GRID[-1]} brings tiled to {GOAL}")
        else:
            print(f"  withdrawn 1.05 target: tiled reaches {GOAL} from rho {need['rho']} (tiled {need['tiled_max_over_mean']:.3f}); "
                  f"verl's per-prompt global_seqlen max/mean would then read "
                  f"{need['prompt_sums']['max_over_mean']:.3f} in stock order")
        print("  rho sweep (max/mean per worker):  " + "  ".join(
            f"rho {rho}: stock {v['stock_max_over_mean']:.3f} tiled {v['tiled_max_over_mean']:.3f}"
            for rho, v in sweep[name].items()))
    seed, shape = SEED_PROMPT_SUMS, results["qwen3-235b"]["prompt_sums"]
    print(f"\ncheck against the field report's step 1 (global_seqlen: one prompt's 16 samples per part): per-prompt sums "
          f"max/mean {seed['max_over_mean']:.3f}, min/mean {seed['min_over_mean']:.3f}; model at rho={args.rho}: "
          f"{shape['max_over_mean']:.3f}, {shape['min_over_mean']:.3f}; at rho=0: "
          f"{sweep['qwen3-235b'][0.0]['prompt_sums']['max_over_mean']:.3f}, "
          f"{sweep['qwen3-235b'][0.0]['prompt_sums']['min_over_mean']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Distributed-checkpoint shard validation: torch <= 2.9 vs the installed torch vs verl-ascend `fast`.

Times, in one run, the load-side check (``validate_non_overlapping_shards_metadata``) and the
save-side check (``default_planner._validate_global_plan``) on two layouts:
  experts  Megatron MoE expert weights (layers, 128, 3072, 4096) split (layers, 128, 4, 1);
           94 layers is Qwen3-235B-A22B (48,128 chunks)
  grid     a 2-D tensor cut in an r x c grid
for three implementations:
  <=2.9      torch's algorithm up to 2.9 (pairwise loops), reimplemented here from its
             description: first overlapping pair / every pair compared, volume always checked
  installed  the installed torch's own functions (taken from under the patch)
  fast       what VERL_ASCEND_CKPT_VALIDATION=fast installs
Quadratic runs that would take longer than --direct-limit seconds are not run: their time is
extrapolated from the two largest sizes measured, with the exponent fitted on those (marked ~).

Usage: python bench/ckpt_validation.py [--direct-limit 10] [--repeat 3] [--smoke]

``--smoke`` (CI): the smallest layout of each family, once, in seconds; no target judged.
"""

import argparse
import math
import sys
import time

import torch
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed._shard.sharding_spec import _internals
from torch.distributed.checkpoint import default_planner
from tqdm import tqdm

from verl_ascend.patches import ckpt_validation as patch
from verl_ascend.patches.ckpt_validation import validators as impl

SIZES = {
    "experts": [2, 20, 94, 98],  # layers -> 1,024 / 10,240 / 48,128 / 50,176 chunks
    "grid": [(32, 32), (100, 100), (220, 219), (223, 224)],  # 1,024 / 10,000 / 48,180 / 49,952
}
CALIBRATE = {  # smaller members of each family, for fitting the quadratic algorithms' exponent
    "experts": [2, 3, 4, 6, 8, 12, 16, 24, 32],
    "grid": [(32, 32), (40, 40), (45, 45), (55, 55), (64, 64), (78, 78), (90, 90), (110, 110), (128, 128)],
}


def layout(kind, param):
    if kind == "experts":
        layers = param
        size = (layers, 128, 3072, 4096)
        boxes = [((layer, e, k * 768, 0), (1, 1, 768, 4096)) for layer in range(layers) for e in range(128) for k in range(4)]
    else:
        rows, cols = param
        size = (rows * 64, cols * 32)
        boxes = [((r * 64, c * 32), (64, 32)) for r in range(rows) for c in range(cols)]
    return size, boxes


# ---- torch <= 2.9, from its description (not its code) -------------------------------------


def _pair_overlaps(off_a, size_a, off_b, size_b):
    for d in range(len(off_a)):
        if off_a[d] >= off_b[d] + size_b[d] or off_b[d] >= off_a[d] + size_a[d]:
            return False
    return True


def old_shard_check(shards):
    """First overlapping pair by comparing every pair, unless at most one dimension is sharded."""
    if len(shards) < 2:
        return
    offs = [s.shard_offsets for s in shards]
    sizes = [s.shard_sizes for s in shards]
    varying = [d for d in range(len(offs[0])) if any(o[d] != offs[0][d] or s[d] != sizes[0][d] for o, s in zip(offs, sizes))]
    if len(varying) == 1:
        d = varying[0]
        spans = sorted((o[d], o[d] + s[d] - 1, i) for i, (o, s) in enumerate(zip(offs, sizes)))
        for a, b in zip(spans, spans[1:]):
            if a[1] >= b[0]:
                raise ValueError(f"Shards {shards[a[2]]} and {shards[b[2]]} overlap")
        return
    for i in range(len(shards)):
        for j in range(i + 1, len(shards)):
            if _pair_overlaps(offs[i], sizes[i], offs[j], sizes[j]):
                raise ValueError(f"Shards {shards[i]} and {shards[j]} overlap")


def old_plan_check(global_plan, metadata):
    """Bounds and volume per chunk, then each chunk against every later one; returns a bool."""
    good = True
    for value in metadata.state_dict_metadata.values():
        if isinstance(value, default_planner.BytesStorageMetadata) or len(value.size) == 0:
            continue
        chunks = value.chunks
        volume = 0
        for i, chunk in enumerate(chunks):
            if any(o < 0 or s < 0 or o + s > n for o, s, n in zip(chunk.offsets, chunk.sizes, value.size)):
                good = False
            volume += math.prod(chunk.sizes)
            for other in chunks[i + 1:]:
                if _pair_overlaps(chunk.offsets, chunk.sizes, other.offsets, other.sizes):
                    good = False
        if volume != math.prod(value.size):
            good = False
    return good


# ---- timing ---------------------------------------------------------------------------------


def clock(func, args, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        answer = func(*args)
        best = min(best, time.perf_counter() - start)
    return best, answer


class Timer:
    """Times one implementation over a family; extrapolates once a direct run would be too long."""

    def __init__(self, name, kind, direct_limit, repeat):
        self.name, self.kind, self.limit, self.repeat = name, kind, direct_limit, repeat
        self.points = []  # (chunks, seconds) measured directly

    def fit(self):
        """Least-squares exponent k and scale over the measured points of >= 1,000 chunks."""
        points = [(math.log(n), math.log(t)) for n, t in self.points if n >= 1000 and t > 0]
        if len(points) < 2:
            return None
        mx = sum(x for x, _ in points) / len(points)
        my = sum(y for _, y in points) / len(points)
        k = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
        return k, my - k * mx, sorted({n for n, _ in self.points if n >= 1000})

    def estimate(self, n):
        fitted = self.fit()
        if fitted is None:
            if not self.points:
                return None, None
            n0, t0 = max(self.points)
            return t0 * (n / n0) ** 2, 2.0  # until two points exist: assume quadratic
        k, c, _ = fitted
        return math.exp(c + k * math.log(n)), k

    def time(self, n, func, args):
        guess, k = self.estimate(n)
        if guess is not None and guess > self.limit:
            measured = self.fit()[2]
            return guess, f"t ~ n^{k:.2f}, least-squares fit on n = {', '.join(f'{m:,}' for m in measured)}"
        seconds, _ = clock(func, args, 1 if (guess or 0) > 1 else self.repeat)
        self.points.append((n, seconds))
        return seconds, ""


def inputs(kind, param):
    size, boxes = layout(kind, param)
    shards = [ShardMetadata(shard_offsets=list(o), shard_sizes=list(s), placement=None) for o, s in boxes]
    md = impl._plan_metadata({"w": (size, boxes)})
    return len(boxes), (shards,), (impl._plans(2), md)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Prints a table; "
                                     "ratios are measured (or extrapolated, marked ~) in this run.")
    parser.add_argument("--direct-limit", type=float, default=10.0,
                        help="seconds above which a quadratic run is extrapolated instead of run (default 10)")
    parser.add_argument("--repeat", type=int, default=3, help="best of N for runs under a second (default 3)")
    parser.add_argument("--smoke", action="store_true", help="smallest layouts only, a few seconds: that it runs (CI)")
    args = parser.parse_args(argv)
    sizes, calibrate = ({k: v[:1] for k, v in SIZES.items()}, {k: v[:1] for k, v in CALIBRATE.items()}) \
        if args.smoke else (SIZES, CALIBRATE)
    if args.smoke:
        args.repeat = 1

    originals = {
        "load": patch._current(_internals, "validate_non_overlapping_shards_metadata"),
        "save": patch._current(default_planner, "_validate_global_plan"),
    }
    contract = impl.probe_plan_contract(originals["save"], default_planner)
    impls = {
        "load": {"<=2.9": old_shard_check, "installed": originals["load"], "fast": impl.fast_shard_check(originals["load"])},
        "save": {"<=2.9": old_plan_check, "installed": originals["save"],
                 "fast": impl.fast_plan_check(originals["save"], default_planner, contract)},
    }
    print(f"torch {torch.__version__}; installed _validate_global_plan: returns {contract['returns']}, "
          f"checks volume {contract['volume']}; --direct-limit {args.direct_limit:g}s")
    header = (f"{'layout':<8} {'side':<5} {'chunks':>7}  {'<=2.9 s':>12} {'installed s':>12} {'fast s':>8}  "
              f"{'<=2.9/fast':>11} {'inst/fast':>10}")
    rows, notes = [], []
    jobs = [(kind, side) for kind in sizes for side in ("load", "save")]
    for kind, side in tqdm(jobs, desc="layouts", file=sys.stderr):
        timers = {name: Timer(name, kind, args.direct_limit, args.repeat) for name in ("<=2.9", "installed")}
        for param in calibrate[kind]:  # small sizes: direct, to fit the exponent
            n, load_args, save_args = inputs(kind, param)
            for name, timer in timers.items():
                if (timer.estimate(n)[0] or 0) < args.direct_limit / 2:
                    timer.time(n, impls[side][name], load_args if side == "load" else save_args)
        for param in sizes[kind]:
            n, load_args, save_args = inputs(kind, param)
            call_args = load_args if side == "load" else save_args
            fast_s, fast_answer = clock(impls[side]["fast"], call_args, args.repeat)
            cells = {}
            for name, timer in timers.items():
                seconds, note = timer.time(n, impls[side][name], call_args)
                cells[name] = (seconds, note)
                if note:
                    notes.append(f"{kind}/{side} {name} at {n:,}: {note}")
            if side == "save":
                assert fast_answer == [] or fast_answer is True, fast_answer  # valid layouts stay valid
            rows.append((kind, side, n, cells, fast_s))
            mark = {k: "~" if v[1] else "" for k, v in cells.items()}
            line = (f"{kind:<8} {side:<5} {n:>7,}  {mark['<=2.9'] + format(cells['<=2.9'][0], '.3g'):>12} "
                    f"{mark['installed'] + format(cells['installed'][0], '.3g'):>12} {fast_s:>8.3f}  "
                    f"{mark['<=2.9'] + format(cells['<=2.9'][0] / fast_s, ',.0f') + 'x':>11} "
                    f"{mark['installed'] + format(cells['installed'][0] / fast_s, ',.0f') + 'x':>10}")
            tqdm.write(line if rows[1:] else header + "\n" + line, file=sys.stdout)
    print("\n~ = extrapolated, not run:")
    for note in notes:
        print("  " + note)
    print("\ntargets at ~48k chunks (experts, 94 layers = 48,128 chunks): >=1000x vs <=2.9, >=500x vs installed")
    for kind, side, n, cells, fast_s in rows:
        if kind == "experts" and n == 48128:
            old, inst = cells["<=2.9"][0] / fast_s, cells["installed"][0] / fast_s
            verdict = "met" if old >= 1000 and inst >= 500 else "NOT met"
            print(f"  {side}: {old:,.0f}x vs <=2.9, {inst:,.0f}x vs installed -> {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

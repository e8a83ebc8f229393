"""`verl-ascend logs compare` on two generated 10,000-step console logs: what the comparison costs on top of parsing.

Each log holds verl-shaped step lines (Ray prefix, ~60 metrics as in the 235B field report's line,
tests/fixtures/verl_steps.log) with noise drawn from a seeded generator, and the run's log repeats 200 steps after
a "resume" so the de-duplication is in the measured path. Measured in this process, CPU time
(``time.process_time``), side by side in each round, the order alternating: parsing both logs with the parser
``logs`` uses (``parse.parse_files``), and the whole ``compare.run`` (reading both logs, the nightly profile over
every step, verdicts, noise, the text report to a buffer). The figure is the median over the rounds of
compare - parse; the plot is timed apart (matplotlib's drawing is not the comparison).

    python bench/logs_compare.py [--steps 10000] [--rounds 3] [--smoke]

``--smoke`` (CI): 300 steps, one round; the same report, no figure judged.

Target (#47): compare - parse under 1 s for two 10,000-step logs.
"""

import argparse
import contextlib
import io
import os
import random
import statistics
import sys
import tempfile
import time

from verl_ascend.logs import compare, parse

METRICS = (
    "actor/entropy", "actor/kl_loss", "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/grad_norm",
    "perf/mfu/actor", "actor/perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb",
    "actor/lr", "critic/score/mean", "critic/score/max", "critic/score/min", "critic/rewards/mean",
    "critic/rewards/max", "critic/rewards/min", "critic/advantages/mean", "critic/advantages/max",
    "critic/advantages/min", "critic/returns/mean", "critic/returns/max", "critic/returns/min",
    "response_length/mean", "response_length/max", "response_length/min", "response_length/clip_ratio",
    "prompt_length/mean", "prompt_length/max", "prompt_length/min", "prompt_length/clip_ratio",
    "timing_s/generate_sequences", "timing_s/reshard", "timing_s/gen", "timing_s/reward", "timing_s/old_log_prob",
    "timing_s/ref", "timing_s/adv", "timing_s/update_actor", "timing_s/step", "timing_per_token_ms/gen",
    "timing_per_token_ms/ref", "timing_per_token_ms/adv", "timing_per_token_ms/update_actor", "perf/total_num_tokens",
    "perf/time_per_step", "perf/throughput", "training/rollout_probs_diff_mean", "training/rollout_probs_diff_max",
    "training/rollout_probs_diff_std", "global_seqlen/min", "global_seqlen/max", "global_seqlen/mean",
    "global_seqlen/minmax_diff", "global_seqlen/balanced_min", "global_seqlen/balanced_max",
)


def write_log(path: str, steps: int, seed: int, resume_at=None) -> None:
    rnd = random.Random(seed)
    order = list(range(1, steps + 1))
    if resume_at:  # the steps after the last checkpoint, run again after the resume
        order = list(range(1, resume_at + 201)) + list(range(resume_at + 1, steps + 1))
    with open(path, "w") as fh:
        for step in order:
            values = {k: rnd.gauss(1.0, 0.05) * (1 + i) for i, k in enumerate(METRICS)}
            values["training/global_step"] = step
            fh.write(f"\x1b[36m(TaskRunner pid=11069)\x1b[0m step:{step} - "
                     + " - ".join(f"{k}:{v!r}" for k, v in values.items()) + "\n")


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    steps, rounds = (300, 1) if args.smoke else (args.steps, args.rounds)
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        base, run = os.path.join(tmp, "base.log"), os.path.join(tmp, "run.log")
        write_log(base, steps, seed=1)
        write_log(run, steps, seed=2, resume_at=steps // 2)
        mb = (os.path.getsize(base) + os.path.getsize(run)) / 2**20

        def parse_both():
            parse.parse_files([base])
            parse.parse_files([run])

        def compare_both():
            with contextlib.redirect_stdout(io.StringIO()):
                compare.run([base], [[run]], "nightly", window=(None, None))

        parse_s, compare_s = [], []
        for r in range(rounds):
            pair = (("parse", parse_both), ("compare", compare_both))
            for name, fn in pair if r % 2 == 0 else pair[::-1]:
                (parse_s if name == "parse" else compare_s).append(cpu(fn))
        def with_plot():
            with contextlib.redirect_stdout(io.StringIO()):
                compare.run([base], [[run]], "nightly", window=(None, None), plot=os.path.join(tmp, "cmp.png"))

        plot_s = None if args.smoke else cpu(with_plot)
    extra = statistics.median(c - p for c, p in zip(compare_s, parse_s))
    print(f"two logs of {steps} steps ({len(METRICS) + 1} metrics a line, {mb:.1f} MB together), {rounds} round(s), "
          f"CPU s (python {sys.version.split()[0]})")
    print(f"  parse both (logs' parser)      median {statistics.median(parse_s):.2f}  rounds {[round(x, 2) for x in parse_s]}")
    print(f"  compare (read, judge, report)  median {statistics.median(compare_s):.2f}  rounds {[round(x, 2) for x in compare_s]}")
    print(f"compare over parse: {extra:+.2f} s (target < 1 s)")
    if plot_s is not None:
        print(f"  compare with --plot (apart)    {plot_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`verl-ascend diagnose` on a generated 200 MB multi-node log: wall time and peak memory.

The log mixes what a long verl run prints (Ray-prefixed INFO lines, verl step lines, vLLM and
torch_npu warnings, `[W compiler_depend.ts ...]` lines, HCCL retry warnings) with a few real
failures near the end (a port in use, then 128 ranks reporting EI0006). Each variant runs in a
fresh interpreter; peak memory is the child's max RSS. The reference is the same file read line
by line by plain Python (`for line in f: pass`), run side by side, so the ratio says what the
diagnosis costs on top of just reading the file on this machine.

    python bench/diagnose_speed.py [--mb 200] [--keep PATH] [--smoke]

``--smoke`` (CI): 1 MB, seconds; the same checks of the findings, no timing judged.

Targets: < 15 s and < 300 MB for 200 MB.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

NOISE = (
    "(WorkerDict pid={pid}, ip=10.0.{node}.{host}) INFO {md} {hms} [model_runner.py:1021] Loading weights took 12.3 s\n",
    "(TaskRunner pid=11069) step:{step} - training/global_step:{step} - critic/rewards/mean:0.51 - "
    "response_length/mean:1329.1 - timing_s/gen:1549.5 - timing_s/step:2814.4 - perf/throughput:8.03\n",
    "(WorkerDict pid={pid}, ip=10.0.{node}.{host}) [rank{rank}]:[W{m}{dd} {hms}.819535026 compiler_depend.ts:877] Warning: "
    "The HCCL execution timeout was set to never timeout, so it is bigger than watchdog timeout 1800000ms\n",
    "(vLLMHttpServer pid={pid}) WARNING {md} {hms} [platform.py:120] vllm-ascend: ACL graph mode is disabled\n",
    "[WARNING] HCCL({pid},python):2025-11-20-{hms}.000.100 [hccl_socket.cc:210] [{pid}]socket connect refused, retry 1/30\n",
    "2025-11-20 {hms},123 - verl.workers.fsdp_workers - INFO - Actor use_remove_padding=True, rank {rank}\n",
    "(WorkerDict pid={pid}, ip=10.0.{node}.{host}) /usr/local/lib/python3.10/site-packages/torch_npu/distributed/"
    "distributed_c10d.py:93: UserWarning: HCCL doesn't support gather at the moment.\n",
)
FAILURES = (
    "(WorkerDict pid=7001, ip=10.0.3.4) [rank27]: EJ0003: [PID: 7001] 2025-11-20-23:10:02.816.428 Failed to bind the "
    "IP port. Reason: The IP address and port have been bound already.\n",
) + tuple(
    f"(WorkerDict pid={8000 + r}, ip=10.0.{r // 8}.{r % 8 + 10}) [rank{r}]: EI0006: [PID: {8000 + r}] "
    f"2025-11-20-23:12:{r % 60:02d}.{r:03d}.000 Getting socket times out. Reason: 1. The remote does not initiate a "
    f"connect request.\n"
    for r in range(128)
)

# what the planted failures must be named as, whatever the size: the port first (its cause), then the timeouts
EXPECTED = ["port_in_use", "hccl_connect_timeout"]
EXPECTED_FIRST = (27, "2025-11-20 23:10:02.816")


def generate(path: str, megabytes: int) -> int:
    rnd = random.Random(0)
    target = megabytes << 20
    written = 0
    with open(path, "w") as fh:
        step = 0
        while written < target:
            chunk = []
            for _ in range(2000):
                step += 1
                h, mi, s = (step // 3600) % 24, (step // 60) % 60, step % 60
                line = rnd.choice(NOISE).format(pid=rnd.randrange(1000, 99999), node=rnd.randrange(16),
                                                host=rnd.randrange(10, 18), rank=rnd.randrange(128), step=step,
                                                md="11-20", m="11", dd="20", hms=f"{h:02d}:{mi:02d}:{s:02d}")
                chunk.append(line)
            text = "".join(chunk)
            fh.write(text)
            written += len(text)
        fh.write("".join(FAILURES))
    return os.path.getsize(path)


def run(code_args) -> tuple:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *code_args], capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return proc, elapsed, max(peak_kb, before) / 1024


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--keep", metavar="PATH", help="write the generated log here and keep it")
    parser.add_argument("--smoke", action="store_true", help="1 MB, a few seconds: that the bench runs (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.mb = 1
    folder = None if args.keep else tempfile.mkdtemp(prefix="va-diag-bench-")
    path = args.keep or os.path.join(folder, "driver.log")
    size = generate(path, args.mb)
    # reference first (also warms the page cache for the measured run); max RSS of children only grows,
    # so the reference (a few MB) runs before the diagnosis.
    ref, ref_s, ref_mb = run(["-c", "import sys\nfor line in open(sys.argv[1], errors='replace'): pass", path])
    diag, diag_s, diag_mb = run(["-m", "verl_ascend", "diagnose", "--json", path])
    if diag.returncode != 1:
        print(f"unexpected exit {diag.returncode}:\n{diag.stderr[-2000:]}", file=sys.stderr)
        return 2
    result = json.loads(diag.stdout)
    families = [f["code"] for f in result["findings"]]
    first = result["first_failure"] or {}
    print(f"generated {size / 2**20:.0f} MB, {result['lines']:,} lines: {path}")
    print(f"  plain line-by-line read: {ref_s:6.2f} s   peak {ref_mb:6.0f} MB")
    print(f"  verl-ascend diagnose:    {diag_s:6.2f} s   peak {diag_mb:6.0f} MB   "
          f"(time ratio {diag_s / ref_s:.2f} x the plain read)")
    print(f"  findings: {', '.join(families)}; first failure {first.get('time')} rank {first.get('rank')}")
    if not args.smoke:
        print(f"  targets: < 15 s -> {'met' if diag_s < 15 else 'MISSED'}; "
              f"< 300 MB -> {'met' if diag_mb < 300 else 'MISSED'}")
    if not args.keep:
        os.unlink(path)
        os.rmdir(folder)
    if families != EXPECTED or (first.get("rank"), first.get("time")) != EXPECTED_FIRST:
        print(f"  WRONG findings: expected {', '.join(EXPECTED)}, first failure rank {EXPECTED_FIRST[0]} at "
              f"{EXPECTED_FIRST[1]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

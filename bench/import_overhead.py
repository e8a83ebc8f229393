"""Cost of the plugin on `python -c "import verl"`: wall time with and without it, interleaved.

Runs each variant N times (default 10), alternating so that machine load hits both alike, and
prints the medians and their ratio (target <= 1.05). "without" is the same environment with
VERL_ASCEND=0, which skips everything but reading the one-line .pth file.

    python bench/import_overhead.py [--runs 10] [--code "import verl"]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def one_run(code: str, plugin: bool) -> float:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env["VERL_ASCEND"] = "1" if plugin else "0"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--code", default="import verl")
    args = parser.parse_args(argv)
    one_run(args.code, True)  # warm the file cache for both variants
    with_plugin, without = [], []
    for _ in range(args.runs):
        without.append(one_run(args.code, False))
        with_plugin.append(one_run(args.code, True))
    med_with, med_without = statistics.median(with_plugin), statistics.median(without)
    print(f"python -c {args.code!r}, {args.runs} interleaved runs each")
    print(f"  without plugin (VERL_ASCEND=0): median {med_without:.3f} s  (min {min(without):.3f})")
    print(f"  with plugin:                    median {med_with:.3f} s  (min {min(with_plugin):.3f})")
    print(f"  ratio with/without: {med_with / med_without:.3f}  (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

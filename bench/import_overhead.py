"""Start-up cost of the plugin: `python -c pass` and `python -c "import verl"`, with and without it.

The plugin's `verl_ascend.pth` runs in every Python process of the environment (pip, the `ray`
CLI, every worker), so both figures matter. "without" is the same environment with only that one
file left out: each run starts `python -S` and adds site-packages with `site.addsitedir`, either the
real folder or a throw-away view of it (symlinks to every entry but `verl_ascend.pth`), so both
variants pay the same start-up apart from the plugin. Runs alternate, so machine load hits both
alike; prints the medians and ratios (targets: pass <= 1.15, import verl <= 1.05).

    python bench/import_overhead.py [--runs 15] [--smoke]

``--smoke`` (CI): one paired run of `python -c pass` only, seconds; no ratio judged.
"""

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

PTH = "verl_ascend.pth"
TARGETS = {"pass": 1.15, "import verl": 1.05}


def view_without_plugin(site: Path, into: Path) -> Path:
    for entry in site.iterdir():
        if entry.name != PTH:
            (into / entry.name).symlink_to(entry)
    return into


def one_run(site: Path, code: str) -> float:
    program = f"import site; site.addsitedir({str(site)!r})\n{code}"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    start = time.perf_counter()
    # from the root folder: `-c` puts the working directory first on sys.path, and from a checkout
    # the package would be imported from its sources instead of the installed (compiled) copy
    subprocess.run([sys.executable, "-S", "-c", program], env=env, check=True, capture_output=True, timeout=600, cwd="/")
    return time.perf_counter() - start


def measure(code: str, runs: int, with_site: Path, without_site: Path) -> tuple:
    one_run(with_site, code)  # warm the file cache for both variants
    one_run(without_site, code)
    with_plugin, without = [], []
    for _ in range(runs):
        without.append(one_run(without_site, code))
        with_plugin.append(one_run(with_site, code))
    return statistics.median(with_plugin), statistics.median(without)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="paired runs per program (default 15)")
    parser.add_argument("--smoke", action="store_true", help="one paired run of `python -c pass`: that it runs (CI)")
    args = parser.parse_args(argv)
    targets = {"pass": TARGETS["pass"]} if args.smoke else TARGETS
    if args.smoke:
        args.runs = 1
    site = Path(sysconfig.get_paths()["purelib"])
    if not (site / PTH).is_file():
        print(f"bench: {site / PTH} is missing: install verl-ascend into this environment first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="va-nopth-") as tmp:
        without_site = view_without_plugin(site, Path(tmp))
        for label, target in targets.items():
            code = "pass" if label == "pass" else label
            with_s, without_s = measure(code, args.runs, site, without_site)
            print(f"python -c {code!r}: {args.runs} paired runs, median without plugin {without_s * 1000:.1f} ms, "
                  f"with {with_s * 1000:.1f} ms, ratio {with_s / without_s:.3f} (target <= {target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

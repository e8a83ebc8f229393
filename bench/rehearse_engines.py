"""What a rehearsal costs on each engine: the same shipped recipe rehearsed on Megatron and on FSDP2, one run.

The Megatron rehearsal is the shipped recipe as it is (``ppo_megatron_trainer``: verl's Megatron
engine, the converter's dist checkpoint as initial weights, the ``rehearse_mcore_*`` fixes). The
FSDP rehearsal is a copy of the same recipe naming ``ppo_trainer``, without the lines that set ``*.megatron.*``
keys or pass the bridge's arguments (verl's ``ppo_trainer`` config has no megatron section: main_ppo refuses
them). Both run ``--steps 1`` (train 1 step, save, resume 1 step) on the same ranks, one after the other, in this
run.

Measured per rehearsal: CPU-seconds of every process of the ``rehearse`` command's tree, itself included (utime +
stime from ``/proc/<pid>/stat``, sampled every 0.5 s, the last sample of each process kept: a
process's last < 0.5 s are missed), peak summed PSS (``/proc/<pid>/smaps_rollup``, every 2 s),
wall seconds, and each step's ``timing_s/step`` and ``timing_s/save_checkpoint`` from the
console logs. Printed: both rows and the Megatron/FSDP ratios. Wall time depends on what else the
host runs; the CPU-seconds ratio is the comparison.

    python bench/rehearse_engines.py [--nproc 2] [--recipe recipes/grpo_qwen2_5_7b_a2.sh] [--out DIR] [--smoke]

``--smoke`` (CI, seconds): the same two recipes and the same measuring, of ``verl-ascend check RECIPE`` instead
of a rehearsal (a rehearsal takes minutes); no step figures, nothing compared.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict:
    """(pid, start tick) -> (parent pid, utime + stime ticks) of every process of the machine."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[(int(entry.name), int(fields[19]))] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return out


def _tree(root: int) -> dict:
    """(pid, start tick) -> cpu ticks of root and every descendant living now."""
    procs = _processes()
    children = {}
    for key, (parent, _) in procs.items():
        children.setdefault(parent, []).append(key)
    out, todo = {}, [key for key in procs if key[0] == root]
    while todo:
        key = todo.pop()
        out[key] = procs[key][1]
        todo.extend(children.get(key[0], ()))
    return out


def _pss(pids) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def measure(argv, log: Path) -> dict:
    started = time.time()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    ticks, peak, stop = {}, [0], threading.Event()

    def sample():
        n = 0
        while not stop.is_set():
            seen = _tree(proc.pid)
            ticks.update(seen)  # the last reading of each process (a pid reused later is another key)
            if n % 4 == 0:
                peak[0] = max(peak[0], _pss(pid for pid, _ in seen))
            n += 1
            stop.wait(0.5)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    code = proc.wait()
    stop.set()
    thread.join()
    # Only the samples count: the rehearse process is in its own tree. getrusage(RUSAGE_CHILDREN) was added here
    # until 2026-12-05; it holds every process this one ever reaped, so it counted each reaped process twice, and
    # in the second rehearsal of a run the first one's processes too.
    return {"exit": code, "wall_s": time.time() - started, "cpu_s": sum(ticks.values()) / TICK,
            "peak_pss_gib": peak[0] / 2**30}


def steps(out: Path) -> dict:
    """step -> metrics of both console logs, read by verl-ascend's own step-line parser (`logs`)."""
    from verl_ascend.logs.parse import parse_files

    logs = [out / name for name in ("console.log", "console_resume.log") if (out / name).is_file()]
    return parse_files([str(p) for p in logs]).steps if logs else {}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh"))
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--out", default=None, help="folder for both rehearsals (default: a temporary one)")
    parser.add_argument("--smoke", action="store_true",
                        help="measure `verl-ascend check` of both recipes instead of rehearsing them: that it runs (CI)")
    args = parser.parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="va-bench-rh-"))
    work.mkdir(parents=True, exist_ok=True)
    recipe = Path(args.recipe).resolve()
    fsdp_recipe = recipe.parent / f".bench_fsdp_{recipe.name}"  # beside it: the recipe sources its neighbours
    text = recipe.read_text()
    if "ppo_megatron_trainer" not in text:
        print(f"{recipe} does not name ppo_megatron_trainer: nothing to compare", file=sys.stderr)
        return 2
    # verl's ppo_trainer config has no megatron section: main_ppo (and so the rehearsal) refuses the Megatron keys
    # there, so the FSDP copy leaves out the lines that set them and the bridge's arguments
    fsdp_lines = [line for line in text.replace("ppo_megatron_trainer", "ppo_trainer").splitlines()
                  if ".megatron." not in line and "BRIDGE_ARGS[@]" not in line]
    fsdp_recipe.write_text("\n".join(fsdp_lines) + "\n")
    rows = {}
    try:
        for engine, path in (("megatron", recipe), ("fsdp", fsdp_recipe)):
            out = work / engine
            cmd = [sys.executable, "-m", "verl_ascend", "rehearse", str(path), "--steps", "1", "--nproc",
                   str(args.nproc), "--out", str(out)]
            if args.smoke:
                cmd = [sys.executable, "-m", "verl_ascend", "check", str(path)]
            print(f"== {engine}: {' '.join(cmd[2:])}", flush=True)
            row = measure(cmd, work / f"{engine}.log")
            row["steps"] = steps(out)
            rows[engine] = row
            print(f"   exit {row['exit']}, {row['wall_s']:.0f} s wall, {row['cpu_s']:.0f} CPU-s, peak PSS "
                  f"{row['peak_pss_gib']:.2f} GiB", flush=True)
    finally:
        fsdp_recipe.unlink(missing_ok=True)
    print(f"\n{'engine':9} {'exit':>4} {'wall s':>7} {'CPU-s':>7} {'PSS GiB':>8}  step s (train/resume)  save s")
    for engine, row in rows.items():
        st = row["steps"]
        step_s = "/".join(f"{st[k].get('timing_s/step', float('nan')):.1f}" for k in sorted(st)) or "-"
        save_s = "/".join(f"{st[k].get('timing_s/save_checkpoint', float('nan')):.2f}" for k in sorted(st)) or "-"
        print(f"{engine:9} {row['exit']:>4} {row['wall_s']:>7.0f} {row['cpu_s']:>7.0f} {row['peak_pss_gib']:>8.2f}  "
              f"{step_s:>21}  {save_s}")
    if len(rows) == 2 and rows["fsdp"]["cpu_s"]:
        m, f = rows["megatron"], rows["fsdp"]
        print(f"\nMegatron / FSDP: CPU-s {m['cpu_s'] / f['cpu_s']:.2f}x, peak PSS "
              f"{m['peak_pss_gib'] / max(f['peak_pss_gib'], 1e-9):.2f}x, wall {m['wall_s'] / f['wall_s']:.2f}x")
    print(f"outputs in {work}")
    if args.smoke:  # check reported on both (exit 0-2: a verdict on the recipe, not a crash): the bench runs
        return 0 if len(rows) == 2 and all(r["exit"] in (0, 1, 2) for r in rows.values()) else 1
    return 0 if all(r["exit"] == 0 for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

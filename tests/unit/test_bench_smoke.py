"""Every bench/ script runs: each has a ``--smoke`` mode (tiny sizes, seconds of work) that CI runs here.

A bench nobody runs breaks silently (bench/diagnose_speed.py crashed on the findings' new JSON shape for a
whole release, #35 item 5). Nothing is timed or compared here: a smoke run must exit 0 and print its report.
A new bench without ``--smoke`` fails this test.
"""

import os
import subprocess
import sys

import pytest
from subproc import ROOT, clean_env

pytestmark = pytest.mark.verl_agnostic
BENCHES = sorted(p.name for p in (ROOT / "bench").glob("*.py"))
# a line each report prints when it ran to its end (the smoke must get that far, not just start)
PRINTS = {
    "ckpt_check_completeness.py": "errors name:", "ckpt_check_speed.py": "findings:",
    "ckpt_validation.py": "targets at", "convert_memory.py": "smoke: the bench ran", "diagnose_speed.py": "findings:",
    "import_overhead.py": "paired runs", "logs_compare.py": "compare over parse:",
    "rehearse_engines.py": "outputs in", "rollout_balance.py": "rho sweep",
}


def test_every_bench_is_listed():
    assert set(BENCHES) == set(PRINTS)


@pytest.mark.parametrize("name", BENCHES)
def test_bench_smoke(name, tmp_path):
    script = ROOT / "bench" / name
    assert "--smoke" in script.read_text(), f"{name} has no --smoke mode"
    env = clean_env(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                    TMPDIR=str(tmp_path))  # verl-ascend on PATH (recipes call it); leftovers land in tmp_path
    proc = subprocess.run([sys.executable, str(script), "--smoke"], capture_output=True, text=True, timeout=600,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert PRINTS[name] in proc.stdout, proc.stdout[-2000:]


# a command whose CPU is known: a child burns 0.6 CPU-s and the parent 0.2, each then lives on for 3 s, so a sample
# (every 0.5 s) reads all of it even when a loaded host delays the sampler
BURN = r'''
import os, sys, time
def burn(s):
    end = time.process_time() + s
    while time.process_time() < end:
        pass
if os.fork() == 0:
    burn(0.6); time.sleep(3); os._exit(0)
burn(0.2); os.wait(); time.sleep(3)
'''


def test_rehearse_engines_counts_each_process_once_and_each_run_alone(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("rehearse_engines", ROOT / "bench" / "rehearse_engines.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # the child is reaped by the command: a count that adds getrusage(RUSAGE_CHILDREN) to the samples has it twice,
    # and in a second run the first run's processes as well
    first = bench.measure([sys.executable, "-c", BURN], tmp_path / "1.log")
    second = bench.measure([sys.executable, "-c", BURN], tmp_path / "2.log")
    for row in (first, second):
        assert row["exit"] == 0 and 0.7 <= row["cpu_s"] <= 1.3, (first, second)

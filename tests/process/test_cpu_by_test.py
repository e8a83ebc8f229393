"""dev/cpu-by-test.py, the tool behind docs/rehearse.md "CI cost": a process is charged to the test named in its
environment even when nobody in the run reaps it (as Ray's daemons are not), and the command's exit code is kept."""

import json
import subprocess
import sys

import pytest
from subproc import ROOT

pytestmark = pytest.mark.verl_agnostic
TOOL = ROOT / "dev" / "cpu-by-test.py"

# the child starts an orphan (double fork: re-parented away from the run, never reaped by it) that burns CPU, waits
# for it through a pipe, and exits 3 without ever calling wait() on it. The orphan lives on for 5 s after its burn,
# so the tool's last sample (taken when the child has exited) reads all of it even when a loaded host delays samples
CHILD = r'''
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        end = time.process_time() + 0.8
        while time.process_time() < end:
            pass
        os.write(w, b"x")
        time.sleep(5)
    os._exit(0)
os.read(r, 1)
sys.exit(3)
'''


def test_an_orphan_is_charged_to_its_test_and_the_exit_code_is_kept(tmp_path):
    out = tmp_path / "cpu.json"
    env = {"PATH": "/usr/bin:/bin", "PYTEST_CURRENT_TEST": "tests/x/test_burn.py::test_orphan (call)"}
    proc = subprocess.run([sys.executable, str(TOOL), "--out", str(out), "--interval", "0.05", "--",
                           sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    report = json.loads(out.read_text())
    charged = sum(r["cpu_s"] for r in report["processes"] if r["test"] == "tests/x/test_burn.py::test_orphan")
    assert charged >= 0.6, report["processes"][:5]
    assert report["machine_busy_cpu_s"] >= charged - 0.1
    summary = subprocess.run([sys.executable, str(TOOL), "--report", str(out), "--by", "file"],
                             capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0 and "tests/x/test_burn.py" in summary.stdout, summary


@pytest.mark.parametrize("argv", [["--out", "x.json"], ["--report", "/nonexistent/cpu.json"],
                                  ["--interval", "0", "--out", "x.json", "--", "true"],
                                  ["--out", "/nonexistent/dir/x.json", "--", "true"]])
def test_bad_arguments_exit_2_naming_them(argv, tmp_path):
    proc = subprocess.run([sys.executable, str(TOOL), *argv], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc
    assert proc.stderr.strip(), proc

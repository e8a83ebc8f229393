"""tests/xdist_lanes.py, the scheduler CI's pytest runs under: a real `pytest -n 3 --dist loadfile` on stand-in files.

Files named like the rehearsal files (each test sleeps, and writes when it ran and on which worker) and plain files:
at no moment do more than two rehearsal files run, they run only on the two rehearsal lanes, one file at a time per
lane, and every test runs once.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["test_rehearse_nodes.py", "test_rehearse_supervised.py", "test_rehearse.py", "test_rehearse_moe.py",
         "test_rehearse_killed.py"]
LIGHT = [f"test_plain_{i}.py" for i in range(8)]

CONFTEST = """
import sys
sys.path.insert(0, {tests!r})
import pytest
from xdist_lanes import make

HEAVY = {heavy!r}

def pytest_configure(config):
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return make(config, log, set(HEAVY))
"""

TEST = """
import json, os, time

def _ran(name, seconds):
    start = time.monotonic()
    time.sleep(seconds)
    with open({log!r}, "a") as fh:
        fh.write(json.dumps([os.environ["PYTEST_XDIST_WORKER"], {file!r}, name, start, time.monotonic()]) + "\\n")

def test_one():
    _ran("one", {seconds})

def test_two():
    _ran("two", {seconds})
"""


@pytest.mark.verl_agnostic
def test_at_most_two_rehearsal_files_run_at_once_and_only_on_the_rehearsal_lanes(tmp_path):
    log = tmp_path / "ran.jsonl"
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST.format(tests=str(ROOT / "tests"), heavy=HEAVY))
    for name in HEAVY + LIGHT:
        (suite / name).write_text(TEST.format(log=str(log), file=name, seconds=1.0 if name in HEAVY else 0.3))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3", "--dist",
                           "loadfile", *HEAVY, *LIGHT], cwd=suite, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((f, n) for _, f, n, _, _ in ran) == sorted((f, n) for f in HEAVY + LIGHT for n in ("one", "two"))
    heavy = [r for r in ran if r[1] in HEAVY]
    assert {worker for worker, *_ in heavy} <= {"gw0", "gw1"}, heavy
    assert {worker for worker, f, *_ in ran if f in LIGHT} & {"gw2"}, ran  # the third worker ran the plain files
    spans = {}
    for _, f, _, start, end in heavy:  # a file runs from its first test's start to its last test's end
        s, e = spans.get(f, (start, end))
        spans[f] = (min(s, start), max(e, end))
    for f, (start, _) in spans.items():
        at_once = [g for g, (s, e) in spans.items() if s <= start < e]
        assert len(at_once) <= 2, (f, at_once, spans)

"""A recipe that calls its interpreter by absolute path (`env ... /opt/venv/bin/python -m verl.trainer.main_ppo`,
as `rehearse --plan`'s commands do) is read like one that says `python3`: the recorder is bound over that file in
the sandbox, with bubblewrap and without it. Before, the real interpreter ran the trainer inside the sandbox until
the 60 s timeout, and `supervise` then knew none of the run's settings."""

import os
import shutil
import sys

import pytest
from subproc import path_without

from verl_ascend.recipe import extract

pytestmark = pytest.mark.verl_agnostic

SCRIPT = """set -e
PY={py}
"$PY" -c 'import sys; sys.exit(3)'
env SEEN_BY_TRAINER=1 {py} -m verl.trainer.main_ppo trainer.nnodes=2 trainer.save_freq=5
"""


@pytest.mark.parametrize("backend", ["bwrap", "kernel_jail"])
def test_an_interpreter_named_by_absolute_path_is_recorded_not_run(tmp_path, monkeypatch, backend):
    if backend == "kernel_jail":
        monkeypatch.setenv("PATH", path_without("bwrap"))
    else:
        assert shutil.which("bwrap"), "bubblewrap is a test dependency (dev/requirements)"
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.format(py=sys.executable))
    got = extract.extract(str(script), timeout=60, cwd=str(tmp_path))
    assert got.launch is not None, (got.findings, got.stderr)
    assert got.launch.module == "verl.trainer.main_ppo"
    assert "trainer.nnodes=2" in got.launch.overrides and got.launch.env.get("SEEN_BY_TRAINER") == "1"
    assert not [f for f in got.findings if f.severity == "error"], got.findings


def test_the_masks_are_the_interpreters_the_text_names_by_path(tmp_path):
    bins = tmp_path / "bin"
    text = (f"PY={sys.executable}\n$PY -m x\n/nonexistent/bin/python3 -m y\npython3 -m z\n"
            f"echo {sys.executable}.txt\nexec {shutil.which('bash')} -c true\n")
    masks = extract.interpreter_masks(text, bins)
    assert [recorder.name for recorder, _ in masks] == ["python"]
    assert masks[0][1] == os.path.realpath(sys.executable)

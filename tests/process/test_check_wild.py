"""`verl-ascend check` on a hostile recipe changes nothing on the host (a canary process, files inside and
outside /tmp, a listening socket), and refuses without a sandbox (the CLI's exit code and message, in a
subprocess). The rest of the wild recipes, in-process: tests/unit/test_check_wild_recipes.py."""

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from subproc import FAKE_BIN, ROOT, clean_env, path_without, run_cli

WILD = ROOT / "tests" / "fixtures" / "wild_recipes"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path


def check(script, cwd):
    from verl_ascend.check import run_check

    here = os.getcwd()
    os.chdir(cwd)
    try:
        return run_check(str(script))
    finally:
        os.chdir(here)


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


@pytest.fixture(params=["bwrap", "kernel"])
def sandbox_tool(request, monkeypatch):
    """The two ways check makes its sandbox: bubblewrap found on PATH, and, with no bwrap on PATH (a fresh
    machine after a pip install alone), the namespaces made by verl_ascend/recipe/kernel_jail.py."""
    from verl_ascend.recipe import sandbox

    if request.param == "kernel":
        monkeypatch.setenv("PATH", path_without("bwrap"))
        assert shutil.which("bwrap") is None
    else:
        assert shutil.which("bwrap"), "this test host needs bubblewrap on PATH for the bwrap half"
    argv = sandbox.command(Path("/x.sh"), Path("/"), [], Path("/c"), [], Path("/s"))
    assert any(a.endswith("kernel_jail.py") for a in argv) == (request.param == "kernel"), argv
    return request.param


def test_hostile_launcher_changes_nothing_on_the_host(home, tmp_path, monkeypatch, sandbox_tool):
    tag = f"va-canary-{uuid.uuid4().hex}"
    canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", tag])
    # one canary folder under /tmp (the test's), one in the checkout (outside /tmp and $HOME)
    dirs = [tmp_path / "canary", ROOT / f".{tag}"]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    try:
        for d in dirs:
            d.mkdir()
            (d / "keep.txt").write_text("keep\n")
            (d / "truncate.txt").write_text("truncate me not\n")
        work = tmp_path / "work"
        work.mkdir()
        (work / "cwd.txt").write_text("cwd\n")
        before = {d: _snapshot(d) for d in dirs + [work]}
        reports = []
        for d in dirs:
            monkeypatch.setenv("CANARY_TAG", tag)
            monkeypatch.setenv("CANARY_PID", str(canary.pid))
            monkeypatch.setenv("CANARY_DIR", str(d))
            monkeypatch.setenv("CANARY_PORT", str(server.getsockname()[1]))
            reports.append(check(WILD / "hostile_launcher.sh", cwd=work))
        time.sleep(0.5)
        assert canary.poll() is None, "the canary process was killed"
        for d in dirs + [work]:
            assert _snapshot(d) == before[d], f"{d} changed"
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
        for report in reports:
            assert report["entry"] == "verl.trainer.main_ppo"
            assert "data.train_batch_size=16" in report["overrides"]
            skipped = report["skipped"]
            for expected in (f"pkill -9 -f {tag}", f"kill -9 {canary.pid}", "ray stop --force", "rm -rf /tmp/ray",
                             "pip install --user some-package-that-is-not-here", "sleep 600", "ulimit -n 1048576"):
                assert expected in skipped, (expected, skipped)
            assert any(s.startswith("curl ") for s in skipped)
    finally:
        canary.kill()
        server.close()
        shutil.rmtree(dirs[1], ignore_errors=True)


def test_no_usable_sandbox_refuses_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "touches.sh"
    script.write_text(f"touch {marker}\npython3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    # bubblewrap's own refusal on a host without user namespaces (bubblewrap.c: "setting up uid map")
    assert (FAKE_BIN / "bwrap").exists()  # the refusing double, never this host's real bwrap
    env = clean_env(bins=("bwrap",), HOME=str(tmp_path))
    proc = run_cli("check", str(script), env=env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "never runs a recipe unprotected" in proc.stderr and "bubblewrap" in proc.stderr
    assert "Traceback" not in proc.stderr and not marker.exists()

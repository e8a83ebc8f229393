"""Run Python in a fresh interpreter, the way users' processes start (activation bugs hide in-process).

Every call has a timeout: the failures seen in this project's environment were hangs.
"""

import atexit
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"
FAKE_SITE = FAKES / "site"
FAKE_BIN = FAKES / "bin"
FAKE_DIST_INFO = FAKES / "torch_npu.dist-info"
FAKE_TORCH_NPU_VERSION = "2.13.0"  # the release the double models (tests/real_torch_npu.py CURRENT)
SUBPROC_SITE = ROOT / "tests" / "subproc_site"  # helpers for the fresh interpreters' scripts (not doubles)
_SCRUB_PREFIXES = ("VERL_ASCEND", "VERL_PLATFORM", "FAKE_")
# The doubles' record folders and bin links, made once per test process and removed when it exits
# (made per call, every fake-NPU test left two folders in /tmp for good).
_SCRATCH = Path(tempfile.mkdtemp(prefix="va-subproc-"))
atexit.register(shutil.rmtree, _SCRATCH, True)


def clean_env(fake_npu=False, bins=(), **extra) -> dict:
    """The test process's environment without our switches, plus the requested doubles."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB_PREFIXES)}
    env.pop("PYTHONPATH", None)
    env["PYTHONWARNINGS"] = "ignore"
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)  # torch's default (on), as on a real host
    if fake_npu:
        version = extra.get("FAKE_TORCH_NPU_VERSION", FAKE_TORCH_NPU_VERSION)
        env["PYTHONPATH"] = os.pathsep.join([str(FAKE_SITE), _dist_info(version)])
    if bins:  # only the named doubles, through a directory of links to them
        env["PATH"] = os.pathsep.join([_bin_dir(tuple(sorted(bins))), os.environ.get("PATH", "")])
    env.update({k: str(v) for k, v in extra.items()})
    return env


@functools.lru_cache(maxsize=None)
def _dist_info(version: str) -> str:
    """A folder holding the double's installed-package record: its version and, as every real wheel
    from 2.5.1 on, the ``torch.backends`` entry point through which ``import torch`` imports it."""
    folder = Path(tempfile.mkdtemp(prefix="dist-", dir=_SCRATCH))
    info = folder / f"torch_npu-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch_npu\nVersion: {version}\n")
    (info / "entry_points.txt").write_text((FAKE_DIST_INFO / "entry_points.txt").read_text())
    return str(folder)


@functools.lru_cache(maxsize=None)
def _bin_dir(names: tuple) -> str:
    folder = Path(tempfile.mkdtemp(prefix="bin-", dir=_SCRATCH))
    for name in names:
        (folder / name).symlink_to(FAKE_BIN / name)
    return str(folder)


def path_without(*names, path=None) -> str:
    """A PATH with every command of ``path`` (default: this process's PATH) but ``names``: one directory of
    links, the first of each name winning as it does on PATH. How a test runs on a host without a tool
    (``bwrap``) that this machine has; the links live until the test process exits."""
    folder = Path(tempfile.mkdtemp(prefix="path-", dir=_SCRATCH))
    for d in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        try:
            entries = sorted(os.scandir(d or "."), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            link = folder / entry.name
            if entry.name in names or link.is_symlink() or not os.access(entry.path, os.X_OK) or entry.is_dir():
                continue
            link.symlink_to(os.path.abspath(entry.path))
    return str(folder)


def run_python(code: str, env=None, timeout=300, check=True, args=()) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="va-cwd-") as cwd:  # keep the source tree off sys.path
        proc = subprocess.run(
            [sys.executable, "-c", code, *args],
            env=env if env is not None else clean_env(),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


def last_json(proc: subprocess.CompletedProcess):
    """The last stdout line that parses as JSON (libraries may print before it)."""
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    raise AssertionError(f"no JSON line in output:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def run_cli(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="va-cwd-") as cwd:
        return subprocess.run(
            [sys.executable, "-m", "verl_ascend", *args],
            env=env if env is not None else clean_env(),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def processes_naming(*markers) -> list:
    """(pid, command line) of every other process whose command line or working directory names one of
    the markers: what a test left running (Ray daemons name their cluster's temp dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if any(m in cmdline or cwd.startswith(m) for m in markers):
            found.append((entry.name, cmdline[:200]))
    return found


def processes_with_env(name: str, value: str) -> list:
    """Pids of every process on the host (any namespace) whose environment holds ``name=value``: what a run
    left behind, however it renamed itself or whichever session it moved to."""
    wanted = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_cluster(head: subprocess.Popen, temp_dir: str) -> None:
    """End a throw-away Ray cluster a test started in its own session: no graceful stop (Ray's waits on its
    daemons, half a minute under load). Its daemons name the cluster's temp dir on their command lines;
    whichever left the session goes too."""
    os.killpg(head.pid, signal.SIGKILL)
    head.wait(timeout=60)
    for pid, _ in processes_naming(temp_dir):
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass  # gone meanwhile


def wait_for(predicate, seconds: float, step: float = 0.2) -> bool:
    """``predicate()`` polled until it holds or ``seconds`` pass; its last value. A bound on what the system under
    test must do by itself (the kernel ending a namespace, a daemon starting), never a wait that helps it along."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# Ports for a test's own listeners (a TCPStore, sshd, a Ray head): the rehearsal's own choice (rehearse/run/cluster.py),
# below the kernel's ephemeral range and above Ray's worker ports. A port the kernel hands out for bind(0) comes from
# the ephemeral range, the one it also gives every outgoing connection of every process: closed again to be passed
# on, it went to a Ray connection of the rehearsals running beside the test (CI: a 2-rank TCPStore's listen failed
# with EADDRINUSE), which a port below that range cannot.
def free_ports(n: int = 1, addr: str = "127.0.0.1") -> list:
    """``n`` distinct ports free on ``addr`` now."""
    from verl_ascend.rehearse.run.cluster import free_ports as pick

    return pick(addr, n)


def free_port(addr: str = "127.0.0.1") -> int:
    return free_ports(1, addr)[0]

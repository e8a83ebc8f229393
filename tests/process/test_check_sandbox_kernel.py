"""`check` sandboxes with no bwrap on PATH (#36 item 5): verl_ascend/recipe/kernel_jail.py gives the guarantees
bubblewrap gave, measured from inside and outside a real sandboxed process: new user, PID, network, IPC,
UTS and mount namespaces; no capability; a read-only host with throw-away views; only a loopback network;
and the kernel ends every process when the sandbox ends. The hostile-launcher canary and the timeout test
run through this path too (tests/process/test_check_wild.py, tests/unit/test_check_wild_recipes.py)."""

import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from subproc import ROOT, clean_env, last_json, path_without, processes_naming, run_cli

NAMESPACES = ("user", "pid", "net", "ipc", "uts", "mnt")

# Run inside the sandbox by the real interpreter (no recorders here: this is the sandbox alone).
PROBE = r"""
import ctypes, json, os, socket, sys
facts = {"pid": os.getpid(), "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in NAMESPACES}}
facts["caps"] = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status")) if k.startswith("Cap")}
facts["no_new_privs"] = [l.split(":")[1].strip() for l in open("/proc/self/status") if l.startswith("NoNewPrivs")]
facts["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
facts["interfaces"] = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as exc:
        return exc.strerror
facts["write_checkout"] = attempt(lambda: open(os.path.join(ROOT, ".va-sandbox-probe"), "w"))
facts["write_usr"] = attempt(lambda: open("/usr/.va-sandbox-probe", "w"))
facts["write_tmp"] = attempt(lambda: open(os.path.join(TMPFILE), "w").write("x"))
facts["sethostname"] = attempt(lambda: socket.sethostname("va-sandbox")) if hasattr(socket, "sethostname") else "n/a"
libc = ctypes.CDLL(None, use_errno=True)
facts["mount_tmpfs"] = "ok" if libc.mount(b"none", b"/mnt", b"tmpfs", 0, None) == 0 else os.strerror(ctypes.get_errno())
s = socket.socket()
s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), timeout=5)
facts["loopback"] = "ok"
facts["host_port"] = attempt(lambda: socket.create_connection(("127.0.0.1", HOST_PORT), timeout=2))
os.makedirs(CAPTURE, exist_ok=True)
json.dump(facts, open(os.path.join(CAPTURE, "facts.json"), "w"))
"""


@pytest.fixture
def no_bwrap(monkeypatch):
    monkeypatch.setenv("PATH", path_without("bwrap"))
    assert shutil.which("bwrap") is None
    assert shutil.which("unshare"), "the sandbox's first step needs util-linux's unshare"


def _sandboxed(tmp_path, script_text, timeout=60):
    """Run ``bash script`` in check's sandbox (as extract runs it, the recipe's folder a view), in a process."""
    from verl_ascend.recipe import sandbox

    bins, capture, scratch = tmp_path / "bin", tmp_path / "capture", tmp_path / "scratch"
    for d in (bins, capture, scratch):
        d.mkdir()
    script = tmp_path / "probe.sh"
    script.write_text(script_text)
    argv = sandbox.command(script, tmp_path, [tmp_path], capture, [bins], scratch)
    assert any(a.endswith("kernel_jail.py") for a in argv), argv  # the path without bwrap, not bubblewrap
    env = dict(os.environ, VA_CHECK_CAPTURE=str(capture))
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        sandbox.kill_tree(proc)
        out, err = proc.communicate()
    assert (capture / sandbox.STARTED).exists(), err
    return proc, out, err, capture


def test_the_guarantees_hold_without_bwrap(tmp_path, no_bwrap):
    host_ns = {n: os.readlink(f"/proc/self/ns/{n}") for n in NAMESPACES}
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    tmpfile = f"/tmp/va-sandbox-{uuid.uuid4().hex}"
    code = (f"NAMESPACES = {NAMESPACES!r}\nROOT = {str(ROOT)!r}\nTMPFILE = {tmpfile!r}\n"
            f"HOST_PORT = {server.getsockname()[1]}\nCAPTURE = {str(tmp_path / 'capture')!r}\n" + PROBE)
    try:
        proc, out, err, capture = _sandboxed(tmp_path, f"exec {sys.executable} -c {_quote(code)}\n")
        assert proc.returncode == 0, err
        facts = __import__("json").loads((capture / "facts.json").read_text())
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody reached the host's socket
    finally:
        server.close()
    for name in NAMESPACES:
        assert facts["ns"][name] != host_ns[name], name
    assert facts["pid"] == 1 and len(facts["pids"]) <= 3, facts["pids"]  # the probe (and its bash) alone
    assert {k: int(v, 16) for k, v in facts["caps"].items()} == {k: 0 for k in facts["caps"]}, facts["caps"]
    assert set(facts["caps"]) >= {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}
    assert facts["no_new_privs"] == ["1"]
    assert facts["interfaces"] == ["lo"] and facts["loopback"] == "ok"
    assert facts["host_port"] != "ok"
    assert facts["write_usr"] == "Read-only file system"
    # the checkout is read-only, unless it lies under one of the throw-away views (/tmp, /var/tmp, $HOME: a fresh
    # clone in /tmp): then the write lands in that view, and `leaked` below shows the host's checkout kept nothing
    views = [Path(d).resolve() for d in ("/tmp", "/var/tmp", os.environ.get("HOME", "")) if d and os.path.isdir(d)]
    in_view = any(ROOT.resolve().is_relative_to(v) for v in views)
    assert facts["write_checkout"] == ("ok" if in_view else "Read-only file system"), (facts["write_checkout"], ROOT)
    assert facts["write_tmp"] == "ok" and not os.path.exists(tmpfile)  # written in the throw-away view only
    leaked = (ROOT / ".va-sandbox-probe").exists()
    (ROOT / ".va-sandbox-probe").unlink(missing_ok=True)
    assert not leaked
    assert facts["sethostname"] in ("Operation not permitted", "n/a")
    assert facts["mount_tmpfs"] == "Operation not permitted"


def test_the_kernel_ends_what_the_script_left_running(tmp_path, no_bwrap):
    tag = f"{5000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    proc, _, err, _ = _sandboxed(tmp_path, f"/bin/sleep {tag} &\nsetsid /bin/sleep {tag} &\n"
                                 f"nohup bash -c '/bin/sleep {tag}' >/dev/null 2>&1 &\nexit 0\n")
    assert proc.returncode == 0, err
    time.sleep(0.5)
    assert processes_naming(tag) == []


def test_killing_the_sandbox_from_outside_ends_everything_inside(tmp_path, no_bwrap):
    tag = f"{6000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    proc, _, _, _ = _sandboxed(tmp_path, f"/bin/sleep {tag} &\nsetsid /bin/sleep {tag} &\nwait\n", timeout=3)
    assert proc.returncode != 0  # killed by the timeout (sandbox.kill_tree), not finished
    time.sleep(0.5)
    assert processes_naming(tag) == []


def test_check_cli_with_no_bwrap_on_path_reads_a_shipped_recipe(tmp_path):
    env = clean_env(HOME=str(tmp_path), PATH=path_without("bwrap"))
    proc = run_cli("check", str(ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh"), "--json", env=env)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    report = last_json(proc)
    assert report["entry"] == "verl.trainer.main_ppo" and "cannot sandbox" not in proc.stderr


def _quote(text):
    return shlex.quote(text)


def test_where_the_kernel_refuses_user_namespaces_check_refuses_and_runs_nothing(tmp_path):
    """A user namespace whose own limit allows no nested one: the jail's unshare fails, check exits 2 naming
    that step, and nothing of the recipe ran (a host with user namespaces off looks the same to the jail)."""
    marker = tmp_path / "ran"
    script = tmp_path / "touches.sh"
    script.write_text(f"touch {marker}\npython3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    env = clean_env(HOME=str(tmp_path), PATH=path_without("bwrap"))
    inner = (f"echo 0 > /proc/sys/user/max_user_namespaces && exec {shlex.quote(sys.executable)} -m verl_ascend "
             f"check {shlex.quote(str(script))}")
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", inner], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "va-check sandbox: unshare(user, mount, pid, net, ipc, uts)" in proc.stderr, proc.stderr
    assert "never runs a recipe unprotected" in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists()

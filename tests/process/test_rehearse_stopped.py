"""A rehearsal whose own process is stopped or killed mid-step takes its run with it, namespace or not.

A driver process runs the rehearsal's runner the way ``rehearsal.run`` does (stop signals raise, the runner
starts the run) on a stand-in main_ppo that behaves like Ray's: it starts a detached daemon in a session of its
own under the name ``ray::WorkerDict`` (no command line to find it by), prints a step line and keeps running.
Once the step line is in the log the driver gets SIGTERM or SIGKILL. Then no process that inherited the
test's own token may be alive: the driver is gone, so nothing of ours is left to clean up after it but the
kernel (parent-death signal, PID namespace) or the run's guard process (no namespace). All under CPU load.
"""

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from rehearsal_helpers import cpu_load
from subproc import processes_with_env, wait_for

from verl_ascend.proc import namespace as pidns
from verl_ascend.rehearse.run import trainer as runner

pytestmark = pytest.mark.verl_agnostic  # the runner never imports verl

STAND_IN = """
import subprocess, sys, time
# it keeps main_ppo's stdout open, as Ray's daemons may: the runner's read ends only when it is gone too
subprocess.Popen(['bash', '-c', 'exec -a ray::WorkerDict sleep 300'], start_new_session=True, stdin=subprocess.DEVNULL)
time.sleep(0.5)
print('step:1 - actor/grad_norm:0.5 - critic/score/mean:0.1', flush=True)
time.sleep(300)
"""

DRIVER = """
import os, sys
from pathlib import Path
from verl_ascend.proc import guard as reaper
from verl_ascend.proc import namespace
from verl_ascend.rehearse.run import trainer as runner
if sys.argv[2] == 'no-namespace':
    namespace.set_available(False)  # as on a host that refuses the namespace
tmp = Path(sys.argv[1])
try:
    with reaper.stop_signals_raise():
        code, seen, error = runner.run([sys.executable, '-c', open(tmp / 'stand_in.py').read()], dict(os.environ),
                                       str(tmp), tmp / 'log', 600, 'stand-in', namespace=[])
except reaper.Stopped as stop:
    print('stopped', stop.signum, flush=True)
    sys.exit(128 + stop.signum)
print('returned', code, error, flush=True)
"""


def with_token(token: str) -> list:
    return processes_with_env("TEST_RUN_TOKEN", token)


def names(pids) -> list:
    out = []
    for pid in pids:
        try:
            out.append((pid, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]))
        except OSError:
            pass
    return out


@pytest.mark.parametrize("namespace", ["namespace", "no-namespace"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_stopping_or_killing_rehearse_mid_step_leaves_nothing_of_the_run(tmp_path, sig, namespace):
    if namespace == "namespace" and not runner.namespace_prefix():
        pytest.fail("unshare refused a PID namespace here; CI hosts give one (root, or user namespaces)")
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    token = uuid.uuid4().hex
    env = {**os.environ, "TEST_RUN_TOKEN": token}
    with cpu_load():
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path), namespace], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            log = tmp_path / "log"
            assert wait_for(lambda: log.is_file() and "step:1" in log.read_text(), 180), \
                (driver.poll(), log.read_text() if log.is_file() else "no log")
            # the daemon started before the step line: it is alive now, under its Ray-style name
            assert any("WorkerDict" in cmd or "sleep" in cmd for _, cmd in names(with_token(token))), \
                names(with_token(token))
            driver.send_signal(sig)
            out, _ = driver.communicate(timeout=120)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
        if sig == signal.SIGTERM:  # it ended the run itself, and said so
            assert driver.returncode == 128 + signal.SIGTERM and "stopped 15" in out, out
        else:
            assert driver.returncode == -signal.SIGKILL, out
        # by construction nothing should be left at once; 30 s is the bound the issue sets, not a wait for cleanup
        # that a test helps along: nothing here kills anything
        gone = wait_for(lambda: not with_token(token), 30)
        assert gone, f"alive 30 s after {sig.name} of the rehearsal: {names(with_token(token))}"


def test_the_watchdog_without_a_namespace_ends_a_detached_daemon_and_says_so_only_then(tmp_path):
    token = uuid.uuid4().hex
    import io

    saved = pidns.prefix()
    pidns.set_available(False)
    out = io.StringIO()
    try:
        code, seen, error = runner.run([sys.executable, "-c", STAND_IN], {**os.environ, "TEST_RUN_TOKEN": token},
                                       str(tmp_path), tmp_path / "log", 20, "stand-in", out=out)
    finally:
        pidns.set_available(bool(saved))
    assert code == 124 and seen == [1], (code, seen, error)
    assert "every process of the run was ended" in error, error
    assert with_token(token) == [], names(with_token(token))
    assert "no PID namespace here" in out.getvalue()

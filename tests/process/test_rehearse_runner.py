"""The rehearsal's process runner on its own (no verl): what main_ppo leaves behind is ended by construction.

A stand-in for main_ppo starts a detached grandchild (its own session, as Ray's daemons do) and exits, or
hangs past the watchdog. The PID namespace ends the grandchild with it; the run's mark in the environment
tells its processes apart from those of a later namespace given the same number.
"""

import io
import os
import subprocess
import sys
import threading
import time

import pytest
from subproc import processes_with_env

from verl_ascend.proc import namespace as pidns
from verl_ascend.rehearse.run import trainer as runner

pytestmark = pytest.mark.verl_agnostic  # the runner never imports verl

DETACH = ("import subprocess, sys, time\n"
          "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
          "print('grandchild started', flush=True)\n")


def marked_anywhere(mark: str) -> list:
    """Every process on the host (any namespace) whose environment carries the run's mark."""
    return processes_with_env(runner.MARK, mark)


def _run(tmp_path, code: str, timeout: float):
    if not runner.namespace_prefix():
        pytest.fail("unshare refused a PID namespace here; CI hosts give one (root, or user namespaces)")
    spaces, out = [], io.StringIO()
    result = runner.run([sys.executable, "-c", code], dict(os.environ), str(tmp_path), tmp_path / "log",
                        timeout, "stand-in", out=out, namespace=spaces)
    return result, spaces, (tmp_path / "log").read_text()


def test_a_detached_grandchild_ends_with_the_run(tmp_path):
    (code, seen, error), (space, mark), log = _run(tmp_path, DETACH + "sys.exit(3)\n", timeout=120)
    assert "grandchild started" in log
    assert code == 3 and seen == []
    assert "did not end" not in error
    # an exit without an error line still says what the run printed last (CI's temporary folder is gone)
    assert error.startswith("its output names no error") and "grandchild started" in error, error
    assert space.startswith("pid:[") and space != runner.pid_namespace(os.getpid())
    assert marked_anywhere(mark) == []
    assert runner.processes_in(space, mark) == []


def test_a_run_past_its_watchdog_is_ended_with_everything_it_started(tmp_path):
    # the watchdog must fire after the stand-in started its grandchild: 20 s leaves a loaded host room for that
    (code, _, error), (space, mark), log = _run(tmp_path, DETACH + "time.sleep(300)\n", timeout=20)
    assert "grandchild started" in log
    assert code == 124 and "did not finish within 20 s" in error
    assert marked_anywhere(mark) == []


# an unshare that is slow between unshare(CLONE_NEWPID) and the fork of the namespace's first process, as a
# loaded host makes the real one: until that fork the kernel cannot name the new namespace (the link reads
# ENOENT), which the runner once took for "unshare has ended" -- and the run then had no namespace to check
SLOW_UNSHARE = ("import ctypes, os, sys, time\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "flags = 0x20000000 | (0 if os.geteuid() == 0 else 0x10000000)  # CLONE_NEWPID (+ CLONE_NEWUSER)\n"
                "if libc.unshare(flags) != 0:\n"
                "    sys.exit('unshare: ' + os.strerror(ctypes.get_errno()))\n"
                "time.sleep(1.0)\n"
                "child = os.fork()\n"
                "if child == 0:\n"
                "    print(os.readlink('/proc/self/ns/pid'), flush=True)\n"
                "    time.sleep(1.0)\n"
                "    os._exit(0)\n"
                "os.waitpid(child, 0)\n")


def test_the_namespace_is_found_when_unshare_is_slow_to_fork_its_first_process():
    proc = subprocess.Popen([sys.executable, "-c", SLOW_UNSHARE], stdout=subprocess.PIPE, text=True)
    try:
        found = pidns.child_namespace(proc, threading.Event())
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, out
    assert found == out.strip() and found != runner.pid_namespace(os.getpid()), (found, out)


def test_waiting_for_the_namespace_ends_when_unshare_ends_without_one():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
    assert pidns.child_namespace(proc, threading.Event()) == ""
    assert proc.returncode == 7


def test_a_process_under_the_namespace_number_without_the_mark_is_not_the_runs():
    here = runner.pid_namespace(os.getpid())
    sleeper = subprocess.Popen(["sleep", "60"], env={**os.environ, runner.MARK: "theirs"}, start_new_session=True)
    try:
        assert runner.processes_in(here, "theirs") == [sleeper.pid]
        assert runner.processes_in(here, "ours") == []
    finally:
        sleeper.kill()
        sleeper.wait()


def test_an_error_printed_long_before_the_end_is_still_named(tmp_path):
    # a worker's traceback, then far more than the 400 lines the runner keeps of the end (Ray's shutdown chatter)
    noisy = ("import sys\n"
             "print('Traceback (most recent call last):')\n"
             "print('ValueError: planted early fault')\n"
             "for i in range(1000):\n"
             "    print(f'(raylet) worker {i} exited', flush=True)\n"
             "sys.exit(1)\n")
    (code, _, error), _, _ = _run(tmp_path, noisy, timeout=120)
    assert code == 1 and error == "ValueError: planted early fault", error


def test_the_error_at_the_end_wins_and_a_wrapper_names_the_error_inside():
    early = ["ValueError: an early line"]
    assert runner.first_error(["noise", "KeyError: 'prompt'"], early) == "KeyError: 'prompt'"
    wrapped = ["torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([0])",
               "KeyError: 'decoder.layers.0.weight'"]
    assert runner.first_error(wrapped) == "KeyError: 'decoder.layers.0.weight' (inside " \
                                          "torch.distributed.checkpoint.api.CheckpointException)"
    # Ray's wrapper gives way to the error it carries, and is named only when nothing else is
    assert runner.first_error(["ray.exceptions.RayTaskError(KeyError): boom", "KeyError: 'boom'"]) == "KeyError: 'boom'"
    # Hydra's instantiate error: the target's exception as its repr, under "Error in call to target" (main_ppo
    # on verl 0.9.1 with a hub id as critic.model.path, the line as it printed it)
    hydra = ["Error executing job with overrides: ['algorithm.adv_estimator=gae']",
             "Error in call to target 'verl.workers.config.model.HFModelConfig':",
             "OSError(\"Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
             "'~/models/deepseek-llm-7b-chat'. Use `repo_type` argument if needed.\")", "full_key: critic.model"]
    assert runner.first_error(hydra) == ("OSError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
                                         "'~/models/deepseek-llm-7b-chat'. Use `repo_type` argument if needed.")
    died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    assert runner.first_error(["noise", died]) == died


def test_a_ray_that_did_not_start_in_its_fixed_wait_is_started_once_more(tmp_path):
    # Ray's own words when its node misses the fixed 30 s start-up wait (ray/_private/node.py), then, the next
    # time, a step: the runner starts main_ppo a second time, says so and keeps the first attempt's log
    # the second attempt waits until the runner has read its namespace (a run that ended before that look has only
    # '', gone: on a loaded host a stand-in that exits at once can), so the test holds under any load
    flaky = ("import os, sys, time\n"
             "first = not os.path.exists('attempted')\n"
             "open('attempted', 'a').close()\n"
             "if first:\n"
             "    print('Exception: The current node timed out during startup. This could happen because some of '\n"
             "          'the raylet failed to startup or the GCS has become overloaded.')\n"
             "    sys.exit(1)\n"
             "open('second', 'a').close()\n"
             "while not os.path.exists('go'):\n"
             "    time.sleep(0.05)\n"
             "print('step:1 - actor/grad_norm:0.5', flush=True)\n")
    spaces, out = [], io.StringIO()

    def release():  # the runner empties `spaces` before the second attempt starts, and fills it once it has looked
        deadline = time.monotonic() + 120
        while not ((tmp_path / "second").exists() and spaces) and time.monotonic() < deadline:
            time.sleep(0.05)
        (tmp_path / "go").touch()

    threading.Thread(target=release, daemon=True).start()
    code, seen, error = runner.run([sys.executable, "-c", flaky], dict(os.environ), str(tmp_path), tmp_path / "log",
                                   120, "stand-in", out=out, namespace=spaces)
    assert (code, seen, error) == (0, [1], ""), (code, seen, error, out.getvalue())
    assert "did not start within Ray's fixed 30 s" in out.getvalue() and "once more" in out.getvalue()
    assert "timed out during startup" in (tmp_path / "log.ray-start-1").read_text()
    assert "step:1" in (tmp_path / "log").read_text()
    assert len(spaces) == 2 and spaces[0].startswith("pid:[")  # the second attempt's namespace, not both


def test_a_ray_that_never_starts_is_named_after_the_second_attempt(tmp_path):
    never = ("import sys\n"
             "print('Exception: The current node timed out during startup. This could happen because some of '\n"
             "      'the raylet failed to startup or the GCS has become overloaded.')\n"
             "sys.exit(1)\n")
    (code, seen, error), _, _ = _run(tmp_path, never, timeout=120)
    assert code == 1 and seen == [] and error.startswith("Exception: The current node timed out during startup"), error
    assert (tmp_path / "log.ray-start-1").is_file()  # tried twice, not more

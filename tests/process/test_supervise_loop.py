"""`supervise`'s loop on a small stand-in for main_ppo (tests/fixtures/supervise/main_ppo.py): a transient crash
retried and resumed, a stopped rank caught as a hang with its evidence, report.json, and nothing left running; on
two nodes, a hang held back while the rank it waits for still computes on the other node.

The stand-in's processes are real (a driver, a rank, a sleeping grandchild, in a PID namespace where the host
allows one); its steps take 0.3 s. A deadline two minutes out guards each run: a loop that never ends fails
the test (state gave_up) instead of hanging it."""

import json
import sys
import time
from pathlib import Path

import pytest

from verl_ascend.proc import info, marks
from verl_ascend.supervise import decide, detect
from verl_ascend.supervise import run as supervise_run

pytestmark = pytest.mark.verl_agnostic

STANDIN = Path(__file__).resolve().parents[1] / "fixtures" / "supervise" / "main_ppo.py"


def supervise(tmp_path, fault, **options):
    argv = [sys.executable, str(STANDIN), f"trainer.default_local_dir={tmp_path / 'ckpt'}",
            "trainer.total_training_steps=3", f"standin.fault={fault}"]
    opts = supervise_run.Options(run_dir=str(tmp_path / "run"), poll_s=0.3, settings={"total_training_steps": 3},
                                 policy=decide.Policy(backoff_s=0), echo=False, deadline=time.time() + 120, **options)
    return supervise_run.supervise(argv, cwd=str(tmp_path), options=opts)


def assert_nothing_left(rep):
    for a in rep.attempts:
        assert marks.marked(marks.Mark(*a.mark.split("=", 1))) == [], f"attempt {a.number} left processes"


def test_a_transient_crash_is_retried_and_the_relaunch_resumes(tmp_path):
    rep = supervise(tmp_path, "crash")
    assert (rep.state, rep.exit) == ("done", 0)
    first, second = rep.attempts
    assert (first.exit_code, first.family, first.retry_class, first.decision) == (1, "ray_actor_died", "transient",
                                                                                  "retry")
    assert "trainer.resume_mode=auto" in second.argv and "trainer.resume_mode=auto" not in first.argv
    assert (second.resumed_from, second.first_step, second.last_step, second.exit_code) == (1, 2, 3, 0)
    saved = json.loads((tmp_path / "run" / "report.json").read_text())
    assert saved["command"] == "supervise" and saved["supervisor_exit"] == 0
    assert saved["totals"]["restarts"] == 1 and saved["attempts"][0]["detection_latency_s"] is not None
    assert (tmp_path / "run" / "attempt-1" / "timeline.json").is_file()
    assert_nothing_left(rep)


def test_a_stopped_rank_is_a_hang_with_its_stack_saved_and_the_run_completes(tmp_path):
    rep = supervise(tmp_path, "stop", hang_after=3)
    assert (rep.state, rep.exit) == ("done", 0)
    first, second = rep.attempts
    assert (first.detected, first.family, first.decision) == ("hang", "hang", "retry")
    hang = next(f for f in rep.findings if f.code == "hang")
    assert hang.details["budget_s"] == 3 and hang.details["elapsed_s"] >= 3  # over its budget, by construction
    folder = Path(first.evidence)
    summary = (folder / "summary.txt").read_text()
    stopped = [p for p in json.loads((folder / "processes.json").read_text()) if p["state"] == "T"]
    assert len(stopped) == 1 and f"pid {stopped[0]['pid']}" in summary and "STOPPED" in summary
    if info.py_spy():  # the stopped rank's own stack, read without attaching
        assert "main_ppo.py" in (folder / "stacks" / f"{stopped[0]['pid']}.txt").read_text()
    assert second.resumed_from == 1 and second.last_step == 3
    assert_nothing_left(rep)


def test_on_two_nodes_a_rank_still_working_on_the_other_node_holds_the_hang_back_until_it_stops(tmp_path, capfd):
    from verl_ascend.rehearse.run import nodeshell

    # two nodes on this host, reached as `rehearse --nnodes 2` reaches its own (nodeshell: node 1's view carries its
    # NODE_VAR); the stopped rank's peer on node 1 computes for 6 s, then waits too
    hosts = {"127.0.0.1": 0, "127.0.0.2": 1}
    (tmp_path / "nodes").mkdir()
    argv = [sys.executable, str(STANDIN), f"trainer.default_local_dir={tmp_path / 'ckpt'}",
            "trainer.total_training_steps=3", "standin.fault=stop", "standin.busy_elsewhere_s=6"]
    opts = supervise_run.Options(run_dir=str(tmp_path / "run"), poll_s=0.3, settings={"total_training_steps": 3},
                                 policy=decide.Policy(backoff_s=0), echo=False, deadline=time.time() + 120,
                                 hang_after=2, nodes=tuple(hosts), ssh=nodeshell.ssh_command(str(tmp_path / "nodes"),
                                                                                             [], hosts),
                                 budgets=detect.Budgets(cpu_busy=0.05))  # the working rank counts on a loaded host too
    rep = supervise_run.supervise(argv, cwd=str(tmp_path), options=opts)
    said = capfd.readouterr().out
    assert (rep.state, rep.exit) == ("done", 0), said[-3000:]
    first, second = rep.attempts
    assert (first.detected, first.family, first.decision) == ("hang", "hang", "retry")
    assert "but the run works on another node: 127.0.0.2: pid " in said, said[-3000:]  # held back, and why
    hang = next(f for f in rep.findings if f.code == "hang")
    # called only once node 1's rank had stopped computing (6 s), though the head saw nothing move after 2 s
    assert hang.details["budget_s"] == 2 and hang.details["elapsed_s"] >= 6, hang.details
    assert hang.message.endswith("; no process of the run busy on 127.0.0.2 either"), hang.message
    assert second.resumed_from == 1 and second.last_step == 3
    assert_nothing_left(rep)

"""`supervise` around a relaunch, with real processes and no trainer: a supervisor killed and started again picks up
the attempt that still trains (the stand-in of tests/fixtures/supervise/main_ppo.py); and the multi-node steps
(relaunch.py) over two node-local checkpoint folders reached the way `rehearse --nnodes` reaches its nodes
(rehearse/run/nodeshell.py: ssh's arguments, the command run in the node's own view of the folder): the newest step
whole on every node, a fall-back when one node's copy is cut short, a stop naming the file when no step is whole,
the attempt's processes ended on a node by their mark, and a node that does not answer (exit 2 before any start)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from subproc import clean_env

from verl_ascend import cli
from verl_ascend.proc import marks
from verl_ascend.rehearse.run import nodeshell
from verl_ascend.supervise import decide, relaunch
from verl_ascend.supervise import run as supervise_run

STANDIN = Path(__file__).resolve().parents[1] / "fixtures" / "supervise" / "main_ppo.py"


def test_a_supervisor_killed_and_started_again_watches_the_attempt_it_left_running(tmp_path):
    run_dir = tmp_path / "run"
    argv = [sys.executable, str(STANDIN), f"trainer.default_local_dir={tmp_path / 'ckpt'}",
            "trainer.total_training_steps=4", "standin.step_s=2"]
    code = ("import sys; from verl_ascend.supervise import run, decide\n"
            f"run.supervise({argv!r}, options=run.Options(run_dir={str(run_dir)!r}, poll_s=0.3, "
            "settings={'total_training_steps': 4}, echo=False))")
    first = subprocess.Popen([sys.executable, "-c", code], env=clean_env(), cwd=str(tmp_path))
    log = run_dir / "attempt-1" / "console.log"
    deadline = time.monotonic() + 60
    while "step:1 " not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)  # the supervisor dies (OOM killer, a lost session): the run goes on
    first.wait()
    mark = json.loads((run_dir / "report.json").read_text())["attempts"][0]["mark"]
    assert marks.marked(marks.Mark(*mark.split("=", 1))), "the attempt ended with its unbound supervisor"
    opts = supervise_run.Options(run_dir=str(run_dir), poll_s=0.3, settings={"total_training_steps": 4}, echo=False)
    rep = supervise_run.supervise(argv, cwd=str(tmp_path), options=opts)
    assert (rep.state, rep.exit, len(rep.attempts)) == ("done", 0, 1)  # watched, not started a second time
    (only,) = rep.attempts
    assert (only.exit_code, only.last_step) == (0, 4)  # the exit code its wrapper wrote, read by the new supervisor
    assert marks.marked(marks.Mark(*mark.split("=", 1))) == []


def _save(root: Path, step: int) -> None:
    actor = root / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"world_size": 1}))
    for kind in ("model", "optim", "extra_state"):
        torch.save({"w": torch.arange(4096.0)}, actor / f"{kind}_world_size_1_rank_0.pt")
    torch.save({"seen": step}, root / f"global_step_{step}" / "data.pt")
    (root / relaunch.TRACKER).write_text(str(step))


def _cut(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


@pytest.fixture
def two_nodes(tmp_path):
    """A checkpoint folder that each of two 'nodes' sees as its own (its copy under nodes/node<k>), steps 1 and 2."""
    folder = str(tmp_path / "ckpt")
    os.makedirs(folder)
    hosts = {"127.0.0.1": 0, "127.0.0.2": 1}
    for index in hosts.values():
        copy = tmp_path / "nodes" / f"node{index}" / "ckpt"
        copy.mkdir(parents=True)
        _save(copy, 1)
        _save(copy, 2)
    ssh = nodeshell.ssh_command(str(tmp_path / "nodes"), [folder], hosts)
    return supervise_run.Options(run_dir=str(tmp_path / "run"), nodes=tuple(hosts), ssh=ssh), folder, tmp_path


def test_the_relaunch_resumes_from_the_newest_step_whole_on_every_node_or_stops_naming_the_file(two_nodes):
    opts, folder, tmp = two_nodes
    assert relaunch.resume_point(opts, folder) == (["trainer.resume_mode=auto"], "global_step_2 whole on 2 node(s)", "")
    _cut(tmp / "nodes" / "node1" / "ckpt" / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt")
    args, said, damaged = relaunch.resume_point(opts, folder)
    assert args == ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={folder}/global_step_1"], said
    assert damaged.startswith("127.0.0.2: ") and "global_step_2/actor/model_world_size_1_rank_0.pt" in damaged
    _cut(tmp / "nodes" / "node1" / "ckpt" / "global_step_1" / "actor" / "optim_world_size_1_rank_0.pt")
    args, said, damaged = relaunch.resume_point(opts, folder)
    assert args is None and "no checkpoint step is whole on every node" in said and "model_world_size" in damaged


def test_the_attempt_is_ended_on_each_node_by_its_mark_and_a_silent_node_is_named(two_nodes):
    opts, folder, tmp = two_nodes
    mark = marks.Mark("VERL_ASCEND_SUPERVISE_RUN", f"test-{os.getpid()}-{time.time_ns()}")
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env={**clean_env(), **mark.env()},
                            start_new_session=True)
    try:
        ended = relaunch.end_on_nodes(opts, str(mark))
        assert ended == {"127.0.0.1": [], "127.0.0.2": []} and left.wait(timeout=30) is not None
    finally:
        left.kill()
    silent = supervise_run.Options(run_dir=opts.run_dir, nodes=("127.0.0.1", "127.0.0.9"), ssh=opts.ssh)
    assert list(relaunch.unreachable(silent)) == ["127.0.0.9"]
    assert cli.main(["supervise", "--run-dir", opts.run_dir, "--nodes", "127.0.0.1", "127.0.0.9", "--ssh", opts.ssh,
                     "--", "true"]) == decide.EXIT_BAD_INPUT


def test_before_a_hang_is_called_the_other_node_is_asked_for_its_cpu_and_a_working_rank_holds_it_back(two_nodes):
    from verl_ascend.core import runlog
    from verl_ascend.supervise import detect, evidence_nodes, timeline

    opts, _, _ = two_nodes
    mark = marks.Mark("VERL_ASCEND_SUPERVISE_RUN", f"test-{os.getpid()}-{time.time_ns()}")
    env = {**clean_env(), **mark.env()}
    node1 = {**env, runlog.NODE_VAR: "1"}  # what node 1's processes carry in a rehearsal on one host (nodeshell)
    burn = "while True: pass"
    started = [subprocess.Popen([sys.executable, "-c", code], env=e, start_new_session=True)
               for code, e in ((burn, node1), ("import time; time.sleep(120)", node1), (burn, env))]  # the last: head's
    budgets = detect.Budgets(floor=1, quiet=5, cpu_busy=0.1)
    found = detect.hang(timeline.recorded(["Training from scratch"], every=1.0, now=9999.0), budgets)
    try:
        got = evidence_nodes.cpu_elsewhere(opts, str(mark), sample=1.0)
        rates = {p["pid"]: p.get("cpu_rate") for p in got["127.0.0.2"]["processes"]}
        assert set(rates) == {started[0].pid, started[1].pid}, got  # node 1's own, not the head's burner
        assert rates[started[0].pid] >= 0.1 and rates[started[1].pid] < 0.1, rates
        held, said, wait = evidence_nodes.weigh_hang(opts, found, str(mark), budgets, sample=1.0)
        assert held is None and f"127.0.0.2: pid {started[0].pid} (python) uses " in said, said
        assert said.endswith("; looking again in 5 s") and wait == 5, said
        started[0].kill()
        started[0].wait()
        confirmed, said, _ = evidence_nodes.weigh_hang(opts, found, str(mark), budgets, sample=1.0)
        assert said == "" and confirmed.message.endswith("; no process of the run busy on 127.0.0.2 either"), confirmed
    finally:
        for proc in started:
            proc.kill()
            proc.wait()

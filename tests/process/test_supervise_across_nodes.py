"""`supervise`'s wait for Ray's nodes before a relaunch (supervise/ray_nodes.py, relaunch.wait_nodes), against a real
two-node Ray cluster on CPU formed outside the command, as `ray start` per node forms one: the head at this machine's
address, the worker node at 127.A.B.2 (`--node-ip-address`), both with rehearse/run/cluster.py's flags. Each node is
a run of its own (verl_ascend/proc: a PID namespace whose first process dies with this test's process, by the
parent-death signal), so nothing of the cluster outlives the test even when the test itself is killed.

One test, several behaviours: the wait passes once Ray shows trainer.nnodes = 2 nodes alive (while the worker
still registers it keeps looking); with the worker node ended it gives up within its budget naming what Ray shows
and which node is missing; with the whole cluster ended (as a command that forms its own leaves it) it says once that
there is no cluster outside the command and does not wait.

And the evidence of the other nodes, gathered over the ssh command a multi-node rehearsal gives (nodeshell.py: the
gatherer runs in node k's view, carrying node k's NODE_VAR as node k's `ray start` does): a rank stopped on the
worker node is named in the summary beside the head's, each node's processes and stacks saved apart, and a node
that does not answer recorded as such."""

import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from subproc import clean_env

from verl_ascend.core import runlog
from verl_ascend.proc import launch as proc_launch
from verl_ascend.proc import marks
from verl_ascend.rehearse.run import cluster, multinode, nodeshell
from verl_ascend.supervise import evidence, ray_nodes, relaunch
from verl_ascend.supervise import run as supervise_run

# Ray's GCS marks a node dead after this many missed health checks of this period (defaults 5 x 3 s)
FAST_DEATH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
              "RAY_health_check_failure_threshold": "2", "RAY_health_check_initial_delay_ms": "1000"}


def _start(index, spec, head_ip, port, tmp, env):
    mark = marks.Mark("VERL_ASCEND_SUPERVISE_RUN", f"raynodes-{os.getpid()}-{time.time_ns()}-{index}")
    run = proc_launch.Run(cluster.start_argv(index, spec, head_ip, port), env, str(tmp), mark)  # bound, namespaced
    with open(tmp / f"node{index}.log", "w") as log:
        run.start(stdout=log)
    return run


def test_the_relaunch_waits_for_rays_nodes_and_gives_up_naming_the_missing_one(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="va-rn-", dir="/tmp")  # short: Ray's socket paths live under it
    head_ip = multinode.head_address()
    spec = {"subnet": f"127.{random.randint(1, 254)}.{random.randint(0, 255)}", "gpus_per_node": 1,
            "cpus_per_node": 1, "ray_tmp": ray_tmp, "object_store_bytes": 80 << 20}
    port = cluster.free_ports(head_ip, 1)[0]
    address = f"{head_ip}:{port}"
    env = clean_env(RAY_AUTH_MODE="disabled", **FAST_DEATH)
    said, runs = [], []
    opts = supervise_run.Options(run_dir=str(tmp_path / "run"), wait_nodes=120.0)
    try:
        runs.append(_start(0, spec, head_ip, port, tmp_path, env))
        deadline = time.monotonic() + 120
        while not ray_nodes.answers(address) and time.monotonic() < deadline:  # the head's GCS is up
            time.sleep(0.5)
        runs.append(_start(1, spec, head_ip, port, tmp_path, env))
        began = time.monotonic()
        gone = relaunch.wait_nodes(opts, poll=2.0, settings={"nnodes": 2}, env={"RAY_ADDRESS": address}, say=said.append)
        assert gone == {}, (gone, _logs(tmp_path))
        assert said == [f"Ray at {address} (from RAY_ADDRESS): 2 node(s) alive, as trainer.nnodes asks"]
        print(f"2 nodes seen {time.monotonic() - began:.1f} s after the worker's ray start")

        assert runs[1].end() == []  # the worker node loses power: its raylet and everything of it, at once
        time.sleep(6)  # Ray's verdict: 2 missed health checks of 1 s
        began = time.monotonic()
        gone = relaunch.wait_nodes(dataclasses.replace(opts, wait_nodes=8.0), poll=4.0, settings={"nnodes": 2}, env={"RAY_ADDRESS": address},
                                   say=said.append)
        took = time.monotonic() - began
        worker_ip = f"{spec['subnet']}.2"
        assert gone == {f"Ray at {address}": f"Ray shows 1 of 2 node(s) alive ({head_ip}); dead in Ray's table: "
                                             f"{worker_ip}"}, gone
        assert 8.0 <= took < 8.0 + 30, took  # the budget, and at most one look past it
        print(f"gave up after {took:.1f} s (budget 8 s)")

        assert runs[0].end() == []  # the cluster is gone, as one the command formed is once the attempt is ended
        for _ in range(2):
            assert relaunch.wait_nodes(opts, settings={"nnodes": 2}, env={"RAY_ADDRESS": address}, say=said.append) == {}
        assert said[-1] == (f"nothing answers at {address} (from RAY_ADDRESS): no Ray cluster outside the command: "
                            "the command forms its own, so the relaunch does not wait for Ray's nodes")
        assert len(said) == 2  # said once
    finally:
        for run in runs:
            run.end()
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _logs(tmp) -> str:
    return subprocess.run(["tail", "-n", "5", *map(str, sorted(tmp.glob("node*.log")))], capture_output=True,
                          text=True).stdout


def test_the_other_nodes_evidence_is_gathered_over_ssh_and_the_stopped_rank_named_there(tmp_path):
    mark = marks.Mark("VERL_ASCEND_SUPERVISE_RUN", f"ev-{os.getpid()}-{time.time_ns()}")
    wait = "import time; time.sleep(120)"
    head = subprocess.Popen([sys.executable, "-c", wait], env={**clean_env(), **mark.env()}, start_new_session=True)
    rank = subprocess.Popen([sys.executable, "-c", wait], env={**clean_env(), **mark.env(), runlog.NODE_VAR: "1"},
                            start_new_session=True)
    try:
        time.sleep(1)  # both in their sleep
        os.kill(rank.pid, signal.SIGSTOP)
        nodes = {"127.0.0.1": 0, "127.0.0.2": 1}
        opts = supervise_run.Options(run_dir=str(tmp_path), nodes=("127.0.0.1", "127.0.0.2", "127.0.0.9"),
                                     ssh=nodeshell.ssh_command(str(tmp_path / "nodes"), [], nodes))
        console = tmp_path / "console.log"
        console.write_text("step:1 - x\n")
        folder = tmp_path / "evidence"
        began = time.monotonic()
        got = evidence.gather(str(folder), marks.marked(mark), str(console), time.time(), opts, str(mark))
        took = time.monotonic() - began
    finally:
        for proc in (head, rank):
            proc.kill()
            proc.wait()
    assert [p["pid"] for p in json.loads((folder / "processes.json").read_text())] == [head.pid]  # the head's only
    there = json.loads((folder / "nodes" / "127.0.0.2" / "processes.json").read_text())
    assert [(p["pid"], p["state"], p["stack"]) for p in there] == [(rank.pid, "T", "read")]
    assert "<module> (<string>:1)" in (folder / "nodes" / "127.0.0.2" / "stacks" / f"{rank.pid}.txt").read_text()
    assert got["nodes"]["127.0.0.2"] == "1 process(es)" and "cannot reach it" in got["nodes"]["127.0.0.9"]
    summary = (folder / "summary.txt").read_text()
    assert f"pid {rank.pid} on 127.0.0.2 (python) is STOPPED (state T), at <module> (<string>:1)" in summary, summary
    assert "127.0.0.9: not reached: cannot reach it over ssh" in summary
    print(f"evidence of 2 nodes (+1 silent) in {took:.1f} s:\n{summary}")

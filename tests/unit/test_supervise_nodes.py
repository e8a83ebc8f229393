"""supervise across nodes, on recorded outputs: the other nodes' evidence (the gatherer's JSON line, a node not
reached, the odd rank found among every node's processes, a rehearsal's node told apart on one host) and the wait
for Ray's nodes before a relaunch (doctor's probe of `ray.nodes()` recorded on a real 2-node CPU cluster, the
decision, the budget, no cluster outside the command said once)."""

import json
import os

import pytest

from verl_ascend.core import runlog
from verl_ascend.supervise import evidence, evidence_nodes, ray_nodes, relaunch
from verl_ascend.supervise import run as supervise_run

pytestmark = pytest.mark.verl_agnostic

# `python -m verl_ascend.doctor.ray_probe ADDRESS` on a head (this host, 192.0.2.2) and a worker node at 127.31.7.2
# (tests/process/test_supervise_ray_nodes.py's cluster): both alive; then the worker's node ended, Ray's verdict in
TWO_ALIVE = ('{"nodes": [{"alive": true, "ip": "127.31.7.2", "resources": {"memory": 19112689664.0, "GPU": 1.0, '
             '"NPU": 1.0, "node:127.31.7.2": 1.0, "CPU": 1.0, "object_store_memory": 83886080.0}}, {"alive": true, '
             '"ip": "192.0.2.2", "resources": {"node:__internal_head__": 1.0, "memory": 19276443648.0, "node:192.0.2.2": '
             '1.0, "GPU": 1.0, "NPU": 1.0, "CPU": 1.0, "object_store_memory": 83886080.0}}]}')
ONE_DEAD = ('{"nodes": [{"alive": true, "ip": "192.0.2.2", "resources": {"memory": 19276443648.0, "node:192.0.2.2": '
            '1.0, "CPU": 1.0, "object_store_memory": 83886080.0, "node:__internal_head__": 1.0, "NPU": 1.0, "GPU": 1.0}},'
            ' {"alive": false, "ip": "127.31.7.2", "resources": {}}]}')


def nodes_of(text):
    return json.loads(text)["nodes"]


def test_rays_nodes_decide_the_wait_and_name_the_missing_node():
    assert ray_nodes.shortfall(nodes_of(TWO_ALIVE), 2) == ""
    assert ray_nodes.shortfall(nodes_of(ONE_DEAD), 2, hosts=["192.0.2.2", "127.31.7.2"]) == (
        "Ray shows 1 of 2 node(s) alive (192.0.2.2); dead in Ray's table: 127.31.7.2; not in the cluster: 127.31.7.2")
    # the node back under its address: a new live entry beside the dead one
    back = nodes_of(ONE_DEAD) + [{"alive": True, "ip": "127.31.7.2"}]
    assert ray_nodes.shortfall(back, 2) == ""
    assert ray_nodes.shortfall(nodes_of(ONE_DEAD), 3).startswith("Ray shows 1 of 3")
    assert ray_nodes.wanted({"nnodes": "16"}) == 16 and ray_nodes.wanted({}, ("a", "b")) == 2
    assert ray_nodes.wanted({}) is None and ray_nodes.wanted({"nnodes": "${oc.env:N}"}, ("a",)) == 1


def test_the_wait_looks_until_the_nodes_are_back_or_the_budget_is_spent(monkeypatch):
    now = [0.0]  # a clock that moves only by the sleeps and by each look (5 s)
    monkeypatch.setattr(ray_nodes.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    monkeypatch.setattr(ray_nodes.time, "monotonic", lambda: now[0])

    def looking(answers, seen):
        def probe(address, timeout):
            seen.append((now[0], timeout))
            now[0] += 5
            return next(answers)
        return probe

    seen = []
    answers = iter([(nodes_of(ONE_DEAD), ""), (None, "no answer from the Ray cluster at X within 20 s"),
                    (nodes_of(TWO_ALIVE), "")])
    assert ray_nodes.wait("X", 2, [], deadline=100, poll=10, probe=looking(answers, seen)) == ""
    assert [t for t, _ in seen] == [0, 15, 30]  # until the third look saw both nodes
    now[0], seen = 0.0, []
    why = ray_nodes.wait("X", 2, [], deadline=20, poll=10, probe=looking(iter([(nodes_of(ONE_DEAD), "")] * 9), seen))
    assert why.startswith("Ray shows 1 of 2 node(s) alive") and [t for t, _ in seen] == [0, 15]  # the last at 20 s
    assert [timeout for _, timeout in seen] == [ray_nodes.PROBE_FLOOR, ray_nodes.PROBE_FLOOR]


def test_without_a_cluster_outside_the_command_the_wait_says_so_once(tmp_path, monkeypatch):
    monkeypatch.setattr(ray_nodes, "_told", set())
    opts = supervise_run.Options(run_dir=str(tmp_path))
    said = []
    env = {"RAY_TMPDIR": str(tmp_path)}  # no RAY_ADDRESS, no ray_current_cluster file: the command forms its own
    for _ in range(2):
        assert relaunch.wait_nodes(opts, settings={"nnodes": 2}, env=env, say=said.append) == {}
    assert said == [f"no Ray cluster outside the command (no RAY_ADDRESS and no {tmp_path}/ray/ray_current_cluster: Ray "
                    "is not started on this node): the command forms its own, so the relaunch does not wait for Ray's nodes"]
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:1")  # a stale file: nothing listens there
    assert ray_nodes.outside(env) == (None, f"nothing answers at 127.0.0.1:1 (from {tmp_path}/ray/ray_current_cluster):"
                                            " no Ray cluster outside the command")
    assert relaunch.wait_nodes(opts, settings={"nnodes": 1}, env=env, say=said.append) == {} and len(said) == 1


# the gatherer's line from node 127.31.7.2 (`python -m verl_ascend.supervise.evidence --mark ...` there), cut short:
# rank 1 SIGSTOPped in its optimizer step, a reward worker idle
NODE_LINE = json.dumps({"host": "vm", "node": "1", "pyspy": "/venv/bin/py-spy", "ptrace_scope": None, "processes": [
    {"pid": 301, "ppid": 290, "name": "ray::WorkerDict", "state": "T", "cpu_s": 41.2, "start": "1141065", "cmd": "ray::W",
     "cpu_rate": 0.0, "top": "pre_step (fault.py:60)", "stack": "read",
     "text": "Process 301: ray::WorkerDict\nThread 301 (idle): \"MainThread\"\n    pre_step (fault.py:60)\n"},
    {"pid": 302, "ppid": 290, "name": "raylet", "state": "S", "cpu_s": 3.0, "start": "1141000", "cmd": "raylet",
     "cpu_rate": 0.02, "top": None, "stack": "not read: not a Python process",
     "text": "py-spy could not read pid 302: not a Python process\n"}],
    "logs": [{"path": "/tmp/ray/session_latest/logs/raylet.out", "lines": ["a", "b"]}]})
HEAD_WAITS = {"pid": 7, "ppid": 1, "name": "ray::WorkerDict", "state": "S", "cpu_s": 50.0, "start": "1", "cmd": "x",
              "cpu_rate": 0.97, "top": "all_reduce (torch/distributed/distributed_c10d.py:3014)", "stack": "read",
              "text": "..."}


def test_the_gatherers_line_is_read_and_anything_else_names_the_fix():
    got = evidence_nodes.parse(0, b"a warning first\n" + NODE_LINE.encode() + b"\n", b"")
    assert [p["pid"] for p in got["processes"]] == [301, 302]
    bad = evidence_nodes.parse(1, b"", b"Traceback ...\nModuleNotFoundError: No module named 'verl_ascend'\n")
    assert bad["error"].startswith("the gatherer gave no report (exit 1): Traceback ... | ModuleNotFoundError")
    assert "--remote-python" in bad["error"]
    opts = supervise_run.Options(run_dir="r", remote_python="/opt/venv/bin/python")
    assert evidence_nodes.command(opts, "VERL_ASCEND_SUPERVISE_RUN=r-1-1", 1700000000.4) == (
        "/opt/venv/bin/python -m verl_ascend.supervise.evidence --mark VERL_ASCEND_SUPERVISE_RUN=r-1-1 --since 1700000000"
        " --budget 60")


def test_the_evidence_of_every_node_is_saved_and_the_odd_rank_is_named_wherever_it_is(tmp_path, monkeypatch):
    answers = {"127.31.7.2": json.loads(NODE_LINE), "127.31.7.3": {"error": "cannot reach it over ssh — check ..."}}
    monkeypatch.setattr(evidence_nodes, "one", lambda options, node, mark, since: answers[node])
    monkeypatch.setattr(evidence, "collect", lambda pids: ([dict(HEAD_WAITS)], "/venv/bin/py-spy"))
    opts = supervise_run.Options(run_dir=str(tmp_path), nodes=("192.0.2.2", "127.31.7.2", "127.31.7.3"))
    console = tmp_path / "console.log"
    console.write_text("step:1 - x\n")
    got = evidence.gather(str(tmp_path / "ev"), [7], str(console), 0.0, opts, "VERL_ASCEND_SUPERVISE_RUN=r-1-1")
    assert got["nodes"] == {"127.31.7.2": "2 process(es)", "127.31.7.3": "cannot reach it over ssh — check ..."}
    node = tmp_path / "ev" / "nodes" / "127.31.7.2"
    assert [p["pid"] for p in json.loads((node / "processes.json").read_text())] == [301, 302]
    assert "pre_step (fault.py:60)" in (node / "stacks" / "301.txt").read_text()
    assert (node / "logs" / "00-raylet.out.tail").read_text().endswith("a\nb\n")
    assert (tmp_path / "ev" / "nodes" / "127.31.7.3" / "unreachable.txt").read_text().startswith("cannot reach it")
    summary = (tmp_path / "ev" / "summary.txt").read_text().splitlines()
    assert summary[:4] == ["192.0.2.2 (this host): 1 process(es) of the run: 1 S",
                           "127.31.7.2: 2 process(es) of the run: 1 S, 1 T",
                           "127.31.7.3: not reached: cannot reach it over ssh — check ...",
                           "pid 301 on 127.31.7.2 (ray::WorkerDict) is STOPPED (state T), at pre_step (fault.py:60)"]
    assert "pid 7 (ray::WorkerDict) waits in all_reduce (torch/distributed/distributed_c10d.py:3014)" in summary
    assert summary[-1] == ("pid 7 (ray::WorkerDict) uses 0.97 core, at all_reduce "
                           "(torch/distributed/distributed_c10d.py:3014)")


def test_a_rehearsals_node_is_told_by_the_variable_its_ray_start_had(monkeypatch):
    me = os.getpid()  # this process has no NODE_VAR: the head's, like every process of a real cluster
    assert evidence.node_tag(me) == "" and evidence.on_this_node([me]) == [me]
    monkeypatch.setenv(runlog.NODE_VAR, "1")  # a gatherer run in worker node 1's view keeps node 1's processes only
    assert evidence.on_this_node([me]) == []
    assert runlog.NODE_VAR in runlog.NOT_SETTINGS  # never shown as a setting the driver should have forwarded


# where each process of a 2-node rehearsal was when its hang was called (rehearse recipes/grpo_qwen2_5_32b_a2.sh
# --nnodes 2 --nproc 1 --supervise --fault hang-rank, verl 0.9.1): rank 0, on the worker node, SIGSTOPped before its
# optimizer step; rank 1 (head) done with the update; the driver and the TaskRunner in ray.get; the nodes' daemons
HANG_2_NODES = [
    (14387, "python", "S", "main (verl_ascend/rehearse/run/cluster.py:200)", ""),
    (14390, "python", "S", "start (ray/scripts/scripts.py:1285)", ""),
    (14429, "python", "S", "Monitor._run (ray/autoscaler/_private/monitor.py:463)", ""),
    (14430, "python", "S", "main (ray/util/client/server/server.py:949)", ""),
    (14790, "python", "S", "Worker.get_objects (ray/_private/worker.py:1007)", ""),
    (14842, "ray::TaskRunnerV1.run", "S", "Worker.get_objects (ray/_private/worker.py:1007)", ""),
    (15160, "ray::WorkerDict", "S", "Worker.main_loop (ray/_private/worker.py:1069)", ""),
    (15507, "ray::TaskRunnerV1.run", "S", "_PollLikeSelector.select (selectors.py:415)", ""),
    (15721, "python", "S", "main (multiprocessing/resource_tracker.py:227)", ""),
    (15723, "python", "S", "Connection._recv (multiprocessing/connection.py:395)", ""),
    (14392, "python", "S", "start (ray/scripts/scripts.py:1285)", "127.149.37.2"),
    (14980, "ray::SimpleStorageUnit", "S", "Worker.main_loop (ray/_private/worker.py:1069)", "127.149.37.2"),
    (15159, "ray::WorkerDict.actor_rollout_ref_update_actor", "T",
     "_hook.<locals>.pre_step (verl_ascend/rehearse/loop/fault.py:79)", "127.149.37.2"),
    (15722, "python", "S", "main (multiprocessing/resource_tracker.py:227)", "127.149.37.2"),
]


def test_on_two_nodes_the_stopped_rank_is_named_on_its_node_and_the_daemons_are_not_taken_for_ranks():
    procs = [{"pid": pid, "name": name, "state": state, "top": top, "node": node}
             for pid, name, state, top, node in HANG_2_NODES]
    assert evidence.odd_ones(procs) == [
        "pid 15159 on 127.149.37.2 (ray::WorkerDict.actor_rollout_ref_update_actor) is STOPPED (state T), at "
        "_hook.<locals>.pre_step (verl_ascend/rehearse/loop/fault.py:79)",
        "2 of 2 processes wait (Worker.get_objects x2)",
        "pid 14790 (python) waits in Worker.get_objects (ray/_private/worker.py:1007)",
        "pid 14842 (ray::TaskRunnerV1.run) waits in Worker.get_objects (ray/_private/worker.py:1007)"]


def test_the_gatherers_cpu_only_answer_is_one_json_line_and_a_window_of_0_s_is_bad_input(capsys):
    assert evidence.main(["--mark", "VERL_ASCEND_SUPERVISE_RUN=none-such", "--sample", "0"]) == 2
    assert "--sample 0: the CPU rate needs a window of more than 0 s" in capsys.readouterr().err
    assert evidence.main(["--mark", "VERL_ASCEND_SUPERVISE_RUN=none-such", "--cpu-only", "--sample", "0.1"]) == 0
    got = evidence_nodes.parse(0, capsys.readouterr().out.encode(), b"")
    assert got["processes"] == [] and "logs" not in got and "pyspy" not in got
    cmd = evidence_nodes.command(supervise_run.Options(run_dir="r"), "A=b", 0.0, cpu_only=2.0)
    assert cmd.endswith("--cpu-only --sample 2") and " -m verl_ascend.supervise.evidence --mark A=b " in cmd

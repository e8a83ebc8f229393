"""The pieces of `rehearse --nnodes` that need no cluster: node commands, the local ssh, the per-node verdict.

The runs themselves (two Ray nodes, per-node disks, sync, resume, faults) are tests/process/test_rehearse_nodes*.py.
"""

import pytest

from verl_ascend.rehearse.run import cluster, nodeshell
from verl_ascend.rehearse.verdict import nodes as multinode

pytestmark = pytest.mark.verl_agnostic

SPEC = {"gpus_per_node": 2, "cpus_per_node": 16, "ray_tmp": "/tmp/x/ray", "subnet": "127.9.8",
        "node_local": ["/out/checkpoints", "/tmp/x/ray"], "nodes_dir": "/out/nodes"}


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_head_and_worker_start_like_the_shipped_ray_scripts_on_their_own_addresses_and_ports():
    head = cluster.start_argv(0, SPEC, "127.0.0.1", 23456)  # ports are checked free on each node's own address
    worker = cluster.start_argv(1, SPEC, "127.0.0.1", 23456)
    assert "--head" in head and flag(head, "--port") == "23456" and flag(head, "--node-ip-address") == "127.0.0.1"
    assert "--head" not in worker and flag(worker, "--address") == "127.0.0.1:23456"
    assert flag(worker, "--node-ip-address") == "127.9.8.2"
    for argv in (head, worker):  # ray_start_worker.sh's NPU resource, and the GPU count verl's CPU platform asks for
        assert flag(argv, "--resources") == '{"NPU": 2}' and flag(argv, "--num-gpus") == "2" and "--block" in argv
    ports = [int(flag(argv, f)) for argv in (head, worker) for f in ("--node-manager-port", "--object-manager-port")]
    workers = [int(p) for p in flag(head, "--worker-port-list").split(",")]
    assert len(set(ports)) == 4 and not set(ports) & set(workers)
    assert all(20000 <= p < cluster._ephemeral_start() for p in ports + workers)  # never a bind(0) port


def test_a_worker_node_sees_its_own_folder_at_each_node_local_path(tmp_path):
    spec = {**SPEC, "nodes_dir": f"{tmp_path}/nodes", "node_local": [f"{tmp_path}/checkpoints", f"{tmp_path}/ray"]}
    argv = cluster.in_node_view(1, spec, ["ray", "start"])
    assert argv[:4] == ["unshare", "--mount", "--propagation", "private"] and argv[-2:] == ["ray", "start"]
    script = argv[argv.index("-c") + 1]
    assert f"mount --bind {tmp_path}/nodes/node1/checkpoints {tmp_path}/checkpoints" in script
    assert f"mount --bind {tmp_path}/nodes/node1/ray {tmp_path}/ray" in script
    assert (tmp_path / "nodes" / "node1" / "checkpoints").is_dir() and (tmp_path / "checkpoints").is_dir()


def test_the_local_ssh_takes_ssh_arguments_and_refuses_a_host_that_is_not_a_node():
    nodes = {"10.1.2.3": 0, "127.9.8.2": 1}
    argv = nodeshell.argv_for("/out/nodes", ["/out/checkpoints"], nodes,
                              ["-o", "BatchMode=yes", "-p", "22", "-T", "root@127.9.8.2", "rsync", "--server", "."])
    script = argv[argv.index("-c") + 1]
    assert "mount --bind /out/nodes/node1/checkpoints /out/checkpoints" in script
    assert script.index("mkdir -p /out/nodes/node1/checkpoints /out/checkpoints") < script.index("mount --bind")
    assert argv[-1] == "rsync --server ."  # ssh joins the remote command's words with spaces
    with pytest.raises(LookupError, match="not a node of this rehearsal"):
        nodeshell.argv_for("/out/nodes", [], nodes, ["-o", "X=1", "10.9.9.9", "true"])
    assert nodeshell.main(["--nodes-dir", "/out/nodes", "--node", "10.1.2.3=0", "10.9.9.9", "true"]) == 255
    ssh = nodeshell.ssh_command("/out/nodes", ["/out/checkpoints"], nodes)
    assert "-m verl_ascend.rehearse.run.nodeshell" in ssh and "--node 127.9.8.2=1" in ssh


def test_the_node_verdict_fails_a_node_whose_processes_lack_the_drivers_settings_or_never_reported():
    said = ["patches in actor rank 0: ray_runtime_env applied",
            "node 127.9.8.2: actor rank 0: device cpu, platform PlatformCPU; settings VERL_ASCEND=1 VERL_ASCEND_X=2",
            "node 10.1.2.3: TaskRunner: device cpu, platform PlatformCPU; settings VERL_ASCEND=1"]
    driver = {"VERL_ASCEND": "1", "VERL_ASCEND_X": "2"}
    ok, lines = multinode.settings_crossed(said, driver, ["10.1.2.3", "127.9.8.2"])
    assert not ok and lines[0].startswith("FAIL node 0 (10.1.2.3) TaskRunner") and "VERL_ASCEND_X" in lines[0]
    assert lines[1].startswith("ok   node 1 (127.9.8.2) actor rank 0") and "ray_runtime_env applied" in lines[2]
    ok, lines = multinode.settings_crossed(said[:2], driver, ["10.1.2.3", "127.9.8.2"])
    assert not ok and "no process of the loop reported from it" in lines[0]
    assert multinode.settings_crossed(said[:2], driver, ["127.9.8.2"])[0]


def test_settings_reported_leave_out_the_runs_mark_and_values_with_spaces():
    env = {"VERL_ASCEND": "1", "VERL_ASCEND_REHEARSE_RUN": "train-1", "VERL_ASCEND_X": "a b", "OTHER": "1"}
    from verl_ascend.rehearse.loop.report import settings_of

    assert settings_of(env) == {"VERL_ASCEND": "1"}


def test_a_fault_that_never_fired_fails_the_run_naming_it():
    from types import SimpleNamespace

    # asked for, and the trainer ended without the trigger line: exit 1 whatever the trainer's code, named
    code, verdict = cluster.outcome("worker-node", SimpleNamespace(killed=None, verdict="", trigger=cluster.FAULT_TRIGGER), 0, 2)
    assert code == 1 and "--fault worker-node never fired" in verdict and "'rollout dispatch'" in verdict, verdict
    assert "the trainer exited 0" in verdict
    code, verdict = cluster.outcome("worker-node", None, 0, 1)  # no worker node to kill
    assert code == 1 and "never fired" in verdict and "1 node(s)" in verdict, verdict
    # planted: the fault's own verdict; not asked: the trainer's code, no verdict
    fired = SimpleNamespace(killed=object(), verdict="node 1 (worker node 1, 127.1.2.2) died mid-step: ...")
    assert cluster.outcome("worker-node", fired, 0, 2) == (1, fired.verdict)
    assert cluster.outcome("", None, 0, 2) == (0, "")
    assert cluster.outcome("", None, 3, 2) == (3, "")


def test_under_supervise_the_node_dies_once_the_named_step_is_saved():
    var = "VERL_ASCEND_REHEARSE_FAULT"
    assert cluster.fault_asked({"fault": "worker-node"}, {}) == ("worker-node", cluster.FAULT_TRIGGER)
    assert cluster.fault_asked({}, {var: "worker-node@after-step-1"}) == ("worker-node", "step:1 - ")
    assert cluster.fault_asked({}, {var: "kill-worker@/ckpt"}) == ("", cluster.FAULT_TRIGGER)  # the loop's, not a node's
    assert cluster.fault_asked({}, {})[0] == ""


def _cluster(tmp_path):
    from verl_ascend.rehearse.run import multinode as run_multinode

    return run_multinode.Cluster(2, "127.0.0.1", tmp_path / "nodes", [str(tmp_path / "checkpoints")],
                                 tmp_path / "cluster.json", "127.9.8")


def _tree(folder):
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_no_sync_puts_each_nodes_checkpoint_back_as_the_save_left_it(tmp_path, capsys):
    """A resume without the sync that trains from scratch saves over the nodes' checkpoint; the sync and the resume
    after it must see what the save left, not that."""
    from verl_ascend.rehearse.run import multinode as run_multinode

    cl, ckpt = _cluster(tmp_path), tmp_path / "checkpoints"
    for index in range(2):
        node = cl.node_copy(index, ckpt)
        (node / "global_step_1" / "actor").mkdir(parents=True)
        (node / "global_step_1" / "actor" / f"shard_{index}.distcp").write_text(f"saved by rank {index}")
    (cl.node_copy(0, ckpt) / "latest_checkpointed_iteration.txt").write_text("1")
    before = {i: _tree(cl.node_copy(i, ckpt)) for i in range(2)}

    def from_scratch():  # what verl does on the node without the tracker: trains again and saves over
        node1 = cl.node_copy(1, ckpt)
        (node1 / "global_step_1" / "actor" / "shard_1.distcp").write_text("retrained")
        (node1 / "global_step_2").mkdir()
        (node1 / "global_step_2" / "data.pt").write_text("new")
        (node1 / "latest_checkpointed_iteration.txt").write_text("2")
        return True, "trained from step 1 again"

    assert run_multinode.resume_unsynced(cl, ckpt, tmp_path, from_scratch) == ""
    assert {i: _tree(cl.node_copy(i, ckpt)) for i in range(2)} == before
    assert not (tmp_path / ".nodes-as-saved").exists()
    assert "failed, as on a cluster without shared storage: trained from step 1 again" in capsys.readouterr().out

    def loaded():  # the nodes' disks were one: nothing of a cluster without shared storage shown
        return False, "verl loaded global_step_1"

    problem = run_multinode.resume_unsynced(cl, ckpt, tmp_path, loaded)
    assert "did not fail (verl loaded global_step_1)" in problem and "not separate" in problem, problem

    def crashed():  # rehearse stopped mid-run: the nodes are still put back
        (cl.node_copy(0, ckpt) / "latest_checkpointed_iteration.txt").unlink()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_multinode.resume_unsynced(cl, ckpt, tmp_path, crashed)
    assert {i: _tree(cl.node_copy(i, ckpt)) for i in range(2)} == before

"""`verl-ascend ckpt sync` between two nodes on this machine, over real ssh and rsync.

Each node is a real sshd (openssh-server) on its own loopback address and port, started in its own
mount namespace (util-linux ``unshare --mount``) in which that node's folder is bind-mounted at DIR's
parent: both nodes see their checkpoint at the same absolute path, as on a cluster with local disks
(and a node may lack DIR), and the command reaches them as it would reach hosts
(``root@127.0.0.1:PORT``, ``127.0.0.2:PORT``). Nothing leaves the machine. Needs root (sshd, mounts),
as CI has; dev/with-verl.sh installs openssh-server and rsync.

The checkpoint is real: two gloo ranks write every dist_ckpt with torch's DCP writer
(tests/dcp_ranks.py), rank 0's files are added as MegatronCheckpointManager writes them
(tests/test_ckpt_check.py). It is then split the way non-shared storage leaves it: node A (rank 0)
holds everything except rank 1's shards, node B only rank 1's shards.
"""

import hashlib
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from subproc import clean_env, free_port, last_json, run_cli
from test_ckpt_check import fsdp_run, megatron_run
from test_ckpt_dcp import run_ranks

pytestmark = pytest.mark.verl_agnostic
PARTS = ("model", "optimizer", "extra")
ACTOR = "global_step_10/actor"
# what a resume reads that verl writes on rank 0's node only (see verl_ascend/ckpt/sync.py for where)
RANK0_FILES = {"latest_checkpointed_iteration.txt", "global_step_10/data.pt", f"{ACTOR}/ckpt_contents.json",
               f"{ACTOR}/transformer_config.json", f"{ACTOR}/model/huggingface/config.json",
               *(f"{ACTOR}/{p}/dist_ckpt/{f}" for p in PARTS for f in (".metadata", "metadata.json", "common.pt"))}
SHARDS = {r: {f"{ACTOR}/{p}/dist_ckpt/__{r}_0.distcp" for p in PARTS} for r in (0, 1)}


def _tool(name):
    found = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.path.exists(p)), None)
    if not found:
        pytest.fail(f"{name} is not installed: apt-get install openssh-server openssh-client rsync "
                    "(dev/with-verl.sh installs them)")
    return found


def _wait_listening(addr, port, proc, log):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"sshd for {addr}:{port} exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            socket.create_connection((addr, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"sshd for {addr}:{port} did not listen within 20 s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two nodes: (DIR, [(node spec, that node's folder)], ssh command)."""
    if os.geteuid() != 0:
        pytest.fail("the two-node test needs root (sshd and mount namespaces); CI runs as root")
    sshd = _tool("sshd")
    _tool("rsync")
    base = tmp_path_factory.mktemp("cluster")
    for name in ("client_key", "host_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / name)], check=True, timeout=60)
    (base / "authorized_keys").write_text((base / "client_key.pub").read_text())
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation folder (the package's service makes it)
    mnt = base / "mnt"  # each node's own folder is mounted here; DIR is below it, so a node may lack DIR
    mnt.mkdir()
    nodes, procs = [], []
    try:
        for i, (user, addr) in enumerate((("root@", "127.0.0.1"), ("", "127.0.0.2"))):
            folder, port, log = base / f"node{i}", free_port(addr), base / f"sshd{i}.log"
            folder.mkdir()
            conf = base / f"sshd{i}.conf"
            conf.write_text(f"Port {port}\nListenAddress {addr}\nHostKey {base / 'host_key'}\nPidFile none\n"
                            f"AuthorizedKeysFile {base / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
                            "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                            "PermitRootLogin prohibit-password\nPrintMotd no\nLogLevel ERROR\n")
            script = f"mount --bind {folder} {mnt} && exec {sshd} -D -e -f {conf}"
            with log.open("w") as err:  # sshd keeps its own copy of the descriptor
                procs.append(subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                              stdout=subprocess.DEVNULL, stderr=err))
            _wait_listening(addr, port, procs[-1], log)
            nodes.append((f"{user}{addr}:{port}", folder))
        ssh = (f"ssh -F /dev/null -i {base / 'client_key'} -o UserKnownHostsFile=/dev/null "
               "-o StrictHostKeyChecking=no -o LogLevel=ERROR")
        yield str(mnt / "run"), nodes, ssh
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=20)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real two-rank Megatron save of step 10, all in one folder (as shared storage would hold it)."""
    root = tmp_path_factory.mktemp("saved")
    actor = root / ACTOR
    actor.mkdir(parents=True)
    run_ranks("fast", "megatron", folder=actor, timeout=300)
    megatron_run(root, step=10, world=2, save=False)
    assert _files(root) == RANK0_FILES | SHARDS[0] | SHARDS[1]
    return root


def _files(folder):
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def _state(folder):
    return {rel: hashlib.sha256((folder / rel).read_bytes()).hexdigest() for rel in _files(folder)}


def place(saved, cluster, rank1=lambda rel: rel in SHARDS[1]):
    """Non-shared storage after the save: node A has all but rank 1's shards, node B only those.
    Returns each node's DIR as seen from here."""
    _, [(_, node_a), (_, node_b)], _ = cluster
    a, b = node_a / "run", node_b / "run"
    for folder in (a, b):
        shutil.rmtree(folder, ignore_errors=True)
    for rel in _files(saved):
        dest = b if rank1(rel) else a
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(saved / rel, dest / rel)
    return a, b


def sync(cluster, *extra, nodes=None, timeout=600):
    ckpt, pairs, ssh = cluster
    specs = nodes or [spec for spec, _ in pairs]
    return run_cli("ckpt", "sync", ckpt, "--nodes", *specs, "--ssh", ssh, *extra, env=clean_env(), timeout=timeout)


def check(folder):
    return run_cli("ckpt", "check", str(folder), env=clean_env(), timeout=300)


def test_dry_run_lists_exactly_the_missing_files_and_changes_nothing(saved, cluster):
    a, b = place(saved, cluster)
    (spec_a, _), (spec_b, _) = cluster[1]
    before = _state(a), _state(b)
    proc = sync(cluster, "--dry-run", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = last_json(proc)["plan"]
    assert {f["path"] for f in plan[spec_b]} == RANK0_FILES
    assert {f["from"] for f in plan[spec_b]} == {spec_a} and plan[spec_a] == []
    everything = last_json(sync(cluster, "--dry-run", "--all", "--json"))["plan"]
    assert {f["path"] for f in everything[spec_b]} == RANK0_FILES | SHARDS[0]
    assert {(f["path"], f["from"]) for f in everything[spec_a]} == {(s, spec_b) for s in SHARDS[1]}
    text = sync(cluster, "--dry-run")
    assert text.returncode == 0 and f"  {ACTOR}/optimizer/dist_ckpt/.metadata  <- {spec_a}" in text.stdout
    assert f"{spec_b}: would copy 14 files" in text.stdout
    assert (_state(a), _state(b)) == before


def test_sync_then_check_passes_on_both_nodes(saved, cluster):
    """sync re-checks each node by running `ckpt check DIR --json` there (over ssh, in that node's
    namespace); ckpt check run here on node B's folder must agree. (torch imports dominate the time.)"""
    a, b = place(saved, cluster)
    (spec_a, _), (spec_b, _) = cluster[1]
    first = sync(cluster, "--json")  # the files of rank 0's node only: shards stay where they were written
    report = last_json(first)
    assert first.returncode == 1, first.stdout + first.stderr
    assert first.stderr == ""  # no progress unless asked for or on a terminal
    for spec in (spec_a, spec_b):
        assert report["nodes"][spec]["check_exit_code"] == 2  # ckpt check alone wants every shard on the node
        (warning,) = report["nodes"][spec]["findings"]
        assert warning["code"] == "shards_elsewhere" and "3 shard file(s)" in warning["message"]
        assert warning["severity"] == "warning" and warning["subject"] == str(cluster[0])  # the run's DIR
    assert _files(b) == RANK0_FILES | SHARDS[1]
    full = sync(cluster, "--all", "--json", "--progress")
    assert full.returncode == 0, full.stdout + full.stderr
    assert "100%" in full.stderr  # rsync's own progress (--info=progress2), on stderr
    for spec in (spec_a, spec_b):
        assert last_json(full)["nodes"][spec] == {"exit_code": 0, "check_exit_code": 0, "findings": []}
    here = check(b)
    assert here.returncode == 0 and "result: resumable (exit 0)" in here.stdout, here.stdout + here.stderr
    assert _state(a) == _state(b) == _state(saved)
    again = last_json(sync(cluster, "--all", "--dry-run", "--json"))
    assert again["exit_code"] == 0 and again["plan"] == {spec_a: [], spec_b: []}


def test_a_step_whose_save_did_not_finish_is_skipped_and_named(saved, cluster):
    a, b = place(saved, cluster)
    for node in (a, b):  # a later save, cut off before rank 0 wrote the manifest
        shutil.copytree(node / "global_step_10", node / "global_step_20")
    (a / "global_step_20" / "actor" / "ckpt_contents.json").unlink()
    proc = sync(cluster, "--dry-run", "--all", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = last_json(proc)
    (skip,) = report["skipped"]
    assert skip["step"] == 20 and "actor/ has no ckpt_contents.json" in skip["reason"]
    assert not [f for files in report["plan"].values() for f in files if f["path"].startswith("global_step_20")]
    assert "skipped global_step_20: actor/ has no ckpt_contents.json" in sync(cluster, "--dry-run").stdout


def test_a_bad_or_unreachable_node_is_exit_2_naming_it(saved, cluster):
    a, b = place(saved, cluster)
    before = _state(a), _state(b)
    (spec_a, _), _ = cluster[1]
    for bad in ("root@127.0.0.1:99999", "node 1", "a:b:c"):
        proc = sync(cluster, nodes=[spec_a, bad])
        assert proc.returncode == 2 and repr(bad) in proc.stderr and "[user@]host[:port]" in proc.stderr
    dead = f"127.0.0.1:{free_port('127.0.0.1')}"
    proc = sync(cluster, nodes=[spec_a, dead])
    assert proc.returncode == 2 and f"{dead}: cannot reach it over ssh" in proc.stdout and "fix:" in proc.stdout
    twice = sync(cluster, nodes=[spec_a, spec_a])
    assert twice.returncode == 2 and "twice" in twice.stderr
    relative = run_cli("ckpt", "sync", "ckpt", "--nodes", spec_a, env=clean_env(), timeout=120)
    assert relative.returncode == 2 and "relative" in relative.stderr
    assert (_state(a), _state(b)) == before


def test_a_failed_copy_leaves_whole_files_and_no_tracker(saved, cluster):
    a, b = place(saved, cluster)
    (_, _), (spec_b, _) = cluster[1]
    # a folder (holding a folder: no file a listing would show) where one file must land: rsync cannot
    # replace it, copies the rest and fails
    (b / ACTOR / "extra" / "dist_ckpt" / ".metadata" / "in_the_way").mkdir(parents=True)
    proc = sync(cluster, "--all")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{spec_b}: copying" in proc.stdout and "rsync exit" in proc.stdout  # a finding of that node
    landed = _files(b)
    assert not [rel for rel in landed if re.search(r"(^|/)\.[^/]+\.[A-Za-z0-9]{6}$", rel)]  # no rsync temp file
    whole = _state(saved)
    assert all(_state(b)[rel] == whole[rel] for rel in landed), "a file arrived cut short"
    assert f"{ACTOR}/model/dist_ckpt/.metadata" in landed  # the copy did run for what it could place
    assert f"{ACTOR}/extra/dist_ckpt/.metadata" not in landed
    # the completion file and the tracker come after the step's files: never on a node missing some
    assert "latest_checkpointed_iteration.txt" not in landed and f"{ACTOR}/ckpt_contents.json" not in landed


def test_a_shard_damaged_on_the_only_node_holding_it_is_named_and_not_spread(saved, cluster):
    a, b = place(saved, cluster)
    (spec_a, _), (spec_b, _) = cluster[1]
    cut = sorted(SHARDS[1])[0]  # rank 1's shard, on node B only: as a node that died mid-save leaves it
    with open(b / cut, "r+b") as fh:
        fh.truncate((b / cut).stat().st_size // 2)
    proc = sync(cluster, "--all", "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr  # node B's re-check: the shard is damaged there
    report = last_json(proc)
    # node B's own check cannot see the damage (its .metadata is on node A): the copy is judged on node A, where
    # both meet, and withdrawn; node B keeps its file, named as damaged
    assert cut not in _files(a) and cut in _files(b)
    (named,) = [f for f in report["findings"] if f["code"] == "damaged_not_copied"]
    assert named["subject"].endswith(cut) and f"withdrew the copy this sync brought from {spec_b}" in named["message"]
    assert named["where"] == {"node": spec_a}
    assert [f["code"] for f in report["nodes"][spec_b]["findings"] if f["subject"].endswith(cut)] == ["file_damaged"]
    others = sorted(SHARDS[1] - {cut})  # rank 1's whole shards still reach node A
    assert others and all(rel in _files(a) for rel in others)


def test_a_node_that_never_saved_gets_the_folder_and_a_missing_remote_python_is_named(saved, cluster):
    a, b = place(saved, cluster)
    shutil.rmtree(b)  # a replacement node: no DIR at all
    proc = sync(cluster, "--all", "--remote-python", "/nonexistent/python")
    # rsync made DIR and copied everything node A has (rank 1's shards were on the lost disk)
    assert _state(b) == {rel: digest for rel, digest in _state(saved).items() if rel not in SHARDS[1]}
    assert proc.returncode == 2, proc.stdout + proc.stderr
    for spec, _ in cluster[1]:  # every node is named, with the fix
        assert f"{spec}: ckpt check errors (exit 2)\n  ERROR {spec}: `/nonexistent/python -m verl_ascend ckpt " \
               "check` gave no report" in proc.stdout
    assert "fix: pass --remote-python" in proc.stdout


def test_fsdp_rank_files_stay_per_node_unless_all(tmp_path, cluster):
    """FSDP: each rank loads only its own *_rank_R.pt (FSDPCheckpointManager.load_checkpoint), rank 0
    writes fsdp_config.json and huggingface/; a step missing a rank's file on every node is skipped."""
    saved = tmp_path / "fsdp"
    actor = fsdp_run(saved, step=4, world=2)
    (actor / "huggingface" / "config.json").write_text("{}")
    a, b = place(saved, cluster, rank1=lambda rel: "_rank_1.pt" in rel)
    (spec_a, _), (spec_b, _) = cluster[1]
    rank = {r: {f"global_step_4/actor/{k}_world_size_2_rank_{r}.pt" for k in ("model", "optim", "extra_state")}
            for r in (0, 1)}
    plan = last_json(sync(cluster, "--dry-run", "--json"))["plan"]
    assert {f["path"] for f in plan[spec_b]} == {"latest_checkpointed_iteration.txt", "global_step_4/data.pt",
                                                 "global_step_4/actor/fsdp_config.json",
                                                 "global_step_4/actor/huggingface/config.json"}
    assert plan[spec_a] == []
    everything = last_json(sync(cluster, "--dry-run", "--all", "--json"))["plan"]
    assert {f["path"] for f in everything[spec_a]} == rank[1] and rank[0] <= {f["path"] for f in everything[spec_b]}
    first = sync(cluster, "--json")
    assert first.returncode == 1, first.stdout + first.stderr
    for spec in (spec_a, spec_b):  # ckpt check's rank-files error, turned into "on other nodes only"
        (warning,) = last_json(first)["nodes"][spec]["findings"]
        assert warning["code"] == "shards_elsewhere" and "3 shard file(s)" in warning["message"]
    assert sync(cluster, "--all").returncode == 0
    assert _files(a) == _files(b) == _files(saved)
    (b / "global_step_4" / "actor" / "optim_world_size_2_rank_1.pt").unlink()
    (a / "global_step_4" / "actor" / "optim_world_size_2_rank_1.pt").unlink()
    lost = last_json(sync(cluster, "--dry-run", "--json"))
    assert lost["skipped"][0]["step"] == 4 and "1 per-rank files are on no node (e.g. optim_world_size_2_rank_1.pt)" \
        in lost["skipped"][0]["reason"]

"""`verl-ascend rehearse --nnodes 2`: the shipped 32B recipe's multi-node path on two Ray nodes of this machine.

Each node has its own address, its own disk for the checkpoint folder and Ray's (a mount namespace), and no
VERL_ASCEND* setting of its own; main_ppo runs with trainer.nnodes=2 (1 rank per node: the recipe's TP8 PP2 scales
to TP2, one tensor-parallel group across the two nodes). Between the runs, what a cluster without shared storage
needs: the files per node, `ckpt check` on each node, with `--no-sync` first a resume without the sync (it fails
as on such a cluster, `diagnose` names why and `ckpt sync`), then `ckpt sync`, `ckpt check` again, the resume. A
worker node that loses power mid-step is in test_rehearse_nodes_fault.py (a file of its own: pytest's workers share
the files). Everything asserted is read from the rehearsal's own output and the run's own files.
"""

import re
import tempfile
from pathlib import Path

from rehearsal_helpers import NODES, NODES_RECIPE, assert_diagnosed_as, assert_diagnosed_clean, assert_nothing_left, logs_tail, needs_09, rehearse


def node_lines(stdout: str) -> dict:
    """{role: node address} from the loop's own lines (each process says where it runs)."""
    return {role: ip for ip, role in re.findall(r"^  node (\S+): (actor rank \d|TaskRunner): device cpu", stdout, re.M)}


@needs_09
def test_two_nodes_with_their_own_disks_save_check_fail_unsynced_sync_and_resume():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        out = Path(tmp) / "out"
        proc = rehearse(out, *NODES, "--no-sync", recipe=NODES_RECIPE)
        assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:] + logs_tail(out)
        changes = (out / "changes.txt").read_text()
        assert "trainer.nnodes=2, n_gpus_per_node=1" in changes and "recipe TP8 PP2 -> TP2" in changes, changes
        ups = re.findall(r"node (\d) \((?:head|worker node 1)\) at (\S+): Ray node up, 1 NPU", proc.stdout)
        hosts = dict(ups)
        assert sorted(hosts) == ["0", "1"] and re.fullmatch(r"127\.\d+\.\d+\.2", hosts["1"]) and hosts["0"] != hosts["1"], ups
        # the two actor ranks (one TP group) ran on different nodes, as their own processes said
        where = node_lines(proc.stdout)
        assert {where["actor rank 0"], where["actor rank 1"]} == set(hosts.values()), where
        # every node's processes hold the driver's VERL_ASCEND* settings, which only the job's runtime env carried
        crossed = re.findall(r"^  (ok  |FAIL) node (\d) \((\S+)\) (.+?): device cpu, platform (\w+), (\d+) VERL_ASCEND",
                             proc.stdout, re.M)
        assert {n for _, n, *_ in crossed} == {"0", "1"} and all(s == "ok  " for s, *_ in crossed), crossed
        assert all(int(count) >= 3 for *_, count in crossed), crossed  # VERL_ASCEND, _DEVICE, _REHEARSE, ...
        # ... and the patch states each of those processes reported, printed under it
        summary = proc.stdout.split("what reached each node")[1]
        assert summary.count("patches there: ") == len(crossed) and "ray_runtime_env applied" in summary, summary

        # node-local checkpoints: after the save each node held only what its processes wrote
        files = {}
        for line in (out / "node_files.txt").read_text().split("# after ckpt sync")[0].splitlines():
            if not line.startswith("#"):
                node, rel = line.split(" ", 1)
                files.setdefault(node, set()).add(rel)
        assert set(files) == {"node0", "node1"}, sorted(files)
        tracker = [n for n, f in files.items() if "latest_checkpointed_iteration.txt" in f]
        assert len(tracker) == 1, tracker  # written once, by the trainer on its node
        shards = {n: {f for f in f_ if f.endswith(".distcp")} for n, f_ in files.items()}
        assert shards["node0"] and shards["node1"] and not shards["node0"] & shards["node1"], shards
        # --no-sync: the resume on what each node held failed before any copy, and diagnose names why and the fix.
        # Which of two failures depends on the node Ray puts the trainer on: the one with the tracker (the ranks
        # elsewhere lack the step's metadata), or another (verl finds no tracker and trains from scratch)
        said = [proc.stdout.find(line) for line in (
            "before sync: ckpt check on node 1", "--no-sync: the resume reads what each node holds",
            "rehearse: resume without ckpt sync: main_ppo", "--no-sync: the resume without ckpt sync failed",
            "checkpoint folder put back as the save left it", "rehearse: ckpt sync ", "rehearse: resume: main_ppo")]
        assert -1 not in said and said == sorted(said), (said, proc.stdout[-5000:])  # all of it, in this order
        assert proc.stdout.count("rehearse: ckpt sync ") == 1, proc.stdout[-5000:]  # the sync ran after, once
        failed = re.search(r"--no-sync: the resume without ckpt sync failed, as on a cluster without shared storage: "
                           r"(.*)", proc.stdout)
        metadata = failed.group(1).startswith("main_ppo exit")
        assert metadata or "trained from step 1 again" in failed.group(1), failed.group(1)
        diagnosed = assert_diagnosed_as(out, "(ckpt_metadata_missing" if metadata else "(ckpt_not_seen_on_resume",
                                        logs=[out / "console.log", out / "console_unsynced.log"])
        assert "verl-ascend ckpt sync" in diagnosed.stdout, diagnosed.stdout[-3000:]
        # ckpt check on each node named what it lacked; ckpt sync; then both pass
        before = re.findall(r"before sync: ckpt check on node (\d) \(\S+\): exit (\d+)(.*)", proc.stdout)
        assert len(before) == 2 and all(code != "0" for _, code, _ in before), before
        assert any("missing on this node" in said or "ckpt_contents.json" in said for *_, said in before), before
        assert re.search(rf"ckpt sync \S+ --all --nodes {hosts['0']} {hosts['1']}: exit 0", proc.stdout), proc.stdout[-3000:]
        after = re.findall(r"after sync: ckpt check on node (\d) \(\S+\): exit (\d+)", proc.stdout)
        assert after == [("0", "0"), ("1", "0")], after
        synced = (out / "node_files.txt").read_text().split("# after ckpt sync")[1]
        for node in ("node0", "node1"):  # what a resume reads, on both nodes before it ran
            assert f"{node} latest_checkpointed_iteration.txt" in synced and f"{node} global_step_1/data.pt" in synced
        # the resume read the synced checkpoint: the rehearsal's own verdict
        for line in ("ok   resume loaded the checkpoint", "ok   resumed run's first step is 2",
                     "ok   resume loaded the weights global_step_1 saved",
                     "ok   the resumed update moved the weights"):
            assert line in proc.stdout, (line, proc.stdout[-3000:])
        assert not any((out / "checkpoints").iterdir())  # the shared path held nothing outside the nodes
        assert_nothing_left(proc, out)
        assert_diagnosed_clean(out, logs=[out / "console.log", out / "console_resume.log"])


@needs_09
def test_check_and_the_multi_node_plan_count_the_recipes_world_alike(tmp_path):
    from subproc import run_cli

    checked = run_cli("check", str(NODES_RECIPE), timeout=300)
    world = re.search(r"^layout: world (\d+);", checked.stdout, re.M)
    assert world, checked.stdout + checked.stderr
    proc = run_cli("rehearse", str(NODES_RECIPE), "--plan", *NODES, "--out", str(tmp_path / "out"), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    changes = (tmp_path / "out" / "changes.txt").read_text()
    said = re.search(r"nodes: the recipe's world (\d+) \(trainer\.nnodes=(\d+) x n_gpus_per_node=(\d+), as "
                     r"`verl-ascend check` counts it\) -> 2 x 1 = 2", changes)
    assert said and said.group(1) == world.group(1) == str(int(said.group(2)) * int(said.group(3))), (said, world)
    assert "trainer.nnodes=2" in (tmp_path / "out" / "commands.txt").read_text()
    assert "ray_kwargs.ray_init.num_cpus" not in (tmp_path / "out" / "commands.txt").read_text()  # Ray is the cluster's
    # nothing refused without a multi-node run: the flags that only act on one say so (exit 2)
    bad = run_cli("rehearse", str(NODES_RECIPE), "--plan", "--no-sync", "--out", str(tmp_path / "out2"), timeout=300)
    assert bad.returncode == 2 and "--nnodes 2" in bad.stderr, bad.stderr

"""``rehearse --nnodes N``: the recipe's multi-node path on this machine, between and around its two runs.

:mod:`.cluster` runs each main_ppo against N Ray nodes with node-local disks. Here, around those runs, the
rehearsal does what a user on a cluster without shared storage does with the checkpoint, through our own
commands and their own code paths (only the transport is local, :mod:`.nodeshell`):

1. after the save, list which files exist on which node (``node_files.txt``);
2. ``verl-ascend ckpt check`` on each node, in that node's view: it names what is missing where;
3. with ``--no-sync``, first a resume from what each node holds, unsynced: it fails as on such a cluster (its log
   for ``diagnose``); the nodes' disks are then put back as the save left them;
4. ``verl-ascend ckpt sync`` between the nodes, then ``ckpt check`` again;
5. the resume runs from what the nodes then hold.

Each step runs as a run of its own (``trainer.step``: marked, in its PID namespace, ended with ``rehearse``).
What crossed to the other nodes is judged in ``verdict/nodes.py``.
"""

import dataclasses
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

from verl_ascend.core import runlog
from verl_ascend.rehearse.run import nodes, nodeshell, trainer


@dataclasses.dataclass
class Cluster:
    nnodes: int
    head_ip: str
    nodes_dir: Path
    node_local: list  # absolute paths every node has its own copy of
    spec_path: Path
    subnet: str  # worker node k is SUBNET.(k+1)

    @property
    def hosts(self) -> list:
        return [nodes.node_ip(i, self.head_ip, self.subnet) for i in range(self.nnodes)]

    def node_copy(self, index: int, path) -> Path:
        return nodes.node_copy(self.nodes_dir, index, path)

    def ssh(self) -> str:
        return nodeshell.ssh_command(str(self.nodes_dir), self.node_local, {h: i for i, h in enumerate(self.hosts)})

    def prefix(self) -> list:
        return [sys.executable, "-m", "verl_ascend.rehearse.run.cluster", str(self.spec_path), "--"]


def head_address() -> str:
    """This machine's address as Ray's nodes and drivers see it (what a head node registers as)."""
    from ray.util import get_node_ip_address

    return get_node_ip_address()


def prepare(nnodes: int, nproc: int, out: Path, ckpt_dir: Path, ray_tmp: str, fault: str = "") -> Cluster:
    """The spec :mod:`.cluster` reads (it makes the node folders and the mount points it binds them over)."""
    nodes_dir = out / "nodes"
    node_local = [str(ckpt_dir), ray_tmp]
    head_ip = head_address()
    subnet = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}"  # two rehearsals on a host never share one
    spec = {"subnet": subnet, "nnodes": nnodes, "gpus_per_node": nproc, "cpus_per_node": 16, "ray_tmp": ray_tmp, "head_ip": head_ip,
            "node_local": node_local, "nodes_dir": str(nodes_dir), "log_dir": str(out), "node_keeps": list(runlog.MARKS),
            "fault": fault}
    spec_path = out / "cluster.json"  # commands.txt names it: it outlives the run's temp folder
    spec_path.write_text(json.dumps(spec, indent=1))
    return Cluster(nnodes, head_ip, nodes_dir, node_local, spec_path, subnet)


def node_files(cluster: Cluster, ckpt_dir: Path) -> dict:
    """{node index: sorted paths (relative to the checkpoint folder) of the files that node holds}."""
    found = {}
    for index in range(cluster.nnodes):
        root = cluster.node_copy(index, ckpt_dir)
        found[index] = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return found


def _kinds(files: list) -> str:
    shards = [f for f in files if re.search(r"__\d+_\d+\.distcp$|_rank_\d+\.pt$", f)]
    tracker = "tracker" if "latest_checkpointed_iteration.txt" in files else "no tracker"
    data = sum(f.endswith("/data.pt") for f in files)
    meta = sum(f.endswith(("/.metadata", "/common.pt", "/metadata.json")) for f in files)
    return (f"{len(files)} file(s): {tracker}, {data} data.pt, {meta} dist-checkpoint index file(s) "
            f"(.metadata/common.pt/metadata.json), {len(shards)} rank shard(s)")


def list_files(cluster: Cluster, ckpt_dir: Path, out: Path, when: str) -> dict:
    """Print and keep (``node_files.txt``) which checkpoint files each node holds."""
    found = node_files(cluster, ckpt_dir)
    lines = [f"# {when}: files under {ckpt_dir} on each node (node k's disk: {cluster.nodes_dir}/node<k>)"]
    for index, files in found.items():
        print(f"rehearse: {when}: node {index} ({cluster.hosts[index]}) holds {_kinds(files)}", flush=True)
        lines += [f"node{index} {f}" for f in files]
    with open(out / "node_files.txt", "a") as fh:
        fh.write("\n".join(lines) + "\n")
    return found


def _cli(*args, timeout=900) -> subprocess.CompletedProcess:
    return trainer.step([sys.executable, "-m", "verl_ascend", *args], args[0] + "-" + args[1], timeout)


def check_each(cluster: Cluster, ckpt_dir: Path, when: str) -> list:
    """``ckpt check`` run on each node, in its own view; [(exit code, what it said first)] per node."""
    results = []
    for index, host in enumerate(cluster.hosts):
        proc = trainer.step(nodeshell.argv_for(str(cluster.nodes_dir), cluster.node_local,
                                               {host: index}, [host, sys.executable, "-m", "verl_ascend", "ckpt",
                                                               "check", str(ckpt_dir)]), f"ckpt-check-node{index}", 900)
        said = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        first = next((line for line in said if re.match(r"(error|warning|ERROR|WARNING)\b", line)), said[0] if said else "")
        print(f"rehearse: {when}: ckpt check on node {index} ({host}): exit {proc.returncode}"
              + (f": {first[:300]}" if proc.returncode else ""), flush=True)
        results.append((proc.returncode, "\n".join(said)))
    return results


def sync(cluster: Cluster, ckpt_dir: Path) -> tuple:
    """``ckpt sync`` between the nodes, over :mod:`.nodeshell`; (exit code, its output)."""
    # --all: which node each rank lands on is Ray's choice on every run (in this project's runs rank 0 moved
    # between nodes), and a Megatron rank also reads replicated tensors from other ranks' shards
    proc = _cli("ckpt", "sync", str(ckpt_dir), "--all", "--nodes", *cluster.hosts, "--ssh", cluster.ssh())
    text = (proc.stdout + proc.stderr).strip()
    print(f"rehearse: ckpt sync {ckpt_dir} --all --nodes {' '.join(cluster.hosts)}: exit {proc.returncode}", flush=True)
    for line in text.splitlines()[-12:]:
        print(f"  {line}", flush=True)
    return proc.returncode, text


def between_runs(cluster: Cluster, ckpt_dir: Path, out: Path, unsynced=None) -> str:
    """What a user without shared storage does between the save and the resume; '' when the nodes then hold a
    checkpoint a resume can read, else why not. ``unsynced`` (``--no-sync``): a callable that runs the resume
    first from what each node holds and returns ``(failed, how)``; see :func:`resume_unsynced`."""
    files = list_files(cluster, ckpt_dir, out, "after the save")
    if not all(files.values()):
        empty = [str(i) for i, f in files.items() if not f]
        return f"node(s) {', '.join(empty)} hold no checkpoint file: the save did not reach every node's disk"
    before = check_each(cluster, ckpt_dir, "before sync")
    (out / "ckpt_check_before_sync.txt").write_text(
        "".join(f"# node {i} ({h}): exit {code}\n{text}\n" for i, (h, (code, text)) in enumerate(zip(cluster.hosts, before))))
    if all(code == 0 for code, _ in before):
        return ("every node's checkpoint is complete before any copy: the nodes' disks were not separate "
                "(a shared folder?), so this rehearsal shows nothing of a cluster without shared storage")
    if unsynced is not None:
        problem = resume_unsynced(cluster, ckpt_dir, out, unsynced)
        if problem:
            return problem
    code, _ = sync(cluster, ckpt_dir)
    if code != 0:
        return f"ckpt sync between the nodes failed (exit {code}; its output is above)"
    list_files(cluster, ckpt_dir, out, "after ckpt sync")
    after = check_each(cluster, ckpt_dir, "after sync")
    bad = [f"node {i} (exit {c})" for i, (c, _) in enumerate(after) if c != 0]
    return f"ckpt check still fails after ckpt sync on {', '.join(bad)}" if bad else ""


def resume_unsynced(cluster: Cluster, ckpt_dir: Path, out: Path, resume) -> str:
    """``--no-sync``: the resume run first on what each node holds, as a cluster without shared storage does when
    nobody copies the checkpoint; '' when it failed so, else why that shows nothing. Each node's checkpoint folder
    is kept aside before and put back after, so the sync and the resume that follow see what the save left (a
    resume that found no tracker trains from scratch and saves over it)."""
    print("rehearse: --no-sync: the resume reads what each node holds (as a cluster without shared storage "
          "does when nobody copies the checkpoint)", flush=True)
    kept = out / ".nodes-as-saved"
    shutil.rmtree(kept, ignore_errors=True)
    for index in range(cluster.nnodes):
        shutil.copytree(cluster.node_copy(index, ckpt_dir), kept / f"node{index}", symlinks=True)
    try:
        failed, how = resume()
    finally:
        for index in range(cluster.nnodes):
            folder = cluster.node_copy(index, ckpt_dir)
            for child in list(folder.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
            shutil.copytree(kept / f"node{index}", folder, symlinks=True, dirs_exist_ok=True)
        shutil.rmtree(kept)
    if not failed:
        return (f"--no-sync: the resume without ckpt sync did not fail ({how}): the nodes' disks were not separate, "
                "so this rehearsal shows nothing of a cluster without shared storage")
    print(f"rehearse: --no-sync: the resume without ckpt sync failed, as on a cluster without shared storage: {how}",
          flush=True)
    print("rehearse: --no-sync: each node's checkpoint folder put back as the save left it; now the fix", flush=True)
    return ""

"""scripts/hccl_check.py under torchrun on CPU (gloo), and its diagnosis when ranks cannot meet."""

import re
import subprocess
import sys
import tempfile

import pytest
import torch
from subproc import ROOT, clean_env, free_port, free_ports

from verl_ascend.doctor import allreduce

pytestmark = pytest.mark.verl_agnostic
SCRIPT = str(ROOT / "scripts" / "hccl_check.py")


def run(cmd, env, timeout=180):
    with tempfile.TemporaryDirectory(prefix="va-cwd-") as cwd:
        return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_two_ranks_under_torchrun_pass_on_gloo():
    env = clean_env(HCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS=1)
    proc = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                "--master_port", str(free_port()), SCRIPT, "--timeout", "60", "--numel", "4096"], env)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-3000:]
    for rank in (0, 1):
        assert f"hccl_check rank {rank}/2 (" in out
        assert [line for line in out.splitlines() if line.startswith(f"hccl_check rank {rank}/2")
                and "gloo all_reduce OK on cpu: sum 3 over 4096 elements" in line]
    assert "all 2 ranks passed (gloo)" in out
    # the node's interface checks ran once (local rank 0), the same ones doctor runs
    assert out.count("network.socket_ifname_pair") == 1 and "HCCL and Gloo use the same interface(s): lo" in out


def test_missing_rank_and_unreachable_master_are_diagnosed_within_the_timeout():
    # rank 0 waits for a rank 1 that never starts; a lone rank 1 looks for a master that is not there
    env = clean_env(WORLD_SIZE=2, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1, MASTER_ADDR="127.0.0.1")
    procs = {}
    ports = free_ports(2)  # two different masters: rank 1 must not find rank 0's store (seen when one port came twice)
    for rank in (0, 1):
        procs[rank] = subprocess.Popen([sys.executable, SCRIPT, "--timeout", "3", "--numel", "8"],
                                       env={**env, "RANK": str(rank), "MASTER_PORT": str(ports[rank])},
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outs = {rank: p.communicate(timeout=300) for rank, p in procs.items()}  # a net; imports are slow on busy CI
    for rank, p in procs.items():
        assert p.returncode == 1, outs[rank]
        assert f"hccl_check rank {rank}/2" in outs[rank][0]
        waited = re.search(r"FAILED in rendezvous after ([0-9.]+) s", outs[rank][0])
        assert waited, outs[rank][0]
        # bounded by --timeout (3 s; the TCPStore client retries once), never a hang
        assert float(waited.group(1)) < 30, outs[rank][0]
    assert "diagnosis: timeout after 3 s in rendezvous: not every one of the 2 ranks arrived" in outs[0][0]
    assert "1/2 clients joined" in outs[0][0]
    assert "diagnosis: cannot reach the rendezvous store at 127.0.0.1:" in outs[1][0]


def test_outside_torchrun_says_how_to_start_it():
    proc = run([sys.executable, SCRIPT], clean_env())
    assert proc.returncode == 2 and "run it under torchrun" in proc.stderr and "RANK" in proc.stderr


def test_result_check_and_diagnoses():
    good = torch.full((6,), 3.0)
    assert allreduce.mismatch(good, 3.0) == ""
    bad = good.clone()
    bad[4] = 2.0
    text = allreduce.mismatch(bad, 3.0)
    assert text.startswith("mismatch: 1 of 6 elements") and "e.g. 2" in text
    env = {"MASTER_ADDR": "h", "MASTER_PORT": "1", "WORLD_SIZE": "16"}
    assert "npu-smi" in allreduce.diagnose("gloo result check", text, env, 5)
    assert "GLOO_SOCKET_IFNAME" in allreduce.diagnose(
        "gloo all_reduce", "RuntimeError: Gloo connectFullMesh failed with [pair.cc:144] no error", env, 5)
    assert "hccn.conf" in allreduce.diagnose(
        "hccl all_reduce", "HCCL function error: hcclCommInitRootInfoConfig(...), error code is 9", env, 5)
    assert "16 ranks" in allreduce.diagnose("stuck in hccl all_reduce", "", env, 5)

"""`verl-ascend rehearse --nnodes 2 --fault worker-node`: the worker node of the shipped 32B recipe's two-node run loses
power mid-step; the rehearsal names the node and what died there, `diagnose` says the same, nothing is left.
A file of its own so that pytest's workers share the multi-node runs (`--dist loadfile`)."""

import re
import tempfile
from pathlib import Path

from rehearsal_helpers import NODES, NODES_RECIPE, assert_diagnosed_as, assert_nothing_left, needs_09, rehearse


@needs_09
def test_a_worker_node_that_dies_mid_step_is_named_and_nothing_is_left_on_either_node():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        out = Path(tmp) / "out"
        proc = rehearse(out, *NODES, "--fault", "worker-node", recipe=NODES_RECIPE)
        assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
        planted = re.search(r"fault planted: node 1 \(worker node 1, (127\.\d+\.\d+\.2)\) lost power: [1-9]\d* process",
                            proc.stdout)
        assert planted, proc.stdout[-3000:]
        victim = planted.group(1)
        # the rehearsal's verdict: the node, and what died there (the actor rank on it among them)
        assert re.search(rf"failed, exit 1: node 1 \(worker node 1, {re.escape(victim)}\) died mid-step: it lost power at "
                         r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}; .*its processes died with it: .*WorkerDict",
                         proc.stderr), proc.stderr[-3000:]
        assert not list((out / "nodes").glob("node*/checkpoints/global_step_*"))
        assert_nothing_left(proc, out)
        assert_diagnosed_as(out, f"(ray_node_died: {victim})")

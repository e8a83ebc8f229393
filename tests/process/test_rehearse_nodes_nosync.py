"""`verl-ascend rehearse --nnodes 2 --no-sync`: the shipped 32B recipe resumed on two nodes whose disks were never
synced, as on a cluster without shared storage; `diagnose` on the run's own logs names the failure and `ckpt sync`.
A file of its own so that pytest's workers share the multi-node runs (`--dist loadfile`)."""

import tempfile
from pathlib import Path

from rehearsal_helpers import NODES, NODES_RECIPE, assert_diagnosed_as, assert_nothing_left, needs_09, rehearse


@needs_09
def test_without_the_sync_the_resume_fails_as_on_a_cluster_and_diagnose_names_it():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        out = Path(tmp) / "out"
        proc = rehearse(out, *NODES, "--no-sync", recipe=NODES_RECIPE)
        assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
        assert "--no-sync: the resume reads what each node holds" in proc.stdout
        assert "ckpt sync" not in proc.stdout.split("--no-sync:")[1].split("rehearse: resume")[0]
        # which of the two failures a cluster without shared storage gives depends on the node Ray puts the trainer
        # on for the resume: the one that holds the tracker (the ranks elsewhere lack the step's metadata), or
        # another (verl finds no tracker and trains from scratch; the rehearsal's own verdict fails it)
        metadata = "main_ppo (resume) failed" in proc.stderr
        assert metadata or "FAIL resume loaded the checkpoint" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert_nothing_left(proc, out)
        diagnosed = assert_diagnosed_as(out, "(ckpt_metadata_missing" if metadata else "(ckpt_not_seen_on_resume")
        assert "verl-ascend ckpt sync" in diagnosed.stdout, diagnosed.stdout[-3000:]

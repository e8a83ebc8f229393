"""rehearse/loop/fault.py: when a planted loop fault strikes (the first optimizer step after a checkpoint, as the
rank's own node sees the checkpoint folder)."""

import pytest

from verl_ascend.rehearse.loop import fault

pytestmark = pytest.mark.verl_agnostic


def test_a_checkpoint_is_seen_by_the_tracker_or_on_a_node_without_it_by_the_step_folder(tmp_path):
    assert fault.saved_step(str(tmp_path / "missing")) is None
    assert fault.saved_step(str(tmp_path)) is None
    # node-local disks: the tracker is on the trainer's node only; a rank elsewhere sees its own shards' folder
    (tmp_path / "global_step_1" / "actor").mkdir(parents=True)
    (tmp_path / "global_step_10").mkdir()
    (tmp_path / "global_step_x").mkdir()
    assert fault.saved_step(str(tmp_path)) == "10"
    (tmp_path / fault.TRACKER).write_text("1\n")
    assert fault.saved_step(str(tmp_path)) == "1"


def test_the_fault_waits_for_the_checkpoint_step_it_is_told():
    var = "VERL_ASCEND_REHEARSE_FAULT"
    assert fault.wanted(fault.env("kill-worker", "/ck")) == ("kill-worker", "/ck", 1)
    assert fault.env("kill-worker", "/ck", 2) == {var: "kill-worker/2@/ck"}
    assert fault.wanted(fault.env("kill-worker", "/ck", 2)) == ("kill-worker", "/ck", 2)
    assert fault.wanted({var: "worker-node@after-step-1"}) is None  # the node fault is cluster.py's
    assert fault.wanted({}) is None

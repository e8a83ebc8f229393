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

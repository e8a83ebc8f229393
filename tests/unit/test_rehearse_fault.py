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


def test_the_hang_checks_show_the_stopped_ranks_line_and_fail_without_one(tmp_path):
    from types import SimpleNamespace

    from verl_ascend.rehearse import supervised
    from verl_ascend.supervise import decide

    # an evidence summary as supervise writes it: the stopped rank's line, then the others (the last line is not it)
    (tmp_path / "summary.txt").write_text(
        "pid 11 (ray::WorkerDict.actor_rollout_ref_update_actor) is STOPPED (state T), at optimizer_step (x.py:1)\n"
        "pid 12 (ray::WorkerDict.actor_rollout_ref_update_actor) waits in all_reduce (torch/distributed/c.py:3)\n"
        "pid 13 (python) is elsewhere: LogFileInfo.reopen_if_necessary (ray/_private/log_monitor.py:83)\n")
    first = SimpleNamespace(retry_class=decide.TRANSIENT, decision=decide.RETRY, detected="hang", family="hang",
                            detection_latency_s=28.1, evidence=str(tmp_path))
    hang = SimpleNamespace(code="hang", details={"elapsed_s": 30.0, "budget_s": 30.0}, message="step 2: 30 s")
    rep = SimpleNamespace(attempts=[first, SimpleNamespace()], findings=[hang], exit=decide.EXIT_DONE, state="done",
                          reason="finished at step 2")
    named = next(c for c in supervised.expected("hang-rank", rep) if c.name == "the evidence names the stopped rank")
    assert named.ok and named.figure.startswith("pid 11 (ray::WorkerDict") and "STOPPED" in named.figure
    (tmp_path / "summary.txt").write_text("pid 13 (python) is elsewhere: LogFileInfo.reopen_if_necessary\n")
    named = next(c for c in supervised.expected("hang-rank", rep) if c.name == "the evidence names the stopped rank")
    assert not named.ok and named.figure.startswith("pid 13 (python)")

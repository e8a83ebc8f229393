"""supervise's detectors on recorded timelines: real verl step lines (tests/fixtures/verl_steps.log, the field
report's 47-minute steps) and real failure lines from diagnose's fixtures, at times the test chooses."""

from pathlib import Path

import pytest

from verl_ascend.supervise import detect, timeline

pytestmark = pytest.mark.verl_agnostic

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STEPS = (FIXTURES / "verl_steps.log").read_text().splitlines()[:6]  # start, scratch, steps 1-3 (and a rank's INFO)
NODE_DEAD = (FIXTURES / "diagnose/public/verbatim/ray_nodes_marked_dead.log").read_text().splitlines()[0]
ACTOR_DIED = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
EXEC_TIMEOUT = (FIXTURES / "diagnose/exec_timeout.log").read_text().splitlines()[2]
# the field report's step 1 phases: the longest of steps 1-3 sum to its 2814 s
LONGEST = 1549.54 + 1.98 + 484.44 + 133.77 + 0.2 + 644.05


def run(at=100.0, lines=STEPS, every=10.0):
    """The fixture's lines 10 s apart from t=0, the last step line at 60 s, the snapshot taken at ``at``."""
    return timeline.recorded(lines, every=every, now=at)


def test_the_step_lines_are_read_with_their_phases():
    snap = run()
    steps = timeline.steps(snap)
    assert [s.step for s in steps] == [1, 2, 3]
    assert timeline.longest_phases(steps)["gen"] == pytest.approx(1549.54, abs=0.01)
    assert timeline.resumed_from(snap) == 0  # "Training from scratch"


def test_a_step_is_overdue_at_k_times_its_longest_phases_and_not_before():
    assert detect.SAFETY_FACTOR == 5.0  # nvidia-resiliency-ext FaultToleranceConfig.safety_factor
    budget = detect.SAFETY_FACTOR * LONGEST
    last = 60.0  # step 3's line
    quiet = dict(lines=STEPS, every=10.0)
    assert detect.hang(run(at=last + budget - 1, **quiet)) is None
    found = detect.hang(run(at=last + budget + 1, **quiet))
    assert found.code == "hang" and found.details["phase"] == "step 4"
    assert found.details["budget_s"] == pytest.approx(budget, rel=1e-3)
    assert "5 x the longest phases" in found.details["budget_from"]


def test_hang_after_replaces_the_learned_budget_and_the_floor_bounds_a_short_one():
    snap = run(at=60.0 + 301)
    assert detect.hang(snap, detect.Budgets(hang_after=300)).details["budget_s"] == 300
    tiny = ["step:1 - timing_s/gen:1.0 - timing_s/update_actor:1.0 - timing_s/step:2.5"]
    found = detect.hang(timeline.recorded(tiny, every=1.0, now=1.0 + 121), detect.Budgets(floor=120))
    assert found.details["budget_s"] == 120 and "floor" in found.details["budget_from"]


def test_no_hang_while_something_moves():
    budgets = detect.Budgets(hang_after=300, quiet=120)
    late = 60.0 + 400
    for what in ("line", "cpu", "ckpt"):
        snap = run(at=late)
        if what == "line":
            snap.lines.append((late - 5, "(WorkerDict pid=2301) rollout 95% done"))
        elif what == "cpu":  # one rank busy: 30 CPU-s over 60 s
            snap.cpu = [(late - 60, {7: 100.0, 8: 5.0}), (late, {7: 130.0, 8: 5.0})]
        else:
            snap.ckpt = [(late - 60, 10 << 30), (late, 11 << 30)]
        assert detect.hang(snap, budgets) is None, what
    # and the same snapshot without the movement is a hang: idle processes (a few % of a core) do not count
    snap = run(at=late)
    snap.cpu = [(late - 60, {7: 100.0, 8: 5.0}), (late, {7: 101.0, 8: 5.1})]
    snap.ckpt = [(late - 60, 10 << 30), (late, 10 << 30)]
    found = detect.hang(snap, budgets)
    assert found is not None and found.details["moved"]["cpu_measured"] and not found.details["moved"]["busy"]


def test_the_save_has_its_own_budget_from_the_moment_it_announces_itself():
    saving = STEPS + ["(TaskRunner pid=11069) local_global_step_folder: /ckpt/global_step_4"]
    with_save = saving[:2] + [STEPS[2].replace("timing_s/step:", "timing_s/save_checkpoint:30.0 - timing_s/step:")] + saving[3:]
    snap = timeline.recorded(with_save, every=10.0, now=70.0 + 151)  # the save line at 70 s
    found = detect.hang(snap, detect.Budgets(floor=60))
    assert found.details["phase"] == "save_checkpoint" and found.details["budget_s"] == 150  # 5 x 30 s
    assert detect.hang(timeline.recorded(with_save, every=10.0, now=70.0 + 149), detect.Budgets(floor=60)) is None


def test_before_the_first_step_the_start_up_budget_counts():
    snap = timeline.recorded(STEPS[:2], every=10.0, now=3601.0)
    found = detect.hang(snap)
    assert found.details["phase"] == "start-up" and found.details["budget_s"] == 3600
    # an earlier attempt that took 1000 s to its first step teaches 5000 s
    assert detect.hang(snap, startup_seen=1000.0) is None
    assert detect.hang(timeline.recorded(STEPS[:2], every=10.0, now=5001.0), startup_seen=1000.0) is not None


@pytest.mark.parametrize("line, family", [(NODE_DEAD, "ray_node_died"), (ACTOR_DIED, "ray_actor_died")])
def test_rays_verdicts_count_at_once_while_the_command_lives(line, family):
    snap = timeline.recorded(STEPS + [line], every=10.0)
    found = detect.live_failure(snap)
    assert found.code == "crash_line" and found.details["family"] == family


def test_other_failure_lines_count_after_the_grace_without_a_step():
    lines = STEPS + [EXEC_TIMEOUT]
    at = 70.0
    assert detect.live_failure(timeline.recorded(lines, every=10.0, now=at + 59)) is None
    found = detect.live_failure(timeline.recorded(lines, every=10.0, now=at + 61))
    assert found.details["family"] == detect.family_of(EXEC_TIMEOUT) != None  # noqa: E711
    # a step after it: the run went on, the line was handled
    went_on = lines + [STEPS[2].replace("step:1 ", "step:4 ")]
    assert detect.live_failure(timeline.recorded(went_on, every=10.0, now=at + 200)) is None
    # an ordinary error line (no family) never counts while the command lives
    assert detect.live_failure(timeline.recorded(STEPS + ["ValueError: bad"], every=10.0, now=1e6)) is None


def test_exits():
    snap = run()
    snap.exit_code, snap.ended = 1, 100.0
    assert detect.exited(snap).details["exit_code"] == 1
    snap.exit_code = 0
    assert detect.exited(snap, total_steps=3) is None  # the last step reached
    found = detect.exited(snap, total_steps=10)  # verl issue 7401's shape: exit 0, steps left
    assert found.code == "incomplete_exit" and found.details["last_step"] == 3 and "7401" in found.fix
    assert detect.exited(snap, total_steps=10, tracker_step=10) is None  # the tracker says it finished
    assert detect.exited(run()) is None  # alive


def test_health_is_reported_and_stops_only_when_asked():
    nan = STEPS + ["step:4 - actor/pg_loss:nan - critic/rewards/mean:0.5 - timing_s/step:10.0"]
    snap = timeline.recorded(nan, every=10.0)
    assert [f.severity for f in detect.health(snap) if f.code == "nan"] == ["warning"]
    assert [f.severity for f in detect.health(snap, stop_on=("nan",)) if f.code == "nan"] == ["error"]
    rewards = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.1, 0.1, 0.1, 0.1]
    collapse = [f"step:{i} - critic/rewards/mean:{r} - timing_s/step:10.0" for i, r in enumerate(rewards, 1)]
    found = detect.health(timeline.recorded(collapse), stop_on=("reward_collapse",))
    assert [(f.code, f.severity) for f in found] == [("reward_collapse", "error")]


def test_a_snapshot_survives_its_json_form():
    snap = run()
    snap.cpu = [(1.0, {7: 2.0})]
    again = timeline.Snapshot.from_dict(snap.as_dict())
    assert again == snap


def test_a_hang_the_head_sees_is_held_back_while_a_rank_works_on_another_node():
    budget = detect.SAFETY_FACTOR * LONGEST
    found = detect.hang(run(at=60.0 + budget + 1))
    # the other nodes' answers as `python -m verl_ascend.supervise.evidence --cpu-only` gives them
    working = {"node1": {"processes": [{"pid": 7, "name": "ray::WorkerDict", "state": "R", "cpu_rate": 0.97},
                                       {"pid": 8, "name": "raylet", "state": "S", "cpu_rate": 0.01}]},
               "node2": {"processes": [{"pid": 9, "name": "ray::WorkerDict", "state": "S", "cpu_rate": 0.0}]}}
    assert detect.busy_elsewhere(working, 0.5) == {"node1": [(7, "ray::WorkerDict", 0.97)]}
    assert detect.confirm_hang(found, working, 0.5) is None  # the phase goes on over there
    said = detect.held_back(found, detect.busy_elsewhere(working, 0.5), 20.0)
    phase = found.message.partition("; ")[0]  # the head's phase and budget; its "nothing busy" is not repeated
    assert phase.startswith("step 4: ") and "over its budget" in phase and "no console line" not in phase, found.message
    assert said == f"{phase}, but the run works on another node: node1: pid 7 (ray::WorkerDict) uses 0.97 core; " \
                   "looking again in 20 s", said
    quiet = {"node1": {"processes": [{"pid": 7, "name": "ray::WorkerDict", "state": "S", "cpu_rate": 0.02},
                                     {"pid": 10, "name": "gone"}]},  # a process gone during the sample: no rate
             "node2": {"error": "ssh: connect to host node2 port 22: No route to host — fix: ..."}}
    confirmed = detect.confirm_hang(found, quiet, 0.5)
    assert confirmed.code == "hang" and confirmed.message.startswith(found.message)
    assert confirmed.message.endswith("; no process of the run busy on node1 either; not reached: node2")
    assert confirmed.details["other_nodes"] == {"quiet": ["node1"], "not_reached": {"node2": quiet["node2"]["error"]}}
    assert detect.confirm_hang(found, {}, 0.5) is found  # one node: the head's evidence is all there is

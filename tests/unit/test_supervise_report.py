"""supervise's report (time lost, goodput, steps recomputed, report.json as state), the evidence summary, the
launch helpers and the CLI's bad input."""

import json
import os

import pytest

from verl_ascend import cli
from verl_ascend.proc import info
from verl_ascend.supervise import evidence, launch
from verl_ascend.supervise import report as R
from verl_ascend.supervise import run as supervise_run

pytestmark = pytest.mark.verl_agnostic


def attempts():
    # attempt 1 trains steps 1-5 (100 s each) from t=0, saved at 3, dies; attempt 2 resumes from 3, trains 4-8
    a1 = R.Attempt(1, ["x"], "a1.log", started=0.0, ended=700.0, first_step_at=200.0, first_step=1, last_step=5,
                   step_seconds={s: 100.0 for s in range(1, 6)}, failed_at=650.0, detected_at=690.0, resumed_from=0,
                   tracker=3)
    a2 = R.Attempt(2, ["x"], "a2.log", started=760.0, ended=1460.0, first_step_at=960.0, first_step=4, last_step=8,
                   step_seconds={s: 100.0 for s in range(4, 9)}, resumed_from=3, tracker=8)
    return [a1, a2]


def test_time_lost_goodput_and_steps_recomputed():
    t = R.totals(attempts())
    assert t["steps_recomputed"] == 2 and R.recomputed(attempts()) == [[], [4, 5]]
    assert t["kept_training_s"] == 800.0 and t["wall_s"] == 1460.0
    assert t["time_lost_s"] == 660.0 and t["goodput"] == pytest.approx(800 / 1460, abs=1e-3)
    a1, a2 = attempts()
    a1.tracker = 2  # the step-3 save was damaged and the relaunch went on from step 2: step 3's training is lost
    assert R.totals([a1, a2])["kept_training_s"] == 700.0
    assert a1.detection_latency_s == 40.0 and a2.to_first_step_s == 200.0


def test_steps_trained_after_the_last_save_are_not_kept():
    # the deadline ends a run at step 58 whose last save was step 40; with no save at all nothing is kept
    run = R.Attempt(1, ["x"], "a.log", started=0.0, ended=300.0, step_seconds={s: 4.0 for s in range(1, 59)},
                    tracker=40)
    assert R.totals([run])["kept_training_s"] == 160.0
    run.tracker = None
    assert R.totals([run])["kept_training_s"] == 0.0 and R.totals([run])["goodput"] == 0.0
    run.ended = None  # still running: its steps count until it ends
    assert R.totals([run], now=300.0)["kept_training_s"] == 232.0


def test_report_json_is_the_envelope_written_whole_and_read_back(tmp_path, capsys):
    rep = R.Report(str(tmp_path), ["bash", "r.sh"], state=R.STOPPED, exit=93, reason="crash loop", attempts=attempts())
    rep.write()
    assert sorted(os.listdir(tmp_path)) == [R.NAME]  # no temp file left beside it
    d = json.loads((tmp_path / R.NAME).read_text())
    assert (d["schema"], d["command"], d["supervisor_exit"], d["state"]) == (3, "supervise", 93, "stopped")
    assert d["attempts"][1]["steps_recomputed"] == 2 and d["totals"]["restarts"] == 1
    again = R.read(str(tmp_path))
    assert [a.step_seconds for a in again.attempts] == [a.step_seconds for a in attempts()]
    assert R.status(str(tmp_path)) == 93
    assert "time lost 660.0 s" in capsys.readouterr().out


def test_a_restarted_supervisor_picks_up_the_attempt_that_still_runs_and_not_a_dead_one(tmp_path):
    me = os.getpid()
    live = R.Attempt(1, ["x"], "a.log", pid=me, pid_start=info.start_of(me), mark="V=1", started=1.0)
    R.Report(str(tmp_path), ["x"], attempts=[live]).write()
    sup = supervise_run.Supervisor(["x"], {}, str(tmp_path), supervise_run.Options(str(tmp_path)), {})
    assert sup.resume_state().number == 1
    gone = R.Attempt(1, ["x"], "a.log", pid=me, pid_start="1", mark="V=1", started=1.0)  # a reused pid
    R.Report(str(tmp_path), ["x"], attempts=[gone]).write()
    sup = supervise_run.Supervisor(["x"], {}, str(tmp_path), supervise_run.Options(str(tmp_path)), {})
    assert sup.resume_state() is None and sup.report.attempts[0].detected == "supervisor_gone"


STACK = """Process 42: python3 train.py
Python v3.12.3 (/usr/bin/python3.12)

Thread 42 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2806)
    update_actor (verl/workers/fsdp_workers.py:700)
"""


def test_the_evidence_names_the_stopped_rank_and_the_one_elsewhere():
    assert evidence.top_frame(STACK) == "all_reduce (torch/distributed/distributed_c10d.py:2806)"
    procs = [{"pid": p, "name": "ray::WorkerDict", "state": "S", "top": evidence.top_frame(STACK)} for p in (1, 2, 3)]
    procs.append({"pid": 4, "name": "ray::WorkerDict", "state": "T", "top": "forward (model.py:10)"})
    procs.append({"pid": 5, "name": "ray::WorkerDict", "state": "R", "top": "_compute_loss (losses.py:88)"})
    lines = evidence.odd_ones(procs)
    assert lines[0].startswith("pid 4 (ray::WorkerDict) is STOPPED")
    assert "3 of 4 processes wait (all_reduce x3)" in lines[1]
    assert "pid 1 (ray::WorkerDict) waits in all_reduce (torch/distributed/distributed_c10d.py:2806)" in lines
    assert lines[-1] == "pid 5 (ray::WorkerDict) is elsewhere: _compute_loss (losses.py:88)"
    # all in the collective: nobody named elsewhere
    assert not any("elsewhere" in line for line in evidence.odd_ones(procs[:3]))


RAY_WORKER = """Process 7: ray::WorkerDict.actor_rollout_ref_update_actor
Python v3.12.1 (/usr/bin/python3.12)

Thread 1 (active): "MainThread"
    Worker.main_loop (ray/_private/worker.py:1069)
    <module> (ray/_private/workers/default_worker.py:323)
Thread 2 (active): "PythonGCThread"
    Condition.wait (threading.py:355)
    Thread._bootstrap (threading.py:1030)
Thread 3 (active): "AsyncIO Thread: default"
    all_reduce (torch/distributed/distributed_c10d.py:3014)
    TrainingWorker.train_batch (verl/workers/engine_workers.py:385)
    ActorRolloutRefWorker.update_actor (verl/workers/engine_workers.py:714)
    BaseEventLoop.run_forever (asyncio/base_events.py:638)
    Thread._bootstrap (threading.py:1030)
"""


def test_a_ray_actors_place_is_the_thread_that_runs_its_task_and_an_idle_actor_is_not_named():
    # py-spy's dump of verl 0.9.1's rank 1 while rank 0 was SIGSTOPped (rehearse --supervise --fault hang-rank)
    assert evidence.top_frame(RAY_WORKER) == "all_reduce (torch/distributed/distributed_c10d.py:3014)"
    idle = RAY_WORKER.split("Thread 3")[0]
    assert evidence.top_frame(idle) == "Worker.main_loop (ray/_private/worker.py:1069)"
    procs = [{"pid": 7, "name": "rank 1", "state": "S", "top": evidence.top_frame(RAY_WORKER)},
             {"pid": 8, "name": "reward", "state": "S", "top": evidence.top_frame(idle)},
             {"pid": 9, "name": "rank 0", "state": "T", "top": "pre_step (fault.py:60)"}]
    assert evidence.odd_ones(procs) == ["pid 9 (rank 0) is STOPPED (state T), at pre_step (fault.py:60)",
                                        "1 of 1 processes wait (all_reduce x1)",
                                        "pid 7 (rank 1) waits in all_reduce (torch/distributed/distributed_c10d.py:3014)"]


def test_a_relaunch_resumes_and_a_deadline_makes_verl_save_first():
    argv = ["python3", "-m", "verl.trainer.main_ppo", "trainer.resume_mode=disable", "trainer.save_freq=5"]
    assert launch.is_trainer_line(argv) and not launch.is_trainer_line(["bash", "x.sh"])
    assert launch.script_of(["bash", "x.sh"]) == "x.sh" and launch.script_of(argv) is None
    assert launch.with_overrides(argv, launch.resume_overrides()) == argv[:3] + ["trainer.save_freq=5",
                                                                                  "trainer.resume_mode=auto"]
    env, over = launch.deadline_overrides(2_000_000_000.0, save_s=600.0)
    assert env == {launch.EXPIRATION_VAR: "2000000000"}
    assert "trainer.esi_redundant_time=600" in over  # 600 s save - verl's 60 s guess + 60 s margin
    assert any(o.startswith("++ray_kwargs.ray_init.runtime_env.env_vars.") for o in over)


def test_bad_input_is_exit_2_naming_the_value_and_the_fix(tmp_path, capsys):
    with pytest.raises(launch.BadCommand, match=r"trainer.save_freq=-1.*set trainer.save_freq"):
        launch.check(["bash", "r.sh"], {"save_freq": -1})
    assert cli.main(["supervise"]) == 2
    assert "no command given" in capsys.readouterr().err
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert cli.main(["supervise", "--run-dir", str(blocked / "run"), "--", "true"]) == 2
    assert f"--run-dir {blocked / 'run'}" in capsys.readouterr().err
    assert cli.main(["supervise", "--status", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli.main(["supervise", "--stop-on", "nans", "--run-dir", str(tmp_path / "r"), "--", "true"]) == 2
    assert "--stop-on nans" in capsys.readouterr().err
    assert cli.main(["supervise", "--deadline", "tomorrow", "--", "true"]) == 2
    assert "--deadline tomorrow" in capsys.readouterr().err

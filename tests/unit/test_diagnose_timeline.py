"""`verl-ascend diagnose` reads the run as a timeline (#35 item 1): progress as well as errors.

The healthy logs are real: main_ppo console logs of our own rehearsals (tests/fixtures/diagnose/rehearsal/,
README there), each ending in a teardown traceback after `Training Progress: 100%`. The failing variants
are those logs cut or extended in the test, so the surrounding output is a real run's.
"""

import json
from pathlib import Path

import pytest
from test_diagnose import cli_run, diagnose

from verl_ascend.diagnose import scan, table, timeline

pytestmark = pytest.mark.verl_agnostic
FIX = Path(__file__).parents[1] / "fixtures" / "diagnose"
REHEARSAL = FIX / "rehearsal"
HEALTHY = sorted(p.name for p in REHEARSAL.glob("*.log"))
EI0002 = ("(WorkerDict pid=395) [rank0]: EI0002: [PID: 395] 2026-12-04-02:40:00.000.000 The wait execution of the "
          "Notify register times out. Reason: The Notify register has not received the Notify record from remote "
          "rank [1].")
HANDLED = ("(TaskRunnerV1 pid=190) 2026-12-04 02:12:31,000 ERROR registry.py:120 -- Error in inspecting model "
           "architecture 'Qwen2ForCausalLM'")
HANDLED_EXC = "(TaskRunnerV1 pid=190) ModuleNotFoundError: No module named 'vllm._C'"


def lines(name):
    return (REHEARSAL / name).read_text().splitlines(keepends=True)


def index_of(text_lines, needle, last=False):
    found = [i for i, line in enumerate(text_lines) if needle in line]
    assert found, needle
    return found[-1] if last else found[0]


def test_there_are_real_healthy_rehearsal_logs():
    assert len(HEALTHY) >= 7
    for name in HEALTHY:
        text = (REHEARSAL / name).read_text()
        assert "step:" in text and "Training Progress: 100%" in text
        assert "is killed by signal: Killed." in text  # the teardown line every one of them ends with


@pytest.mark.parametrize("name", HEALTHY)
def test_a_healthy_rehearsal_log_is_clean_and_its_teardown_is_named(name, capsys):
    path = REHEARSAL / name
    result = diagnose(path)
    assert result["exit_code"] == 0 and result["findings"] == [], [f["where"]["text"] for f in result["findings"]]
    (run,) = result["runs"]
    assert run["finished"] and run["last_step"] >= 1
    noise = [w["text"] for w in result["shutdown_noise"]]
    if "Exception ignored in" not in "".join(lines(name)[-20:]):  # else the older rule already silences it
        assert any("DataLoader worker" in t for t in noise), noise
    code, out, err = cli_run(capsys, "diagnose", "--verbose", str(path))
    assert code == 0 and out.startswith("no known failure"), out
    assert "reached its end after step" in out
    if noise:
        assert "shutdown noise:" in out and "DataLoader worker" in out


# r7c's third run found no tracker (removed between the runs, as a node-local disk loses it) and trained from
# scratch into the folder r7c's first two runs had saved to: each log is healthy alone, together they say the
# resume did not see the checkpoint
SCRATCH_AFTER_SAVE = "r7c_console_scratch.log"
FAMILIES_SHOWN = {"ckpt_not_seen_on_resume"}  # read by test_diagnose_public's coverage check


def test_all_healthy_logs_together_are_clean(capsys):
    code, out, err = cli_run(capsys, "diagnose", *[REHEARSAL / n for n in HEALTHY if n != SCRATCH_AFTER_SAVE])
    assert code == 0, out


def test_a_run_from_scratch_into_a_folder_an_earlier_run_saved_to_is_named_with_the_save(capsys):
    logs = [REHEARSAL / n for n in ("r7c_console.log", "r7c_console_resume.log", SCRATCH_AFTER_SAVE)]
    result = diagnose(*logs)
    assert result["exit_code"] == 1
    assert [f["code"] for f in result["findings"]] == ["ckpt_not_seen_on_resume"]
    found = result["findings"][0]
    assert found["where"]["file"].endswith(SCRATCH_AFTER_SAVE) and "Training from scratch" in found["where"]["text"]
    # the latest save before it, from the resume run's own log
    assert any("/tmp/r7c/checkpoints/global_step_3 (" in n and "r7c_console_resume.log" in n
               for n in found["details"]["notes"]), found["details"]["notes"]
    assert "verl-ascend ckpt sync" in found["fix"]
    # the same logs without the earlier saves: a first run from scratch is no failure
    assert diagnose(REHEARSAL / SCRATCH_AFTER_SAVE)["exit_code"] == 0
    assert diagnose(REHEARSAL / "r7b_console.log", REHEARSAL / SCRATCH_AFTER_SAVE)["exit_code"] == 0  # another folder


def test_the_same_log_cut_before_its_end_fails_on_the_teardown_line(tmp_path):
    """Without the end marks the DataLoader line is the last word of the run: then it is the failure."""
    kept = [line for line in lines("r7c_console.log")
            if "Training Progress: 100%" not in line and "Final validation metrics" not in line]
    log = tmp_path / "cut.log"
    log.write_text("".join(kept))
    result = diagnose(log)
    assert result["exit_code"] == 1
    assert result["first_failure"]["family"] == table.UNRECOGNISED
    assert "DataLoader worker" in result["first_failure"]["text"]
    assert result["first_failure"]["process"] == "TaskRunnerV1" and result["first_failure"]["pid"] == 190
    assert result["runs"][0]["finished"] is False and result["runs"][0]["last_step"] == 2


@pytest.mark.parametrize("code", [0, 1, -9])
def test_the_rehearsals_exit_line_decides_a_run_whose_end_marks_ray_dropped(tmp_path, code):
    """Ray forwards a worker's last prints asynchronously and can drop them at exit: a fresh-clone CI run's DAPO
    resume log lacked its end marks and ended on the DataLoader teardown line (2026-12-04). rehearse writes the
    trainer's exit code last (core.runlog.EXIT_LINE): 0 ends the run cleanly; any other code fails it."""
    from verl_ascend.core.runlog import EXIT_LINE

    kept = [line for line in lines("r7c_console.log")
            if "Training Progress: 100%" not in line and "Final validation metrics" not in line]
    log = tmp_path / "dropped.log"
    log.write_text("".join(kept) + f"{EXIT_LINE}{code} (resume)\n")
    result = diagnose(log)
    if code == 0:
        assert result["exit_code"] == 0 and result["findings"] == [], result["findings"]
        assert result["runs"][0]["finished"] is True
        assert any("DataLoader worker" in w["text"] for w in result["shutdown_noise"] + result.get("handled", []))
    else:
        assert result["exit_code"] == 1 and result["runs"][0]["finished"] is False, result["runs"]
    # a subprocess's own "exited with code 0" mid-log is no end of the run (only the rehearsal's line at a line start)
    log.write_text("".join(kept) + "(WorkerDict pid=1) helper exited with code 0 (x)\n")
    assert diagnose(log)["exit_code"] == 1


def test_a_handled_error_before_the_real_failure_is_a_note_and_the_real_one_is_the_headline(tmp_path, capsys):
    """A logged-and-handled error early in the run, steps after it, then an HCCL timeout nothing follows."""
    text = lines("r7c_console.log")
    start = index_of(text, "Checkpoint tracker file does not exist")
    second = index_of(text, "step:2 - ")
    run = text[:start] + [HANDLED + "\n", HANDLED_EXC + "\n"] + text[start:second] + [EI0002 + "\n"]
    log = tmp_path / "driver.log"
    log.write_text("".join(run))
    result = diagnose(log)
    assert result["exit_code"] == 1
    codes = [f["code"] for f in result["findings"]]
    assert "hccl_exec_timeout" in codes and table.UNRECOGNISED not in codes, codes
    first = result["first_failure"]
    assert first["family"] == "hccl_exec_timeout" and first["rank"] == 0 and first["pid"] == 395
    assert first["process"] == "WorkerDict" and first["time"] == "2026-12-04 02:40:00.000"
    handled = [w["text"] for w in result["handled"]]
    assert any("vllm._C" in t for t in handled), handled
    assert all("step 1" in w["reason"] for w in result["handled"])
    assert result["runs"][0]["finished"] is False and result["runs"][0]["last_step"] == 1
    code, out, err = cli_run(capsys, "diagnose", "-v", str(log))
    assert code == 1 and "first failure: 2026-12-04 02:40:00.000, process WorkerDict, rank 0" in out, out
    assert "handled: " in out and "vllm._C" in out and "stopped after step 1" in out
    # without the steps after it, the same handled error is the failure the run did not survive
    log.write_text("".join(text[:start] + [HANDLED + "\n", HANDLED_EXC + "\n"]))
    result = diagnose(log)  # the ERROR line is the first failing line; the exception under it is quoted with it
    assert result["first_failure"]["text"] == HANDLED, result["first_failure"]
    assert result["findings"][0]["details"]["exception_line"]["text"].endswith("No module named 'vllm._C'")


def test_a_non_zero_exit_after_the_end_fails_the_run(tmp_path):
    log = tmp_path / "driver.log"
    log.write_text("".join(lines("r7c_console.log")) + "Job 'raysubmit_7Lc2' failed\n")
    result = diagnose(log)
    assert result["exit_code"] == 1
    assert "DataLoader worker" in result["first_failure"]["text"]  # the first line after the end: what it died of
    log.write_text("".join(lines("r7c_console.log")) + "Job 'raysubmit_7Lc2' succeeded\n")
    assert diagnose(log)["exit_code"] == 0


def test_a_worker_log_is_placed_by_time_against_the_drivers_progress(tmp_path):
    """A file without progress of its own (a worker's .err) is judged by time: before the driver's last
    progress it was survived, after the driver's end it is teardown, with no driver progress it is fatal."""
    driver = REHEARSAL / "r7c_console.log"
    worker = tmp_path / "worker-4c1f0e2a9b7d-01000000-395.err"
    worker.write_text("2026-12-04 02:12:40,000 ERROR worker.py:1 -- RuntimeError: transient\n")
    result = diagnose(driver, worker)
    assert result["exit_code"] == 0 and [w["line"] for w in result["handled"] if w["file"] == str(worker)] == [1]
    worker.write_text("2026-12-04 02:13:30,000 ERROR worker.py:1 -- RuntimeError: at exit\n")
    result = diagnose(driver, worker)
    assert result["exit_code"] == 0 and any(w["file"] == str(worker) for w in result["shutdown_noise"])
    assert diagnose(worker)["exit_code"] == 1


def test_progress_across_block_boundaries(monkeypatch):
    monkeypatch.setattr(scan, "BLOCK", 256)
    for name in ("r7c_console.log", "rcrit4_console_resume.log"):
        result = diagnose(REHEARSAL / name)
        assert result["exit_code"] == 0 and result["runs"][0]["finished"], name


def test_marks_found_and_not_confused():
    reader = timeline.Reader(lambda raw: raw.decode())
    data = (b"x training/global_step:5 - a:1\n"
            b"(TaskRunner pid=1) step:4 - training/global_step:4 - a:1\n"
            b"(TaskRunner pid=1) 2026-01-01 00:00:01,000 Saving checkpoint to /ckpt/global_step_4\n")
    reader.block("a.log", data, 0, 2026)
    run = reader.runs["a.log"]
    assert run.last.line == 3 and run.step.step == 4 and not run.finished
    assert run.last.when.isoformat() == "2026-01-01T00:00:01"
    reader.block("a.log", b"Training Progress: 100%|##| 4/4\n", 3, 2026)
    assert run.finished and run.end.line == 4
    reader.block("a.log", b"(TaskRunner pid=2) step:5 - a:1\n", 4, 2026)  # a second run appended to the file
    assert not run.finished and run.step.step == 5
    # neither a metric named global_step nor the bar below 100% (tqdm redraws it when the loop dies) is progress
    reader.block("b.log", b"only global_step:3 - a:1 and Training Progress:   0%|\n", 0, 2026)
    assert "b.log" not in reader.runs or (reader.runs["b.log"].step is None and reader.runs["b.log"].last is None)


def test_an_error_before_the_bar_redrawn_by_the_dying_loop_is_the_failure(tmp_path):
    """The shape of a rehearsal whose reward function raised: the reward worker's traceback, then verl's tqdm bar
    drawn once more as the exception leaves the training loop, then Ray's wrapper in the driver. The bar is no
    progress: the planted error is the headline, not Ray's wrapper after it."""
    log = tmp_path / "console.log"
    log.write_text("(TaskRunnerV1 pid=193) Training Progress:   0%|          | 0/1 [00:00<?, ?it/s]\n"
                   "(RewardLoopWorker pid=401) Traceback (most recent call last):\n"
                   '(RewardLoopWorker pid=401)   File "/tmp/raising_reward.py", line 2, in compute_score\n'
                   "(RewardLoopWorker pid=401) ValueError: planted reward fault\n"
                   "(TaskRunnerV1 pid=193) Training Progress:   0%|          | 0/1 [00:12<?, ?it/s]\n"
                   "ray.exceptions.RayTaskError(RuntimeError): ray::TaskRunnerV1.run() (pid=193, ip=192.0.2.2)\n")
    result = diagnose(log)
    assert result["exit_code"] == 1, result
    assert "planted reward fault" in json.dumps(result["first_failure"]), result["first_failure"]


def test_a_subprocess_exit_0_mid_run_is_not_the_end(tmp_path):
    """`exited with exit code 0` of a helper process, then a timeout nothing follows: the timeout is the failure."""
    text = lines("r7c_console.log")
    second = index_of(text, "step:2 - ")
    log = tmp_path / "driver.log"
    log.write_text("".join(text[:second]) + "(TaskRunnerV1 pid=190) reward server process exited with exit code 0\n"
                   + EI0002 + "\n")
    result = diagnose(log)
    assert result["exit_code"] == 1 and result["first_failure"]["family"] == "hccl_exec_timeout"


def test_another_file_s_error_outside_the_run_s_time_is_not_judged_by_it(tmp_path):
    """A worker log from before the run began, or long after its end, is not that run's: it stays a failure."""
    driver = REHEARSAL / "r7c_console.log"
    worker = tmp_path / "worker-4c1f0e2a9b7d-01000000-395.err"
    worker.write_text("2025-03-04 19:28:30,014 ERROR worker.py:1 -- RuntimeError: another run, a year earlier\n")
    assert diagnose(driver, worker)["exit_code"] == 1
    worker.write_text("2026-12-04 05:00:00,000 ERROR worker.py:1 -- RuntimeError: hours after the end\n")
    assert diagnose(driver, worker)["exit_code"] == 1


def test_a_node_killed_by_the_rehearsal_is_the_first_failure_at_the_time_it_died():
    """A real failed rehearsal (rehearsal/failed/, README there): `--fault worker-node` killed node 1 mid-step, the
    agent loop's calls into it failed, Ray marked the node dead 14 s later. The verdict line states the time of the
    kill, so the headline is the node at that time, not the errors that followed it."""
    result = diagnose(REHEARSAL / "failed" / "node_fault_console.log")
    first = result["first_failure"]
    assert result["exit_code"] == 1 and first["family"] == "ray_node_died", first
    assert first["names"] == "127.184.77.2" and first["time"].startswith("2026-12-05 03:19:07.551"), first
    assert result["findings"][0]["code"] == "ray_node_died", [f["code"] for f in result["findings"]]


# what diagnose printed of the CI run of 2026-12-05 whose node-death rehearsal failed (AgentLoopWorkerTQ's exception,
# cut at 200 characters there, 3 s before Ray's line), and the agent loop's next line, whose time it takes (verl logs
# each failed prompt as `ERROR:<time>:Error in _run_prompt`, then its traceback; the uid is ours)
UNAVAILABLE = ("(AgentLoopWorkerTQ pid=919) ray.exceptions.ActorUnavailableError: The actor "
               "a74131d26f3b7dadb200ef9502000000 is unavailable: The actor is temporarily unavailable: RpcError: RPC "
               "error: failed to connect to all addresses; last error: UNKNOWN:\n"
               "(AgentLoopWorkerTQ pid=919) ERROR:2026-12-05 02:58:18,941:Error in _run_prompt for uid=0b5e7d52\n")


@pytest.mark.parametrize("later, echo", [(3, True), (45, True), (120, False)])
def test_errors_before_ray_marks_a_node_dead_are_its_echo_within_the_health_check_s_delay(tmp_path, later, echo):
    """Ray prints a node's death only once its health checks have failed (15-50 s with its defaults): an unexplained
    error that much earlier is the death's echo. Two minutes earlier it is a failure of its own, and the headline."""
    import datetime

    when = datetime.datetime(2026, 12, 5, 2, 58, 18, 941000) + datetime.timedelta(seconds=later)
    # Ray's driver warning as worker.py prints it (`<time>\tWARNING worker.py:N -- `, ray-project/ray#18449's line)
    # with the message in Ray 2.60's words (address and node name, as in rehearsal/failed/node_fault_console.log);
    # the node id, address and time are ours
    dead = (f"{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}\tWARNING worker.py:1228 -- The node with node "
            "id: 2956cc9988fd4f0339ad2c76671cf7208a1182082a1370c6345dd46f and address: 127.246.210.2 and node name: "
            "127.246.210.2 has been marked dead because the detector has missed too many heartbeats from it.\n")
    log = tmp_path / "console.log"
    log.write_text(UNAVAILABLE + dead)
    result = diagnose(log)
    codes = [f["code"] for f in result["findings"]]
    assert result["exit_code"] == 1 and "ray_node_died" in codes, codes
    if echo:
        assert codes == ["ray_node_died"] and result["first_failure"]["names"] == "127.246.210.2", result
        assert result["unrecognised_lines"] >= 1
    else:
        assert result["first_failure"]["family"] == table.UNRECOGNISED, result["first_failure"]
        assert "unrecognised_failure" in codes

"""A harmless line is harmless because of where it stands in the run, never because of what it says (#46 item 2).

Each kind of line a healthy run prints at its end is put into a real run's log three ways: after the run's end
(teardown: exit 0), after step 1 with the steps that followed (the run went on: handled, exit 0), and after step 1
as the run's last word (mid-run, nothing after it: the failure, exit 1). The run is a real main_ppo console log of
our own rehearsals (tests/fixtures/diagnose/rehearsal/r7c_console.log, two steps); the lines are public ones.
"""

from pathlib import Path

import pytest
from test_diagnose import diagnose

from verl_ascend.diagnose import table, timeline

pytestmark = pytest.mark.verl_agnostic
FIX = Path(__file__).parents[1] / "fixtures" / "diagnose"
RUN = (FIX / "rehearsal" / "r7c_console.log").read_text().splitlines(keepends=True)
STEP_1 = next(i for i, line in enumerate(RUN) if "step:1 - " in line)
END = next(i for i, line in enumerate(RUN) if "Training Progress: 100%" in line)


def _lines(path, start=None, stop=None):
    return "".join(path.read_text().splitlines(keepends=True)[start:stop])


KINDS = {
    # vLLM's engine monitor at the end of a script (https://github.com/vllm-project/vllm/issues/32468; logged at
    # ERROR on every normal shutdown until https://github.com/vllm-project/vllm/pull/36270)
    "vllm_engine_core_died": "ERROR 01-16 17:16:49 [core_client.py:605] Engine core proc EngineCore_DP0 died "
                             "unexpectedly, shutting down client.\n",
    # vllm-ascend without its compiled custom ops, logged at ERROR (https://github.com/vllm-project/vllm-ascend/issues/703,
    # verbatim; "does not affect serving", lowered to a warning by https://github.com/vllm-project/vllm-ascend/pull/937):
    # a global list of harmless lines ignored it anywhere until #46
    "vllm_ascend_c_missing": "ERROR 04-28 16:10:09 camem.py:69] Failed to import vllm_ascend_C:No module named "
                             "'vllm_ascend.vllm_ascend_C'\n",
    # Ray's verdict on an actor that died (https://github.com/verl-project/verl/issues/4921, the verbatim excerpt)
    "ray_actor_died": _lines(FIX / "public" / "verbatim" / "ray_actor_died_sleep.log"),
    # a destructor's traceback at interpreter exit, from our own rehearsal log (r7b_console_resume.log:163-176)
    "destructor_at_exit": _lines(FIX / "rehearsal" / "r7b_console_resume.log", 162, 176),
    # the DataLoader workers killed at teardown, the last line of the same run (r7c_console.log)
    "dataloader_killed": RUN[-1] if RUN[-1].endswith("\n") else RUN[-1] + "\n",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_harmless_at_teardown_handled_mid_run_and_fatal_as_the_last_word(kind, tmp_path):
    lines = KINDS[kind]
    log = tmp_path / "console.log"
    log.write_text("".join(RUN) + lines)  # after the run's end
    result = diagnose(log)
    assert result["exit_code"] == 0, [f["where"]["text"] for f in result["findings"]]
    assert result["shutdown_lines"] >= 1
    log.write_text("".join(RUN[:STEP_1 + 1]) + lines + "".join(RUN[STEP_1 + 1:]))  # the run went on after it
    result = diagnose(log)
    assert result["exit_code"] == 0, [f["where"]["text"] for f in result["findings"]]
    assert result["handled_lines"] >= 1 and any("the run went on" in w["reason"] for w in result["handled"])
    log.write_text("".join(RUN[:STEP_1 + 1]) + lines)  # mid-run, and nothing of the run after it
    result = diagnose(log)
    assert result["exit_code"] == 1, "the same line(s) mid-run must fail the run"
    assert result["first_failure"]["line"] > STEP_1 + 1
    assert result["runs"][0]["finished"] is False and result["runs"][0]["last_step"] == 1


def test_the_engine_death_after_step_1_is_the_failure_it_was_silent_on(tmp_path):
    """The reproduction of #46: step 1, then vLLM's engine-core death, no end: 'no known failure' before."""
    log = tmp_path / "e.log"
    log.write_text("(TaskRunner pid=2900) step:1 - actor/pg_loss:0.01 - timing_s/step:100.0\n"
                   + KINDS["vllm_engine_core_died"])
    result = diagnose(log)
    assert result["exit_code"] == 1 and result["first_failure"]["family"] == table.UNRECOGNISED
    assert "Engine core proc EngineCore_DP0 died unexpectedly" in result["first_failure"]["text"]
    assert result["first_failure"]["component"]["name"] == "vllm"


def test_a_teardown_line_is_fatal_again_when_the_run_then_exits_non_zero(tmp_path):
    log = tmp_path / "console.log"
    log.write_text("".join(RUN) + KINDS["vllm_engine_core_died"] + "Job 'raysubmit_7Lc2' failed\n")
    assert diagnose(log)["exit_code"] == 1


# Ray Train on a 910B2 (https://github.com/ray-project/ray/issues/49998, verbatim: public/healthy/): the script printed
# the Result fit() returned, then CANN's TBE compiler subprocesses of the torn-down worker printed their errors
RAY_TRAIN = (FIX / "public" / "healthy" / "ray_train_npu_result_then_tbe_errors.log").read_text().splitlines(keepends=True)
RESULT = "".join(RAY_TRAIN[:6])
TBE = "".join(RAY_TRAIN[6:])
# Ray < 2.5 printed the Result on one line (a dataclass repr with error=None); a failed trial's Result names its error
RESULT_ONE_LINE = "Result(metrics={'loss': 0.0114, 'done': True}, checkpoint=None, error=None, log_dir=None)\n"
RESULT_ERROR = RESULT.replace("Result(\n", "Result(\n  error='TrainingFailedError',\n")
DRIVER_ERROR = ('Traceback (most recent call last):\n  File "/root/train.py", line 60, in <module>\n'
                "    model = load(result.checkpoint)\nFileNotFoundError: [Errno 2] No such file or directory: 'model.pt'\n")


@pytest.mark.parametrize("text, exit_code", [
    (RESULT + TBE, 0),                  # the workers' lines after the Result fit() returned: their teardown
    (RESULT_ONE_LINE + TBE, 0),
    (TBE, 1),                           # the same lines with no Result: the run's last word
    (TBE + RESULT, 1),                  # before the Result: it says nothing of them (Tune's best Result beside failures)
    (RESULT_ERROR + TBE, 1),            # a Result that carries an error is no end of a healthy run
    (RESULT_ONE_LINE.replace("error=None", "error=RayTaskError(ValueError)") + TBE, 1),
    (RESULT + DRIVER_ERROR, 1),         # the driver's own traceback after fit(): the script failed, not teardown
], ids=["after", "after_one_line", "without", "before", "result_with_error", "one_line_with_error", "driver_after"])
def test_a_returned_ray_result_ends_the_run_for_its_workers_only(text, exit_code, tmp_path):
    log = tmp_path / "driver.log"
    log.write_text(text)
    result = diagnose(log)
    assert result["exit_code"] == exit_code, [f["where"]["text"] for f in result["findings"]]
    if exit_code == 0:
        assert result["shutdown_lines"] == 7 and result["runs"][0]["finished"]


# Ray's client warning when the GCS does not answer within 5 s, which it then retries: the first line of a 2-node
# rehearsal's console log on a busy CI host (our own run, 2026-12-05, verbatim but for its time). That run then lost
# its worker node before step 1, ~100 s after the retry (the retry at 22:19:04, the node's echoes until 22:20:42), and
# diagnose headlined the retry instead of the node. Here it stands before a real run of the same rehearsal
# (rehearsal/failed/node_fault_unavailable_console.log, README there), its time set 100 s before that node's death
# (nearer, it would count as the death's echo)
GCS_RETRY = ("[2026-12-05 22:36:48,001 W 1 1] rpc_client.h:153: Failed to connect to GCS at address 192.0.2.2:27438 "
             "within 5 seconds.\n")
NODE_FAULT = (FIX / "rehearsal" / "failed" / "node_fault_unavailable_console.log").read_text()
STARTED = next(i for i, line in enumerate(RUN) if "-- Started a local Ray instance." in line)
# the run up to its first progress mark of verl's (the first save, before step 1's line): ray.init's line is its only one
FIRST_MARK = next(i for i, line in enumerate(RUN) if any(m.decode() in line for m in timeline.PROGRESS + timeline.END))


def test_a_gcs_connect_retry_the_driver_got_past_is_handled_and_after_it_fails_the_run(tmp_path):
    log = tmp_path / "console.log"
    # before ray.init said "Connected to Ray cluster.", in a run that then failed before any step: the node is the headline
    log.write_text(GCS_RETRY + NODE_FAULT)
    result = diagnose(log)
    first = result["first_failure"]
    assert result["exit_code"] == 1 and (first["family"], first["names"]) == ("ray_node_died", "127.233.152.2"), first
    assert any("Connected to Ray cluster" in h["reason"] for h in result["handled"] if h["line"] == 1), result["handled"]
    # the same retry before "Started a local Ray instance." of a run that finished: handled, exit 0
    log.write_text("".join(RUN[:STARTED]) + GCS_RETRY + "".join(RUN[STARTED:]))
    assert diagnose(log)["exit_code"] == 0
    # after the driver had connected, as the run's last word (a GCS that went away mid-run): the failure
    log.write_text("".join(RUN[:FIRST_MARK]) + GCS_RETRY)
    result = diagnose(log)
    assert result["exit_code"] == 1 and "Failed to connect to GCS" in result["findings"][0]["where"]["text"], result

"""`verl-ascend rehearse --supervise --fault KIND` (issue 45): the real main_ppo loop under `supervise`, a fault planted
inside it in the first attempt only; the supervisor's report, evidence and decisions read back from the run folder.

The cheapest recipe that runs the whole loop: verl's own Ascend GRPO-on-FSDP example (Qwen3-4B, verbatim), 2 steps
(the fault strikes in step 2, after step 1's checkpoint). It is also CI's rehearsal of GRPO on FSDP (issue 44): the
first test checks what the plan scaled (engine, rollout, offload, the CANN scripts the example sources), the engine
verl built, the shards of each save and the loop's verdict on the relaunch. Two tests, each several behaviours:
- a killed Ray worker (1 rank): Ray's verdict acted on at once, a transient retry, the relaunch resumes from
  global_step_1 and finishes, the report's totals (1 restart, family, steps recomputed, time lost); then a bad override
  on the same recipe: stopped at once, 0 restarts, the do-not-requeue code (a run that dies in Hydra: ~10 CPU-s);
- a SIGSTOPped rank (2 ranks): a hang called within its budget, the stacks of the run's processes in the evidence
  folder, the stopped rank named beside the rank waiting for it in all_reduce, the relaunch finishes.
Each checks that nothing of any attempt is left running.
"""

import json
import re
import tempfile
from pathlib import Path

from rehearsal_helpers import FSDP_EXAMPLE as RECIPE
from rehearsal_helpers import QWEN3_4B, assert_diagnosed_as, needs_09, rehearse, steps
from subproc import clean_env, processes_naming

from verl_ascend.proc import marks


def supervised(tmp: Path, name: str, fault: str, nproc: str = "1"):
    model = tmp / "Qwen3-4B"
    if not model.is_dir():
        model.mkdir()
        (model / "config.json").write_text(json.dumps(QWEN3_4B))
    out = tmp / name
    proc = rehearse(out, "--nproc", nproc, "--steps", "2", "--env", f"MODEL_PATH={model}", "--supervise", "--fault",
                    fault, recipe=RECIPE, env=clean_env(HOME=tmp))
    report = json.loads((out / "supervise" / "report.json").read_text())
    for attempt in report["attempts"]:  # every process of every attempt carries its mark: none may be left
        assert marks.marked(marks.Mark(*attempt["mark"].split("=", 1))) == [], attempt["mark"]
    assert processes_naming(str(out)) == []
    return proc, out, report


@needs_09
def test_a_killed_worker_is_retried_and_resumed_and_a_bad_override_stops_at_once():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        proc, out, report = supervised(tmp, "kill", "kill-worker")
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
        assert "fault planted: kill-worker: actor rank 0" in (out / "supervise" / "attempt-1" / "console.log").read_text()
        first, second = report["attempts"]
        assert (report["state"], report["supervisor_exit"], report["totals"]["restarts"]) == ("done", 0, 1)
        assert (first["detected"], first["family"], first["retry_class"], first["decision"]) == (
            "crash_line", "ray_actor_died", "transient", "retry")
        # #35's planted killed worker: diagnose, on the attempt's own log, headlines Ray's verdict on it
        assert_diagnosed_as(out, "(ray_actor_died", logs=[first["log"]])
        assert (first["last_step"], second["resumed_from"], second["first_step"], second["last_step"]) == (1, 1, 2, 2)
        assert "trainer.resume_mode=auto" in second["argv"]
        totals = report["totals"]
        assert totals["time_lost_s"] > 0 and 0 < totals["goodput"] < 1 and totals["steps_recomputed"] == 0, totals
        assert second["steps_recomputed"] == 0 and first["detection_latency_s"] is not None
        for line in ("ok   resume loaded the checkpoint: verl loaded", "ok   resumed run's first step is 2",
                     "ok   resume loaded the weights global_step_1 saved",
                     "ok   the resumed update moved the weights", "ok   nothing of any attempt left running"):
            assert line in proc.stdout, (line, proc.stdout[-3000:])
        # the GRPO-on-FSDP shape as the plan scaled it and verl ran it
        changes = (out / "changes.txt").read_text()
        for expected in ("engine: FSDP2 over gloo, 1 CPU rank(s)", "Qwen3ForCausalLM (qwen3) from config.json at",
                         "kept: algorithm.adv_estimator=grpo", "kept: actor_rollout_ref.actor.use_kl_loss=True",
                         "rollout -> hf (transformers generate on CPU): recipe's", "actor_rollout_ref.rollout.name=vllm",
                         "CPU run: nothing to offload: recipe's actor_rollout_ref.actor.fsdp_config.param_offload=True"):
            assert expected in changes, (expected, changes)
        assert "critic:" not in changes  # GRPO: verl trains no critic
        logs = [Path(a["log"]) for a in report["attempts"]]
        engines = {name for log in logs
                   for name in re.findall(r"verl-ascend rehearse: engine in rank \d: (\w+) ", log.read_text(errors="replace"))}
        assert engines == {"FSDPEngineWithLMHead"}, engines
        for step, metrics in steps(logs[-1]).items():
            assert metrics["actor/grad_norm"] > 0, (step, metrics)
        for step_dir in ("global_step_1", "global_step_2"):
            shards = sorted(p.name for p in (out / "checkpoints" / step_dir / "actor").glob("model_world_size_1_rank_*.pt"))
            assert shards == ["model_world_size_1_rank_0.pt"], (step_dir, shards)
        # a key verl's config does not have: Hydra refuses it in the driver, diagnose calls it config_invalid
        proc, out, report = supervised(tmp, "bad", "bad-override")
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
        (only,) = report["attempts"]
        assert (report["state"], report["supervisor_exit"], report["totals"]["restarts"]) == ("stopped", 93, 0)
        assert (only["family"], only["retry_class"], only["decision"]) == ("config_invalid", "config", "stop")
        assert "rehearsal_planted_key" in Path(only["log"]).read_text() and only["fix"]


@needs_09
def test_a_stopped_rank_is_a_hang_named_in_the_evidence_and_the_relaunch_finishes():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        proc, out, report = supervised(Path(tmp), "hang", "hang-rank", nproc="2")
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
        first, second = report["attempts"]
        assert (report["state"], report["supervisor_exit"], report["totals"]["restarts"]) == ("done", 0, 1)
        assert (first["detected"], first["family"], first["decision"]) == ("hang", "hang", "retry")
        hang = next(f for f in report["findings"] if f["code"] == "hang")
        # over its budget (learned: 5 x step 1's phases, floor 30 s) and not long after it: the poll and quiet window
        assert hang["details"]["budget_s"] <= hang["details"]["elapsed_s"] <= hang["details"]["budget_s"] + 60, hang
        evidence = Path(first["evidence"])
        states = json.loads((evidence / "processes.json").read_text())
        stopped = [p for p in states if p["state"] == "T"]
        assert len(stopped) == 1 and stopped[0]["name"].startswith("ray::WorkerDict"), stopped
        summary = (evidence / "summary.txt").read_text()
        pid = stopped[0]["pid"]
        assert f"pid {pid} (ray::WorkerDict" in summary and "is STOPPED (state T), at" in summary, summary
        assert "waits in all_reduce (torch/distributed/" in summary, summary  # rank 1, waiting for rank 0
        stack = (evidence / "stacks" / f"{pid}.txt").read_text()
        assert "optimizer_step" in stack and "update_actor" in stack, stack[:2000]  # read without attaching
        assert len(list((evidence / "stacks").glob("*.txt"))) >= 5 and list((evidence / "logs").glob("*.tail"))
        assert (second["resumed_from"], second["first_step"], second["last_step"]) == (1, 2, 2)
        assert "ok   resume loaded the checkpoint: verl loaded" in proc.stdout, proc.stdout[-3000:]

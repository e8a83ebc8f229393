"""The rehearsal's verdict on the loop, on the console logs real rehearsals wrote.

Fixtures (tests/fixtures/rehearse/, see README there): the step lines and verl's checkpoint lines of
``verl-ascend rehearse recipes/grpo_qwen2_5_7b_a2.sh`` (verl 0.9.1, Megatron TP2, 2 steps + resume), kept
verbatim; and the resume that verl ran from scratch when the checkpoint's tracker file was gone. The planted
variants change one figure of a real line, each named in the test.
"""

import re
from pathlib import Path

import pytest

from verl_ascend.rehearse.verdict import checks as verdict

pytestmark = pytest.mark.verl_agnostic

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rehearse"
TRAIN, RESUME, SCRATCH = FIX / "grpo_7b_train.log", FIX / "grpo_7b_resume.log", FIX / "grpo_7b_resume_from_scratch.log"


def planted(tmp_path, source: Path, step: int, key: str, value: str) -> Path:
    """``source`` with ``key`` of step ``step`` set to ``value`` (one figure of a real line changed)."""
    lines = source.read_text().splitlines(keepends=True)
    pattern = re.compile(rf"(\b{re.escape(key)}:)[^ ]+")
    out = []
    for line in lines:
        if re.search(rf"step:{step} - ", line):
            line, count = pattern.subn(rf"\g<1>{value}", line)
            assert count == 1, (key, line[:200])
        out.append(line)
    path = tmp_path / f"{source.stem}-{key.replace('/', '_')}.log"
    path.write_text("".join(out))
    return path


def test_a_healthy_rehearsal_passes_every_check_with_its_figures():
    checks = verdict.judge(TRAIN, RESUME, 2)
    assert verdict.failed(checks) == [], verdict.summary(checks)
    text = verdict.summary(checks)
    assert "verl loaded " in text and "global_step_2" in text
    assert "steps [3]" in text
    assert re.search(r"grad_norm > 0 at every update: [0-9.]+, [0-9.]+, [0-9.]+", text), text
    assert "actor rank(s) 0, 1: each rank's digest after the load equals its digest at the save" in text, text
    assert "actor rank(s) 0, 1: every rank's digest changed" in text, text
    assert "over steps [1, 2, 3]" in text


def test_a_resume_that_found_no_checkpoint_fails_though_it_reached_the_last_step():
    # the real log: the tracker file removed after the training run; verl trained steps 1..3 again, exit 0
    text = SCRATCH.read_text()
    assert verdict.SCRATCH in text and "step:3 - " in text and "step:1 - " in text
    checks = verdict.judge(TRAIN, SCRATCH, 2)
    bad = [c.name for c in verdict.failed(checks)]
    assert "resume loaded the checkpoint" in bad and "resumed run's first step is 3" in bad, verdict.summary(checks)
    assert "Training from scratch" in verdict.summary(checks)
    assert any("did not continue from the checkpoint" in line for line in verdict.advice(checks))


def test_a_zero_gradient_anywhere_fails_and_blames_the_update_not_the_reward(tmp_path):
    checks = verdict.judge(planted(tmp_path, TRAIN, 2, "actor/grad_norm", "0.0"), RESUME, 2)
    assert [c.name for c in verdict.failed(checks)] == ["actor/grad_norm > 0 at every update"]
    assert "not > 0 at train step 2" in verdict.summary(checks)
    assert any("update itself is broken" in line for line in verdict.advice(checks))


def test_a_resume_that_holds_other_weights_than_the_save_fails_naming_the_rank(tmp_path):
    # one rank's digest after the load changed: what a load of the initial weights, or of another shard, says
    text = RESUME.read_text()
    line = next(m for m in verdict.WEIGHTS.finditer(text) if m.group(3) == "load" and m.group(2) == "1")
    resume = tmp_path / "resume.log"
    resume.write_text(text.replace(line.group(0), line.group(0)[:-16] + "0123456789abcdef"))
    checks = verdict.judge(TRAIN, resume, 2)
    assert [c.name for c in verdict.failed(checks)] == ["resume loaded the weights global_step_2 saved"]
    assert "actor rank 1 loaded 0123456789abcdef, saved " + line.group(5) in verdict.summary(checks)
    assert any("initial weights" in advice for advice in verdict.advice(checks))


def test_a_resumed_update_that_left_the_weights_as_loaded_fails(tmp_path):
    text = RESUME.read_text()
    found = verdict.digests(text)
    for rank in (0, 1):  # the save of step 3 holds the digest the load of step 2 had, on both ranks
        text = text.replace(found[("save", 3, "actor", rank)], found[("load", 2, "actor", rank)])
    resume = tmp_path / "resume.log"
    resume.write_text(text)
    checks = verdict.judge(TRAIN, resume, 2)
    assert [c.name for c in verdict.failed(checks)] == [
        "the resumed update moved the weights (global_step_3 against global_step_2)"]
    assert "unchanged on actor rank(s) 0, 1" in verdict.summary(checks)
    assert any("learning rate of 0" in advice for advice in verdict.advice(checks))


def test_a_rank_that_saved_but_did_not_load_fails_named(tmp_path):
    text = RESUME.read_text()
    resume = tmp_path / "resume.log"
    resume.write_text("".join(line for line in text.splitlines(keepends=True)
                              if "actor rank 1 after load_checkpoint" not in line))
    checks = verdict.judge(TRAIN, resume, 2)
    assert [c.name for c in verdict.failed(checks)] == ["resume loaded the weights global_step_2 saved"]
    assert "no load on actor rank(s) 1, which saved it" in verdict.summary(checks)


def test_logs_without_weights_lines_fail_the_weight_checks_saying_so(tmp_path):
    resume = tmp_path / "resume.log"
    resume.write_text("".join(line for line in RESUME.read_text().splitlines(keepends=True) if "weights of" not in line))
    checks = verdict.judge(TRAIN, resume, 2)
    assert [c.name for c in verdict.failed(checks)] == [
        "resume loaded the weights global_step_2 saved",
        "the resumed update moved the weights (global_step_3 against global_step_2)"]
    assert "no weights line after a load of global_step_2" in verdict.summary(checks)


def test_a_rollout_that_drifts_from_the_actor_fails_at_the_stated_bound(tmp_path):
    resume = planted(tmp_path, RESUME, 3, "training/rollout_probs_diff_max", "0.25")
    checks = verdict.judge(TRAIN, resume, 2)
    assert [c.name for c in verdict.failed(checks)] == [f"training/rollout_probs_diff_max < {verdict.PROBS_DIFF_BOUND:g}"]
    assert "max 0.25" in verdict.summary(checks)


def test_a_resume_log_without_verls_checkpoint_line_fails(tmp_path):
    resume = tmp_path / "resume.log"
    resume.write_text("".join(line for line in RESUME.read_text().splitlines(keepends=True) if "Resuming" not in line))
    checks = verdict.judge(TRAIN, resume, 2)
    assert [c.name for c in verdict.failed(checks)] == ["resume loaded the checkpoint"]
    assert "no line of verl's" in verdict.summary(checks)


def test_a_critic_that_trains_has_its_gradient_judged_too(tmp_path):
    train, resume = FIX / "ppo_critic_fsdp_train.log", FIX / "ppo_critic_fsdp_resume.log"
    checks = verdict.judge(train, resume, 1)
    assert verdict.failed(checks) == [], verdict.summary(checks)
    assert "critic/grad_norm > 0 at every update" in [c.name for c in checks]
    assert "actor rank(s) 0; critic rank(s) 0: each rank's digest after the load equals" in verdict.summary(checks)
    stuck = verdict.judge(train, planted(tmp_path, resume, 2, "critic/grad_norm", "0.0"), 1)
    assert [c.name for c in verdict.failed(stuck)] == ["critic/grad_norm > 0 at every update"]
    # GRPO logs no critic: no critic check there
    assert "critic/grad_norm > 0 at every update" not in [c.name for c in verdict.judge(TRAIN, RESUME, 2)]

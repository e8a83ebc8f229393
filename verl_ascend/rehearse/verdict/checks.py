"""The rehearsal's own verdict on the loop: did it resume, does the update move, do the weights reach the rollout.

Both main_ppo runs exiting 0 says little: a resume that found no checkpoint trains from step 1 again
(verl logs "Training from scratch" and carries on), and an update whose gradient is zero runs every
step as fast as a working one. What each check reads, all from main_ppo's own console logs:

- resume: verl's own line naming the checkpoint it loaded (``Resuming from .../global_step_N`` on the
  v1 and legacy trainers, ``Load from checkpoint folder: ...`` on the legacy one and main_dapo),
  never ``Training from scratch``, and the resumed run's steps are exactly ``steps+1``.
- grad_norm: ``actor/grad_norm`` (and ``critic/grad_norm`` where a critic trains) > 0 at every update
  of both runs. The rehearsal's reward has a term
  that varies inside every group (:mod:`.reward`), so GRPO's advantages are never all 0 here: a zero
  gradient is a broken update (a loss detached from the weights, a mask that hides every token,
  gradients lost between ranks), not a constant reward.
- kl_loss, when the recipe uses a KL loss: ``actor/kl_loss`` > 0 at the resumed step. The reference is
  the initial model; after ``steps`` updates the actor differs from it, so a resume that reloaded the
  initial weights instead of the checkpoint reads 0 again.
- rollout_probs_diff: ``training/rollout_probs_diff_max`` (verl's comparison of the rollout's log-probs
  with the actor's for the same tokens) below :data:`PROBS_DIFF_BOUND` at every step where it is
  logged: the updated weights reached the rollout server.
"""

import dataclasses
import re
from pathlib import Path

from verl_ascend.logs.parse import parse_files

# Measured on this project's rehearsals (docs/rehearse.md): ~1e-5 on Megatron, ~1e-4 on FSDP2 (float32 on
# CPU, the same weights in two code paths). A rollout serving the weights from before an update at the
# rehearsal's learning rate (1e-3) differs by far more than 1e-2 on the tokens it generated.
PROBS_DIFF_BOUND = 1e-2
LOADED = re.compile(r"(?:Resuming from|Load from checkpoint folder:)\s*(\S*global_step_(\d+))")
SCRATCH = "Training from scratch"


@dataclasses.dataclass
class Check:
    name: str
    ok: bool
    figure: str  # what was seen, for the summary line

    def line(self) -> str:
        return f"  {'ok  ' if self.ok else 'FAIL'} {self.name}: {self.figure}"


def _fmt(value) -> str:
    return "none" if value is None else f"{value:.3g}"


def judge(train_log: Path, resume_log: Path, steps: int, kl_loss: bool, last: int = None) -> list:
    """The checks, in the order the summary prints them. ``steps``: the step the resume loads; ``last``: the
    resumed run's last step (default ``steps + 1``: one step after the resume)."""
    train, resumed = parse_files([str(train_log)]), parse_files([str(resume_log)])  # each run on its own
    text = Path(resume_log).read_text(errors="replace")
    checks = []

    loaded = [(m.group(1), int(m.group(2))) for m in LOADED.finditer(text)]
    scratch = SCRATCH in text
    good = [path for path, step in loaded if step == steps]
    if good and not scratch:
        figure = f"verl loaded {good[0]}"
    elif scratch:
        figure = (f"verl said '{SCRATCH}': the resume found no checkpoint in the checkpoint folder (its tracker "
                  "file latest_checkpointed_iteration.txt gone?) and trained from step 1 again")
    elif loaded:
        figure = f"verl loaded {loaded[0][0]}, not global_step_{steps}"
    else:
        figure = "the resumed run's log has no line of verl's saying which checkpoint it loaded"
    checks.append(Check("resume loaded the checkpoint", bool(good) and not scratch, figure))

    seen, want = list(resumed.steps), list(range(steps + 1, (last or steps + 1) + 1))
    checks.append(Check(f"resumed run's first step is {steps + 1}", seen == want,
                        f"steps {seen or 'none'}" + ("" if seen == want else f" (expected {want})")))

    both = (("train", train), ("resume", resumed))
    critic = any("critic/grad_norm" in m for _, parsed in both for m in parsed.steps.values())
    for key in ("actor/grad_norm",) + (("critic/grad_norm",) if critic else ()):  # a critic: verl logs its own
        every = [(f"{label} step {n}", m.get(key)) for label, parsed in both for n, m in parsed.steps.items()]
        bad = [where for where, value in every if value is None or not value > 0]
        checks.append(Check(f"{key} > 0 at every update", bool(every) and not bad,
                            ", ".join(_fmt(v) for _, v in every) + (f"; not > 0 at {', '.join(bad)}" if bad else "")
                            if every else "no step logged"))

    if kl_loss:
        kl = resumed.steps.get(steps + 1, {}).get("actor/kl_loss")
        first = train.steps.get(1, {}).get("actor/kl_loss")
        checks.append(Check(f"actor/kl_loss > 0 at the resumed step {steps + 1}", kl is not None and kl > 0,
                            f"{_fmt(kl)} (step 1: {_fmt(first)}, actor = reference there)"))

    diffs = [(n, m["training/rollout_probs_diff_max"]) for parsed in (train, resumed)
             for n, m in parsed.steps.items() if "training/rollout_probs_diff_max" in m]
    worst = max((v for _, v in diffs), default=None)
    if diffs:
        checks.append(Check(f"training/rollout_probs_diff_max < {PROBS_DIFF_BOUND:g}", worst < PROBS_DIFF_BOUND,
                            f"max {_fmt(worst)} over steps {[n for n, _ in diffs]}"))
    else:
        checks.append(Check(f"training/rollout_probs_diff_max < {PROBS_DIFF_BOUND:g}", False,
                            "not logged: this trainer path does not compare the rollout's log-probs with the "
                            "actor's, so the weight sync is not checked"))
    return checks


def summary(checks) -> str:
    return "\n".join(["the loop, judged from its own logs:"] + [c.line() for c in checks])


def failed(checks) -> list:
    return [c for c in checks if not c.ok]


# What a failed check means here, and where to look (the learning signal is the rehearsal's own: see above).
ADVICE = {
    "resume": "the second run did not continue from the checkpoint the first one wrote; see console_resume.log "
              "and `verl-ascend ckpt check DIR/checkpoints`",
    "grad_norm": "a zero gradient, although the rehearsal's reward term varies inside every group, means the update "
                 "itself is broken (a loss detached from the weights, a response mask hiding every token, gradients "
                 "lost between ranks); see console.log around the step lines",
    "kl_loss": "the actor equals the reference at the resumed step: the resume loaded the initial weights, not the "
               "trained ones (or the update never changed them)",
    "rollout_probs_diff": "the rollout's log-probs differ from the actor's: the updated weights did not reach the "
                          "rollout server (the weight sync), or the two compute different models",
}


def advice(checks) -> list:
    lines = []
    for check in failed(checks):
        key = next((k for k in ADVICE if k in check.name), "resume" if "step" in check.name else "")
        if key and ADVICE[key] not in lines:
            lines.append(ADVICE[key])
    return lines

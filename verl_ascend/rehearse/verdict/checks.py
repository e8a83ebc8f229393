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
- weights: each rank of each checkpointed role (actor, critic) says a digest of the parameters it holds after
  every checkpoint save and load (``loop/report.py``: ``weights of ROLE rank R after KIND (global_step_N)``). The
  resume's digest after loading step ``steps`` equals the one that rank had when it saved that step (the resume
  brought back exactly the trained weights, not the initial ones, and not part of them), and the digest at the
  resumed run's next save differs from it on every rank (the resumed update moved the weights). This replaced
  ``actor/kl_loss`` > 0 at the resumed step, which could not say it: verl computes the log-probs in bf16, where
  near log p = -12 one step is 1/16, so a tiny model one update away from its reference can log a KL of exactly
  0 (about 1 run in 100 at the KL this rehearsal reaches; docs/rehearse.md).
- rollout_probs_diff: ``training/rollout_probs_diff_max`` (verl's comparison of the rollout's log-probs
  with the actor's for the same tokens) below :data:`PROBS_DIFF_BOUND` at every step where it is
  logged: the updated weights reached the rollout server.
"""

import dataclasses
import re
from pathlib import Path

from verl_ascend.core import runlog
from verl_ascend.logs.parse import parse_files

# Measured on this project's rehearsals (docs/rehearse.md): ~1e-5 on Megatron, ~1e-4 on FSDP2 (float32 on
# CPU, the same weights in two code paths). A rollout serving the weights from before an update at the
# rehearsal's learning rate (1e-3) differs by far more than 1e-2 on the tokens it generated.
PROBS_DIFF_BOUND = 1e-2
LOADED = re.compile(r"(?:Resuming from|Load from checkpoint folder:)\s*(\S*global_step_(\d+))")
SCRATCH = "Training from scratch"
WEIGHTS = re.compile(re.escape(runlog.WEIGHTS) + r"(\w+) rank (\d+) after (save|load)_checkpoint "
                     r"\(global_step_(\d+)\): ([0-9a-f]+)")


@dataclasses.dataclass
class Check:
    name: str
    ok: bool
    figure: str  # what was seen, for the summary line

    def line(self) -> str:
        return f"  {'ok  ' if self.ok else 'FAIL'} {self.name}: {self.figure}"


def _fmt(value) -> str:
    return "none" if value is None else f"{value:.3g}"


def judge(train_log: Path, resume_log: Path, steps: int, last: int = None) -> list:
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

    checks += weight_checks(Path(train_log).read_text(errors="replace"), text, steps)

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


def digests(text: str) -> dict:
    """``{(kind, step, role, rank): digest}`` from the weights lines of a console log (``kind``: save or load)."""
    return {(kind, int(step), role, int(rank)): digest for role, rank, kind, step, digest in WEIGHTS.findall(text)}


def _ranks(keys) -> str:
    roles = sorted({role for role, _ in keys})
    return "; ".join(f"{role} rank(s) {', '.join(str(r) for x, r in sorted(keys) if x == role)}" for role in roles)


def _at(found: dict, kind: str, step: int) -> dict:
    return {key[2:]: digest for key, digest in found.items() if key[:2] == (kind, step)}


def weight_checks(train_text: str, resume_text: str, steps: int) -> list:
    """The two checks on the weights' digests: every rank that saved step ``steps`` loaded exactly that in the
    resume; the resumed run's next save holds other weights on every rank."""
    saved, resumed = digests(train_text), digests(resume_text)
    before, loaded, after = _at(saved, "save", steps), _at(resumed, "load", steps), _at(resumed, "save", steps + 1)
    name = f"resume loaded the weights global_step_{steps} saved"
    differ = [k for k, d in loaded.items() if before.get(k) != d]
    unloaded = [k for k in before if k not in loaded]
    if not loaded:
        figure = f"the resumed run's log has no weights line after a load of global_step_{steps}"
    elif differ or unloaded:
        figure = "; ".join([f"{role} rank {rank} loaded {loaded[(role, rank)]}, saved "
                            f"{before.get((role, rank), 'nothing (no weights line at the save)')}" for role, rank in differ]
                           + ([f"no load on {_ranks(unloaded)}, which saved it"] if unloaded else []))
    else:
        figure = f"{_ranks(loaded)}: each rank's digest after the load equals its digest at the save"
    checks = [Check(name, bool(loaded) and not differ and not unloaded, figure)]
    name = f"the resumed update moved the weights (global_step_{steps + 1} against global_step_{steps})"
    same = [k for k in loaded if after.get(k) == loaded[k]]
    unsaid = [k for k in loaded if k not in after]
    if not loaded or unsaid:
        figure = (f"no weights line at the save of global_step_{steps + 1} for {_ranks(unsaid)}" if loaded else
                  "nothing loaded to compare with")
        checks.append(Check(name, False, figure))
    else:
        checks.append(Check(name, not same, f"unchanged on {_ranks(same)}" if same else
                            f"{_ranks(loaded)}: every rank's digest changed"))
    return checks


def summary(checks) -> str:
    return "\n".join(["the loop, judged from its own logs:"] + [c.line() for c in checks])


def failed(checks) -> list:
    return [c for c in checks if not c.ok]


# What a failed check means here, and where to look (the learning signal is the rehearsal's own: see above).
ADVICE = {  # the first key found in a check's name picks its advice
    "loaded the weights": "a rank holds other weights after the resume's load than it saved: the load brought back "
                          "the initial weights or part of the checkpoint (a shard of another rank, a folder some "
                          "node changed); see console_resume.log's load lines and `verl-ascend ckpt check DIR/checkpoints`",
    "moved the weights": "the resumed step's update left a rank's weights as loaded: the optimizer step did not run "
                         "there, or ran with a learning rate of 0; see the step line's actor/lr and actor/grad_norm",
    "resume": "the second run did not continue from the checkpoint the first one wrote; see console_resume.log "
              "and `verl-ascend ckpt check DIR/checkpoints`",
    "grad_norm": "a zero gradient, although the rehearsal's reward term varies inside every group, means the update "
                 "itself is broken (a loss detached from the weights, a response mask hiding every token, gradients "
                 "lost between ranks); see console.log around the step lines",
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

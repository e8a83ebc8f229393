"""``rehearse RECIPE.sh --supervise --fault KIND``: the rehearsal's training under ``supervise``, a fault planted.

The trainer command the rehearsal built runs under :func:`verl_ascend.supervise.run.supervise` (bound: nothing of
it outlives the rehearsal), with its run folder in ``OUT/supervise`` (``report.json``, each attempt's console,
evidence and timeline). The fault reaches the loop through the attempt's environment (``loop/fault.py``,
``run/cluster.py``), which the supervisor gives to the first attempt only (to every attempt for ``crash-loop``):

- ``kill-worker``: actor rank 0 SIGKILLed at its first optimizer step after a checkpoint -> retry, resume from
  that checkpoint, finish;
- ``hang-rank``: actor rank 0 SIGSTOPped there -> a hang called within its budget, the stopped rank named in the
  evidence, retry, finish;
- ``bad-override``: a key the trainer's config does not have, on the command -> stop, 0 restarts, exit 93;
- ``crash-loop``: ``kill-worker`` in every attempt -> retry once, then stop (the same failure, no checkpoint progress);
- ``worker-node`` (``--nnodes`` >= 2): the last worker node loses power once step 1 is saved -> retry once the nodes
  answer and the checkpoint is synced and checked on each, finish;
- ``damaged-ckpt`` (``--nnodes`` >= 2): ``kill-worker`` (after global_step_2 with ``--steps 3`` or more), then the
  largest file of the newest step cut short on the last node -> fall back to global_step_1, whole on every node; with
  ``--steps 2`` the damaged step is the only one: stop (exit 93) naming the file.

Where the run finished after a relaunch, the loop is judged as after the plain rehearsal's resume
(``verdict/checks.py``: the relaunch loaded the checkpoint and went on from the next step, grad norms, the weights
it loaded and moved, the weight sync), from the first and the last attempt's consoles. The rehearsal exits 0 when
the supervisor did what the table says and the loop's checks pass, 1 otherwise; each check is printed.
"""

import os
import sys
from pathlib import Path

from verl_ascend.core import runlog
from verl_ascend.rehearse.loop import fault
from verl_ascend.rehearse.verdict.checks import Check

LOOP_FAULTS = (runlog.FAULT_KILL, runlog.FAULT_STOP, runlog.FAULT_LOOP)
NODE_FAULTS = ("worker-node", "damaged-ckpt")
KINDS = LOOP_FAULTS + ("bad-override",) + NODE_FAULTS
BAD_OVERRIDE = "trainer.rehearsal_planted_key=1"  # not in verl's trainer config: Hydra refuses it ("not in struct")
# a CPU rehearsal's steps take seconds: the learned budget's floor and the quiet window scaled down with them
FLOOR_S, QUIET_S, BACKOFF_S = 30.0, 20.0, 3.0


def problem(options) -> str:
    """Why ``--supervise`` / ``--fault`` cannot run as given ('' when they can): the message of an exit 2."""
    kind = options.fault
    if not options.supervise:
        return "" if kind in (None, "worker-node") else (f"--fault {kind} is planted for the supervisor. Fix: add "
                                                         "--supervise")
    if kind is None:
        return f"--supervise rehearses the supervisor against a planted fault. Fix: add --fault KIND ({', '.join(KINDS)})"
    if kind in NODE_FAULTS and options.nnodes < 2:
        return f"--fault {kind} acts on a multi-node rehearsal. Fix: add --nnodes 2"
    if kind != "bad-override" and options.steps < 2:
        return (f"--fault {kind} strikes in the step after the first checkpoint, and a relaunch resumes from it. "
                "Fix: --steps 2 or more")
    return ""


def _attempt_env(kind: str, ckpt_dir, steps: int = 2):
    # damaged-ckpt with 3 steps or more: the kill waits for global_step_2, so that global_step_1 is there to fall back to
    planted = fault.env(runlog.FAULT_KILL, ckpt_dir, 2 if steps >= 3 else 1) if kind == "damaged-ckpt" else \
        fault.env(kind, ckpt_dir)
    if kind == "worker-node":
        planted = {runlog.FAULT_VAR: "worker-node@after-step-1"}  # run/cluster.py: once step 1 is saved
    return lambda number: planted if (number == 1 or kind == runlog.FAULT_LOOP) else {}


def _damage(cluster, ckpt_dir):
    """Before the relaunch: the largest file of the newest step on the last node, cut to half (a copy or save cut
    short), named in the console."""
    def cut(number):
        root = cluster.node_copy(cluster.nnodes - 1, ckpt_dir)
        found = sorted(root.glob("global_step_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
        files = sorted((p for p in found[-1].rglob("*") if p.is_file()), key=lambda p: p.stat().st_size) if found else []
        if not files or number != 1:
            return
        with open(files[-1], "r+b") as fh:
            fh.truncate(files[-1].stat().st_size // 2)
        print(f"rehearse: {runlog.FAULT_PLANTED}damaged-ckpt: {files[-1].relative_to(root)} cut to half on node "
              f"{cluster.nnodes - 1} ({cluster.hosts[-1]})", flush=True)
    return cut


def expected(kind: str, rep, steps: int = 2) -> list:
    """The supervisor's checks for ``kind`` on its report ``rep`` (``steps``: the rehearsal's --steps)."""
    from verl_ascend.supervise import decide

    first = rep.attempts[0] if rep.attempts else None
    restarts = len(rep.attempts) - 1
    said = f"state {rep.state}, exit {rep.exit}, {restarts} restart(s): {rep.reason}"
    if kind in ("bad-override",):
        return [Check("supervisor stopped at once, do not requeue (exit 93, 0 restarts)",
                      rep.exit == decide.EXIT_NO_REQUEUE and restarts == 0, said),
                Check("the failure is a configuration one, its fix named",
                      bool(first and first.retry_class == decide.CONFIG and first.fix),
                      f"{first.family} ({first.retry_class}): fix {first.fix!r}" if first else "no attempt")]
    if kind == runlog.FAULT_LOOP:
        return [Check("supervisor stopped the crash loop (exit 93 after 1 restart)",
                      rep.exit == decide.EXIT_NO_REQUEUE and restarts == 1 and "crash loop" in rep.reason, said)]
    if kind == "damaged-ckpt" and steps < 3:  # the damaged step is the only one: nothing to fall back to
        return [Check("supervisor stopped naming the damaged file (exit 93, 0 restarts)",
                      rep.exit == decide.EXIT_NO_REQUEUE and restarts == 0 and "no earlier step is whole" in rep.reason,
                      said)]
    if kind == "damaged-ckpt":
        fell = [f for f in rep.findings if f.code == "ckpt_fallback"]
        checks = [Check("the relaunch fell back to global_step_1, whole on every node", bool(fell) and bool(
            rep.attempts[1:] and "global_step_1" in " ".join(rep.attempts[-1].argv)), fell[0].message if fell else
            "no ckpt_fallback finding")]
    else:
        checks = []
    checks += [Check("supervisor: the run finished after 1 restart", rep.exit == decide.EXIT_DONE and restarts == 1, said)]
    if first is not None:
        checks.append(Check("attempt 1: a transient failure, retried", first.retry_class == decide.TRANSIENT and
                            first.decision == decide.RETRY, f"{first.detected}: {first.family} ({first.retry_class}) "
                            f"-> {first.decision}, detected {first.detection_latency_s} s after the last sign of life"))
    if kind == runlog.FAULT_STOP and first is not None:
        hang = next((f for f in rep.findings if f.code == "hang"), None)
        summary = Path(first.evidence or "/nonexistent", "summary.txt")
        text = summary.read_text() if summary.is_file() else ""
        checks.append(Check("the hang was called within its budget + the quiet window",
                            bool(hang and hang.details["elapsed_s"] <= hang.details["budget_s"] + QUIET_S + 30),
                            hang.message if hang else "no hang finding"))
        lines = text.strip().splitlines() or ["no summary.txt"]  # the figure: the stopped rank's line, else the last
        checks.append(Check("the evidence names the stopped rank", "STOPPED" in text,
                            next((line for line in lines if "STOPPED" in line), lines[-1])[:300]))
    return checks


def run(options, command: list, env: dict, cwd: str, out: Path, ckpt_dir: Path, cluster, print_logs) -> int:
    """The supervised rehearsal; 0 when the supervisor and the loop did what the fault asks, else 1. ``print_logs``:
    the rehearsal's `verl-ascend logs` report of console logs (rehearsal.py)."""
    from verl_ascend.rehearse.run import trainer as runner
    from verl_ascend.rehearse.verdict import checks as verdict
    from verl_ascend.supervise import decide, detect
    from verl_ascend.supervise import run as supervise_run

    kind = options.fault
    env = {**env, runner.MARK: f"{runner.rehearsal_id()}-supervised"}  # rehearse's stop path finds the attempts too
    argv = list(command) + ([BAD_OVERRIDE] if kind == "bad-override" else [])
    settings = {"read": "the rehearsal's plan", "save_freq": 1, "total_training_steps": options.steps,
                "default_local_dir": str(ckpt_dir), "nnodes": options.nnodes}
    opts = supervise_run.Options(
        run_dir=str(out / "supervise"), bound=True, echo=False, settings=settings, max_restarts=2,
        policy=decide.Policy(max_restarts=2, backoff_s=BACKOFF_S),
        budgets=detect.Budgets(floor=FLOOR_S, quiet=QUIET_S, startup=float(options.timeout)),
        attempt_env=None if kind == "bad-override" else _attempt_env(kind, ckpt_dir, options.steps),
        before_relaunch=_damage(cluster, ckpt_dir) if kind == "damaged-ckpt" else None,
        nodes=tuple(cluster.hosts) if cluster else (), ssh=cluster.ssh() if cluster else "ssh", wait_nodes=60.0)
    print(f"rehearse: supervise: the trainer under the supervisor, --fault {kind} planted "
          f"({'every attempt' if kind == runlog.FAULT_LOOP else 'first attempt'}); run folder {opts.run_dir}", flush=True)
    rep = supervise_run.supervise(argv, env, cwd, opts)
    print(rep.text())
    checks = expected(kind, rep, options.steps)
    left = [a.number for a in rep.attempts if runner.marks.marked(runner.marks.Mark(*a.mark.split("=", 1)))]
    checks.append(Check("nothing of any attempt left running", not left, f"attempts {left} left processes" if left
                        else f"{len(rep.attempts)} attempt(s) looked at"))
    if rep.exit == decide.EXIT_DONE and len(rep.attempts) > 1:
        first, last = rep.attempts[0], rep.attempts[-1]
        resumed = (last.first_step or 1) - 1
        checks += verdict.judge(Path(first.log), Path(last.log), resumed, last=options.steps)
        print_logs([Path(a.log) for a in rep.attempts if os.path.getsize(a.log)], out)
    print("the supervisor and the loop, judged:\n" + "\n".join(c.line() for c in checks))
    bad = verdict.failed(checks)
    if bad:
        print(f"verl-ascend rehearse: --supervise --fault {kind}: {len(bad)} check(s) failed: "
              + "; ".join(f"{c.name} ({c.figure})" for c in bad), file=sys.stderr)
        return 1
    print(f"rehearse: ok: --supervise --fault {kind}: {rep.reason}; report {Path(opts.run_dir) / 'report.json'}")
    return 0

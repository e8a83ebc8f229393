"""The loop: start an attempt, watch it, and at a failure save the evidence, decide, end it, relaunch.

States of the run (``report.json``'s ``state``): ``running`` -> ``done`` (the last step reached), ``stopped``
(do not requeue), ``gave_up`` (the retry budget spent, the deadline, nodes gone: requeue may help) or, with
``--dry-run``, ``watched``. Each attempt: START -> WATCH -> (finished | failure) -> EVIDENCE (before anything
is ended) -> DECIDE -> END (exactly the attempt's processes, by their mark) -> CHECKPOINT CHECK -> BACK-OFF ->
START with ``trainer.resume_mode=auto``.

Processes are started and ended by ``verl_ascend.proc`` (a mark in every process's environment, a PID
namespace where the host allows one). :func:`supervise` is the one entry point: the CLI calls it, and so does
``rehearse --supervise``.
"""

import dataclasses
import json
import os
import time

from verl_ascend.core import outfiles, runlog
from verl_ascend.core.findings import WARNING, Finding
from verl_ascend.proc import follow, guard, info, marks
from verl_ascend.proc import launch as proc_launch

from . import attempt as A
from . import decide as D
from . import detect, evidence, evidence_nodes, launch, relaunch, timeline
from . import report as R

KEEP_TAIL = 50          # console lines kept in the live snapshot besides the ones that matter to a detector
CKPT_EVERY = 15.0       # s between two sizes of the checkpoint folder (a walk of a large folder is not free)


@dataclasses.dataclass
class Options:
    run_dir: str
    max_restarts: int = 3
    hang_after: float = None
    stop_on: tuple = ()
    retry_unknown: bool = False
    dry_run: bool = False
    deadline: float = None          # epoch seconds
    wait_nodes: float = 600.0       # s for --nodes to answer and Ray to show trainer.nnodes alive
    nodes: tuple = ()               # every node of the run ([user@]host[:port], head first): relaunch.py's steps
    ssh: str = "ssh"                # how the nodes are reached (as ckpt sync's --ssh)
    remote_python: str = None       # python with verl-ascend on the nodes (default: this one's path)
    bound: bool = False             # True: an attempt ends with its supervisor (rehearse); False: it outlives it
    budgets: detect.Budgets = None  # defaults, with hang_after applied
    policy: D.Policy = None
    poll_s: float = 2.0
    settings: dict = None           # the trainer's settings, when the caller knows them (else read)
    echo: bool = True               # print the command's console lines
    attempt_env: object = None      # callable(attempt number) -> extra environment of that attempt (a planted fault)
    before_relaunch: object = None  # callable(number of the attempt that failed), before the checkpoint is checked


def _say(text: str) -> None:
    print(f"verl-ascend supervise: {text}", flush=True)


def _interesting(text: str) -> bool:
    return bool("step:" in text or timeline.SAVE_STARTS.search(text) or timeline.RESUMED.search(text)
                or timeline.SCRATCH in text or launch.TOTAL_STEPS.search(text) or detect.family_of(text))


class Supervisor:
    def __init__(self, argv, env, cwd, options: Options, settings: dict):
        self.argv, self.env, self.cwd, self.o = list(argv), dict(env), cwd, options
        self.settings = settings
        self.budgets = options.budgets or detect.Budgets()
        if options.hang_after:
            self.budgets = dataclasses.replace(self.budgets, hang_after=options.hang_after)
        self.policy = options.policy or D.Policy(max_restarts=options.max_restarts, retry_unknown=options.retry_unknown)
        self.report = R.Report(options.run_dir, self.argv, dry_run=options.dry_run, settings=settings)
        self.history = []        # step records of earlier attempts (they teach the budgets)
        self.startup_seen = None
        self.expected_resume = None
        self.resume_args = launch.resume_overrides()  # what the next relaunch resumes with (relaunch.resume_point)
        self.clock = time.monotonic() - time.time()  # monotonic = wall + clock

    # -- one attempt ------------------------------------------------------------------------------------
    def _argv(self, number: int) -> list:
        extra = list(self.resume_args) if number > 1 else []
        if self.o.deadline:
            save = max((s.phases().get(timeline.SAVE, 0.0) for s in self.history), default=0.0) or None
            extra += launch.deadline_overrides(self.o.deadline, save)[1]
        trainer = launch.is_trainer_line(self.argv) or launch.script_of(self.argv)
        return launch.with_overrides(self.argv, extra) if trainer and extra else list(self.argv)

    def start(self, number: int):
        folder = os.path.join(self.o.run_dir, f"attempt-{number}")
        os.makedirs(folder, exist_ok=True)
        log = os.path.join(folder, "console.log")
        argv = self._argv(number)
        env = dict(self.env)
        if self.o.attempt_env is not None:
            env.update(self.o.attempt_env(number))
        if self.o.deadline:
            env.update(launch.deadline_overrides(self.o.deadline)[0])
        mark = marks.Mark(runlog.SUPERVISE_MARK, f"{os.path.basename(os.path.abspath(self.o.run_dir))}-{os.getpid()}-{number}")
        run = proc_launch.Run(A.wrapped(argv, folder), env, self.cwd, mark, bound=self.o.bound)
        with open(log, "w") as out:
            run.start(stdout=out, text=True)
        attempt = R.Attempt(number, argv, log, pid=run.proc.pid, pid_start=info.start_of(run.proc.pid), mark=str(mark),
                            started=time.time())
        self.report.attempts.append(attempt)
        self.report.write()
        _say(f"attempt {number} started (pid {run.proc.pid}, {mark}); console {log}")
        return attempt, A.Started(run)

    def watch(self, attempt: R.Attempt, handle):
        """Watch until a detector fires or the attempt ends; returns (failure finding or None, snapshot)."""
        started = attempt.started + self.clock
        snap = timeline.Snapshot(started, time.monotonic())
        tail = follow.Follow(attempt.log)
        next_ckpt, seen_steps, flagged, deadline_hit, recheck = 0.0, 0, set(), False, 0.0
        ckpt_dir = self.settings.get("default_local_dir")
        while True:
            now = time.monotonic()
            for text in tail.new_lines():
                if self.o.echo:
                    print(text, flush=True)
                snap.lines.append((now, text))
                m = launch.TOTAL_STEPS.search(text)
                if m and not self.settings.get("total_training_steps"):
                    self.settings["total_training_steps"] = int(m.group(1))
            if len(snap.lines) > 4 * KEEP_TAIL:  # keep what detectors read: the marks, and the newest lines
                snap.lines = [x for x in snap.lines[:-KEEP_TAIL] if _interesting(x[1])] + snap.lines[-KEEP_TAIL:]
            code = handle.poll()
            snap.now = now
            pids = handle.pids()  # with --nodes, this node's only: the others are asked before a hang is called
            snap.cpu.append((now, evidence.cpu_sample(evidence.on_this_node(pids) if len(self.o.nodes) > 1 else pids)))
            snap.cpu = snap.cpu[-200:]
            if ckpt_dir and now >= next_ckpt:
                snap.ckpt.append((now, relaunch.folder_bytes(ckpt_dir)))
                snap.ckpt, next_ckpt = snap.ckpt[-50:], now + CKPT_EVERY
            if code is not None:
                snap.exit_code, snap.ended = code, now
                for text in tail.new_lines():
                    snap.lines.append((now, text))
                    if self.o.echo:
                        print(text, flush=True)
            done = timeline.steps(snap)
            self._note_steps(attempt, done)
            if len(done) > seen_steps:
                seen_steps = len(done)
                for f in detect.health(snap, self.o.stop_on):
                    if f.code not in flagged:
                        flagged.add(f.code)
                        attempt.health.append(f.code)
                        self.report.findings.append(f)
                        _say(f"health: {f.subject}: {f.message}")
                        if f.severity == "error":
                            return f, snap
                self.report.write()
            if code is not None:
                return detect.exited(snap, self.settings.get("total_training_steps"), relaunch.local_tracker(self.settings)), snap
            found = detect.live_failure(snap, self.budgets) or detect.hang(snap, self.budgets, self.history,
                                                                             self.startup_seen)
            if found is not None and found.code == "hang" and len(self.o.nodes) > 1:  # the other nodes' CPU too
                found, held, wait = (None, "", 0.0) if now < recheck else evidence_nodes.weigh_hang(
                    self.o, found, attempt.mark, self.budgets)
                if held:
                    _say(held)
                    recheck = time.monotonic() + wait
            if found is not None and not self.o.dry_run:
                return found, snap
            if found is not None and found.code not in flagged:
                flagged.add(found.code)
                self.report.findings.append(found)
                _say(f"(dry run) would act on {found.code}: {found.message}")
            if self.o.deadline and time.time() >= self.o.deadline and not deadline_hit:
                deadline_hit = True
                _say("the deadline came: ending the attempt")
                return None, snap
            time.sleep(self.o.poll_s)

    def _note_steps(self, attempt, done):
        if not done:
            return
        if attempt.first_step is None:
            self._check_resumed(attempt, done[0])
        attempt.first_step_at = attempt.first_step_at or done[0].at - self.clock
        attempt.first_step = done[0].step
        attempt.last_step = done[-1].step
        attempt.step_seconds = {s.step: s.seconds for s in done if s.seconds is not None}

    def _check_resumed(self, attempt, first):
        """A relaunch must go on from the checkpoint: its first step is the one after the tracker's."""
        expected = self.expected_resume
        if attempt.number == 1 or expected is None:
            return
        if first.step == expected + 1:
            _say(f"attempt {attempt.number} resumed: its first step is {first.step} (checkpoint global_step_{expected})")
            return
        f = Finding(WARNING, f"attempt {attempt.number}", f"first step {first.step}, not {expected + 1}: the relaunch did "
                    f"not resume from global_step_{expected}", "make the trainer line of the script end with \"$@\" so "
                    "the supervisor's trainer.resume_mode=auto reaches verl", code="not_resumed")
        self.report.findings.append(f)
        _say(f.message)

    def tracker_now(self):
        """The checkpoint step the trainer's tracker names now (on the nodes: the newest any of them names)."""
        return relaunch.tracker(self.o, self.settings, _say)

    def prepare_relaunch(self, attempt):
        """The steps before a relaunch (relaunch.py): the other nodes cleared and back, the checkpoint synced and
        checked. None when the relaunch may go (``self.resume_args`` set), else (state, exit code, reason)."""
        if self.o.nodes:
            left = relaunch.end_on_nodes(self.o, attempt.mark)
            _say("the attempt on the nodes: " + "; ".join(f"{n}: " + ("nothing left" if v == [] else str(v))
                                                          for n, v in left.items()))
        gone = relaunch.wait_nodes(self.o, settings=self.settings, env=self.env, say=_say)
        if gone:
            return R.GAVE_UP, D.EXIT_GAVE_UP, (f"node(s) not back within --wait-nodes {self.o.wait_nodes:g} s: "
                                               + "; ".join(f"{n}: {why}" for n, why in gone.items()))
        if self.o.before_relaunch is not None:
            self.o.before_relaunch(attempt.number)
        folder = self.settings.get("default_local_dir")
        if not folder:
            self.expected_resume = None
            return None
        if len(self.o.nodes) > 1:
            code, synced = relaunch.sync(self.o, folder, self._call)
            _say(f"ckpt sync {folder} --all over {len(self.o.nodes)} nodes: exit {code}"
                 + "".join(f"; {f['subject']}: {f['message']}" for f in synced.get("findings", ())
                           if f.get("severity") == "error")[:600])
        args, said, damaged = relaunch.resume_point(self.o, folder)
        _say(f"checkpoint {folder}: {said}")
        if args is None:
            return R.STOPPED, D.EXIT_NO_REQUEUE, (f"the checkpoint a resume loads is damaged and no earlier step is "
                                                  f"whole: {damaged}; fix: copy an intact copy of it from another node "
                                                  "(verl-ascend ckpt sync) or train from scratch")
        self.resume_args = args
        path = next((a.split("=", 1)[1] for a in args if a.startswith("trainer.resume_from_path=")), None)
        self.expected_resume = int(path.rsplit("_", 1)[1]) if path else self.tracker_now()
        if damaged:
            self.report.findings.append(Finding(WARNING, folder, said, "the damaged step is saved again when the run "
                                                "reaches it", code="ckpt_fallback"))
        return None

    def _call(self, argv, timeout):
        """A step of the relaunch run as a run of its own (marked, namespaced, ended with its timeout)."""
        mark = marks.Mark(runlog.SUPERVISE_MARK, f"relaunch-{os.getpid()}-{time.time_ns()}")
        return proc_launch.call(argv, self.env, self.cwd, mark, timeout)

    # -- after a failure ----------------------------------------------------------------------------------
    def conclude(self, attempt, handle, found, snap) -> D.Decision:
        attempt.detected_at = time.time()
        attempt.failed_at = (found.details.get("failed_at") or snap.now) - self.clock
        attempt.detected = found.code
        if snap.alive:  # the evidence is taken while the processes still exist
            folder = os.path.join(self.o.run_dir, f"attempt-{attempt.number}", "evidence")
            got = evidence.gather(folder, handle.pids(), attempt.log, attempt.started, self.o, attempt.mark)
            attempt.evidence = folder
            for line in got["summary"]:
                _say(f"evidence: {line}")
        family, fix, given = D.family_of(found, attempt.log)
        cls = D.retry_class(family, {"retry_class": given})
        attempt.family, attempt.retry_class, attempt.fix = family, cls, fix
        earlier = [{"family": a.family, "retry_class": a.retry_class, "tracker": a.tracker}
                   for a in self.report.attempts[:-1] if a.family]
        tracker = self.tracker_now()
        decision = D.decide(D.Failure(family, cls, found.message, fix), earlier, tracker,
                            len(self.report.attempts) - 1, self.policy)
        attempt.tracker = tracker
        attempt.decision, attempt.reason = decision.action, decision.reason
        where = {**found.where, "time": R._iso(attempt.detected_at), "attempt": attempt.number}  # not the monotonic clock
        self.report.findings.append(dataclasses.replace(found, severity="warning", subject=f"attempt {attempt.number}",
                                                        fix=fix or "", where=where, details={**found.details, "family": family}))
        _say(f"attempt {attempt.number}: {found.code}: {found.message}")
        _say(f"decision: {decision.action} — {decision.reason}")
        return decision

    def finish_attempt(self, attempt, handle, snap):
        survivors = handle.end() if handle is not None else []
        if snap.exit_code is None:
            snap.exit_code = handle.poll() if handle is not None else None
        attempt.ended, attempt.exit_code = time.time(), snap.exit_code
        attempt.resumed_from = timeline.resumed_from(snap)
        if attempt.tracker is None:  # what its training reached on disk: the kept steps (report.saved)
            attempt.tracker = self.tracker_now()
        self.history += timeline.steps(snap)
        if attempt.to_first_step_s is not None:
            self.startup_seen = max(self.startup_seen or 0.0, attempt.to_first_step_s)
        path = os.path.join(self.o.run_dir, f"attempt-{attempt.number}", "timeline.json")
        with outfiles.atomic(path) as tmp, open(tmp, "w") as fh:
            json.dump(snap.as_dict(), fh)
        if survivors:
            _say(f"still alive after the end: {marks.describe(survivors)}")
        else:
            _say(f"attempt {attempt.number}: nothing of it is left running")
        return survivors

    def stop(self, state: str, code: int, reason: str) -> R.Report:
        self.report.state, self.report.exit, self.report.reason = state, code, reason
        self.report.write()
        _say(f"{state} (exit {code}): {reason}")
        return self.report

    # -- the loop -------------------------------------------------------------------------------------
    def resume_state(self):
        """A report left by a supervisor before this one: its attempts, and the attempt still running, if any."""
        try:
            old = R.read(self.o.run_dir)
        except R.NoReport:
            return None
        self.report.attempts, self.report.findings = old.attempts, old.findings
        cur = old.current()
        if cur is None or old.state != R.RUNNING:
            return None
        if cur.pid and info.start_of(cur.pid) == cur.pid_start and cur.mark:
            _say(f"attempt {cur.number} (pid {cur.pid}) still runs: watching it, not starting another")
            return cur
        cur.ended, cur.detected, cur.reason = time.time(), "supervisor_gone", "its supervisor ended; so did it"
        return None

    def loop(self) -> R.Report:
        attached = self.resume_state()
        while True:
            if attached is not None:
                attempt, handle = attached, A.Attached(attached.mark, attached.pid, os.path.dirname(attached.log))
                attached = None
            else:
                with guard.hold_stop_signals(keep=True):  # a stop signal in the start: raised below, the attempt known
                    attempt, handle = self.start(len(self.report.attempts) + 1)
            try:
                guard.raise_held()
                done = self.one(attempt, handle)
            except BaseException as exc:  # a stop signal (guard.Stopped), Ctrl-C, an error of ours
                self.interrupted(attempt, handle, exc)
                raise
            if done is not None:
                return done

    def one(self, attempt, handle):
        """Watch one attempt to its end and act on it: the report when the run is over, None to relaunch."""
        found, snap = self.watch(attempt, handle)
        if found is None:
            self.finish_attempt(attempt, handle, snap)
            if self.o.deadline and time.time() >= self.o.deadline:
                step, folder = attempt.tracker, self.settings.get("default_local_dir")  # read as the attempt ended
                return self.stop(R.GAVE_UP, D.EXIT_GAVE_UP, "the deadline came; requeue to go on from " + (
                    f"global_step_{step}" if step is not None else "the start: no checkpoint was saved" if folder
                    else "its last checkpoint: where it is was not read from the command (trainer.default_local_dir)"))
            if self.o.dry_run and self.report.findings:
                return self.stop(R.WATCHED, D.EXIT_GAVE_UP, "dry run: failures seen, nothing done about them")
            return self.stop(R.DONE, D.EXIT_DONE, f"finished at step {attempt.last_step}")
        decision = self.conclude(attempt, handle, found, snap)
        self.finish_attempt(attempt, handle, snap)
        if self.o.dry_run:
            return self.stop(R.WATCHED, D.EXIT_GAVE_UP, f"dry run: would {decision.action}: {decision.reason}")
        if decision.action != D.RETRY:
            state = R.STOPPED if decision.exit_code == D.EXIT_NO_REQUEUE else R.GAVE_UP
            return self.stop(state, decision.exit_code, decision.reason)
        stop = self.prepare_relaunch(attempt)
        if stop is not None:
            return self.stop(*stop)
        self.report.write()
        _say(f"relaunching in {decision.delay_s:.0f} s with {' '.join(self.resume_args)}")
        time.sleep(decision.delay_s)
        return None

    def interrupted(self, attempt, handle, exc) -> None:
        """The supervisor itself is stopped. Bound, the attempt ends with it; unbound, it goes on training, and a
        supervisor started again on the run folder watches it."""
        if not self.o.bound:
            if attempt.ended is None:
                _say(f"stopped ({type(exc).__name__}); attempt {attempt.number} goes on (its processes carry "
                     f"{attempt.mark}): `verl-ascend supervise --run-dir {self.o.run_dir} -- ...` watches it again, "
                     f"`python -m verl_ascend.proc.marks end {attempt.mark}` ends it")
            return
        if attempt.ended is None:
            proc_launch.note_survivors(exc, handle.end())
            attempt.ended, attempt.detected = time.time(), "supervisor_stopped"
        self.stop(R.GAVE_UP, D.EXIT_GAVE_UP, f"the supervisor was stopped ({type(exc).__name__}); the attempt was ended")


def supervise(argv, env=None, cwd=None, options: Options = None, **kwargs) -> R.Report:
    """Supervise ``argv`` until it finishes or a decision stops it; returns the report (``report.exit`` is the exit
    code). ``options`` (or its fields as keyword arguments: ``run_dir=...``). Bad input raises a BadInput."""
    options = options or Options(**kwargs)
    env = dict(os.environ if env is None else env)
    cwd = cwd or os.getcwd()
    launch.check(argv, {})  # no command: refused before anything is read
    for name in options.stop_on:
        if name not in detect.HEALTH_CODES:
            raise launch.BadCommand(f"--stop-on {name}: not a health flag; choose from {', '.join(detect.HEALTH_CODES)}")
    _check_run_dir(options.run_dir)
    gone = relaunch.unreachable(options) if options.nodes else {}
    if gone:
        raise launch.BadCommand("--nodes: " + "; ".join(f"{n}: {why}" for n, why in gone.items()) + "; list every node "
                                "of the run as [user@]host[:port] that `--ssh` reaches without a password")
    settings = dict(options.settings) if options.settings is not None else launch.facts(argv, env, cwd)
    launch.check(argv, settings)
    return Supervisor(argv, env, cwd, options, settings).loop()


def _check_run_dir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise launch.BadCommand(f"--run-dir {path}: cannot be created ({exc.strerror}); choose a folder you can write") \
            from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise launch.BadCommand(f"--run-dir {path}: not writable by this user; choose a folder you can write")

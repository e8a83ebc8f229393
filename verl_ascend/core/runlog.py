"""The words of the lines our own tools write into a run's console log, defined once.

Three parties share them: the processes inside a rehearsal's loop write them (``rehearse/loop/report.py``,
``rehearse/run/cluster.py``), ``rehearse`` reads them back while the run goes (``rehearse/run/trainer.py``) and
judges it, and ``diagnose`` reads them in a log it is given afterwards (``diagnose/timeline.py``,
``diagnose/families/cluster.py``). A word changed here changes for all three; a test reads a real
rehearsal's log through each reader.
"""

import re

# every line the plugin writes from inside a rehearsal's processes starts so (Ray adds "(Actor pid=N)" before it)
PREFIX = "verl-ascend rehearse:"
# the rehearsal's own verdict on a run it ended (a planted fault): what the run cannot say itself
OWN_ERROR = PREFIX + " error: "
# the last line the rehearsal writes into a console log: the trainer's exit code and the phase ("(train)")
EXIT_LINE = PREFIX + " the trainer exited with code "
# the TaskRunner's line at the loop's first rollout dispatch: the loop is mid-step (a planted fault waits for it)
DISPATCH = "rollout dispatch "
# the launcher's line when it planted a fault, and the verdict's words for a node that died
FAULT_PLANTED = "fault planted: "
NODE_DIED = "died mid-step"
# a rank's digest of its weights after a checkpoint save or load (the verdict compares them; not about the plugin)
WEIGHTS = "weights of "

# a process of the loop says where it runs and what it holds (one line per role and node)
NODE_LINE = re.compile(r"^node (\S+): (.+?): device (\S+), platform (\S+); settings ?(.*)$")

# the environment variable every process of a run carries, with the run's own value: how its processes are
# found and ended wherever they went (``verl_ascend/proc``); rehearse and supervise each name their own
REHEARSE_MARK = "VERL_ASCEND_REHEARSE_RUN"
SUPERVISE_MARK = "VERL_ASCEND_SUPERVISE_RUN"
MARKS = (REHEARSE_MARK, SUPERVISE_MARK)

# a fault `rehearse --supervise --fault KIND` plants inside its own loop (rehearse/loop/fault.py): the supervisor
# gives ``KIND@CHECKPOINT_DIR`` to the attempts that carry it (the first only, or every one for a crash loop);
# ray_runtime_env carries it to the workers. Not a setting: node lines leave it out, as they leave the marks.
FAULT_VAR = "VERL_ASCEND_REHEARSE_FAULT"
# which node of a multi-node rehearsal a process runs on (``rehearse/run/cluster.py`` gives it to worker node k's
# ``ray start``, ``rehearse/run/nodeshell.py`` to what runs in node k's view; the head's processes have none). Only
# there: the rehearsal's nodes share one host's /proc, a cluster's nodes do not (``supervise/evidence.py``).
NODE_VAR = "VERL_ASCEND_REHEARSE_NODE"
NOT_SETTINGS = MARKS + (FAULT_VAR, NODE_VAR)
# the kinds the loop itself plants in the actor's rank 0, at its first optimizer step after a checkpoint exists
FAULT_KILL = "kill-worker"   # SIGKILL: a Ray worker dies mid-step (the OOM killer's way)
FAULT_STOP = "hang-rank"     # SIGSTOP: a rank stops mid-update, the others wait for it in a collective
FAULT_LOOP = "crash-loop"    # SIGKILL at the same step in every attempt


def node_line(ip: str, role: str, device: str, platform: str, settings: dict) -> str:
    """The line :data:`NODE_LINE` reads."""
    return f"node {ip}: {role}: device {device}, platform {platform}; settings " + " ".join(
        f"{k}={v}" for k, v in sorted(settings.items()))


def own_verdict_pattern() -> str:
    """A regular expression for the rehearsal's verdict on a worker node it killed; group 1 is the address."""
    return re.escape(OWN_ERROR) + r"node \d+ \(worker node \d+, (\S+)\) " + re.escape(NODE_DIED)


def exit_line_pattern(code: str = r"-?\d+") -> str:
    """A regular expression for :data:`EXIT_LINE` at a line's start, with ``code`` (a pattern) as the code."""
    return "^" + re.escape(EXIT_LINE) + code + " "

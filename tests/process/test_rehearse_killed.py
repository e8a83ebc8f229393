"""`verl-ascend rehearse` stopped (SIGTERM) or killed (SIGKILL) in the middle of a phase leaves nothing running.

The real CLI on the shipped 7B Megatron recipe, through the real main_ppo. A rehearsal starts processes by two
code paths only, both on the process layer (verl_ascend/proc): a main_ppo run (``run/trainer.run``: the train and
the resume phase) and a shorter step (``run/trainer.step``: the conversion of the tiny model before the first
run, and the per-node ``ckpt check`` / ``ckpt sync`` between the runs of a multi-node rehearsal). Each path is
stopped and killed here at the first phase that reaches it — the conversion, and the train run once Ray's raylet
lives — which is the cheapest way to hold every process kind the path starts. Every process of a rehearsal carries
``VERL_ASCEND_REHEARSE_RUN=rh<rehearse's pid>-...``; afterwards none may be alive, found by a scan of /proc (any
namespace). A stopped rehearse says so only after it looked (exit 128 + 15); a killed one says nothing, and the
kernel (parent-death signal, PID namespace) does the ending. The resume phase and the between-runs steps run the
same two paths; docs/rehearse.md gives the by-hand kill of each.
"""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from rehearsal_helpers import MAIN_PPO_TIMEOUT, RECIPE, needs_09
from subproc import clean_env

MARK = b"VERL_ASCEND_REHEARSE_RUN="


def marked(prefix: str) -> list:
    """(pid, mark value, command) of every process whose rehearsal mark starts with ``prefix``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            items = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        for item in items:
            if item.startswith(MARK + prefix.encode()):
                found.append((int(entry.name), item[len(MARK):].decode(), cmd))
    return found


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


# phase -> (the line of rehearse's that says the phase began, what must be alive before the signal)
PHASES = {
    "convert": ("converting the tiny model", lambda procs: any("-convert-" in mark for _, mark, _ in procs)),
    "train": ("rehearse: train:", lambda procs: any("raylet" in cmd for _, _, cmd in procs)),
}


@needs_09
@pytest.mark.parametrize("phase", sorted(PHASES))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_rehearse_stopped_or_killed_mid_phase_leaves_nothing(phase, sig):
    said, ready = PHASES[phase]
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        out = Path(tmp) / "out"
        proc = subprocess.Popen([sys.executable, "-m", "verl_ascend", "rehearse", str(RECIPE), "--out", str(out),
                                 "--nproc", "2", "--steps", "1", "--timeout", str(MAIN_PPO_TIMEOUT)],
                                env=clean_env(), cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        prefix = f"rh{proc.pid}-"
        lines, begun = [], threading.Event()

        def read():
            for line in proc.stdout:
                lines.append(line)
                if said in line:
                    begun.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert begun.wait(600), "".join(lines[-40:])
            assert wait_for(lambda: ready(marked(prefix)), 300), (marked(prefix), "".join(lines[-40:]))
            alive = marked(prefix)
            proc.send_signal(sig)
            code = proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(timeout=30)
        text = "".join(lines)
        if sig == signal.SIGTERM:  # it ended the run itself, and said so only after looking
            assert code == 128 + signal.SIGTERM, text[-3000:]
            assert "stopped by SIGTERM; the run was ended (looked: nothing of it is left running)" in text, text[-3000:]
        else:
            assert code == -signal.SIGKILL, text[-3000:]
        # 30 s is the bound for the kernel's ending, not a wait that helps it: nothing here ends anything
        assert wait_for(lambda: not marked(prefix), 30), (marked(prefix), [a for a in alive], text[-2000:])

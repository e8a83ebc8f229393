"""verl's `npu-smi info -t board -i N` probe, run before launch so its failure shows here.

Why: verl's ``get_npu_versions()`` (verl/utils/device.py, 0.9.1) is reached when the vLLM rollout
starts (IPC support check, bucketed weight transfer). It asks ``npu-smi info -t board -i 1`` — a
hard-coded card id — and on failure retries the first id of ``ASCEND_VISIBLE_DEVICES``, then that id
``// 2`` (on A3 the variable holds die indices, npu-smi takes card ids). With the variable unset it
re-raises, so a container that does not see card 1 fails minutes into a run (verl#6756, verl#6751).
How: the same sequence of npu-smi calls, judged the same way (exit status, then a "Software Version"
line); nothing of verl is imported. Skipped when the installed verl has no such probe (0.6.1).
Upstream: verl#6756 / #6751 (open); verl PR #5246 touches the same function.
Remove when: verl probes a card it can see (e.g. the first of `npu-smi info -m`).
"""

import shutil
import subprocess

from verl_ascend.core import verl_install

from .findings import error, ok, skip

TIMEOUT = 20  # seconds per npu-smi call


def _board(exe, npu_id: str):
    """(answered, detail) for `npu-smi info -t board -i ID`: answered is exit 0 (verl's check=True);
    detail is the failure's last line, or the Software Version verl parses ("" when absent)."""
    try:
        proc = subprocess.run([exe, "info", "-t", "board", "-i", npu_id], capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, f"no answer within {TIMEOUT} s"
    if proc.returncode != 0:
        last = (proc.stdout + proc.stderr).strip().splitlines() or [f"exit {proc.returncode}"]
        return False, last[-1]
    for line in proc.stdout.splitlines():
        if "Software Version" in line:  # verl reads the first such line, the text after ':'
            parts = line.split(":")
            return True, parts[1].strip() if len(parts) > 1 else ""
    return True, ""


def probe_sequence(env, board) -> tuple:
    """(card id that answered or None, its detail or why it stopped, [(id, why it failed)]), following
    verl 0.9.1: the first id that exits 0 ends the search."""
    tried = []
    good, why = board("1")
    if good:
        return "1", why, tried
    tried.append(("1", why))
    visible = env.get("ASCEND_VISIBLE_DEVICES", "")
    if not visible:
        return None, "ASCEND_VISIBLE_DEVICES is unset, so verl re-raises", tried
    try:
        first = int(visible.split(",")[0])
    except ValueError:
        return None, f"ASCEND_VISIBLE_DEVICES={visible!r} does not start with a number, so verl raises ValueError", tried
    for npu_id in (str(first), str(first // 2)):
        good, why = board(npu_id)
        if good:
            return npu_id, why, tried
        tried.append((npu_id, why))
    return None, "the last retry (the card of die N, N // 2) failed too", tried


def verl_probes_board():
    """True when the installed verl's utils/device.py runs the board probe, False when it does not,
    None without verl (read from the file: importing verl starts torch)."""
    root = verl_install.package_dir()
    if root is None:
        return None
    try:
        text = (root / "utils" / "device.py").read_text()
    except OSError:
        return False
    return "def get_npu_versions" in text and '"board"' in text


def check(env, verl_probe=None) -> list:
    """`verl_probe`: verl_probes_board()'s answer; None (no verl yet) still runs the probe."""
    if verl_probe is False:
        return [skip(check, f"the installed verl {verl_install.version()} does not probe `npu-smi info -t board` "
                     "(get_npu_versions, verl 0.7+): not emulated")]
    exe = shutil.which("npu-smi")
    if not exe:
        return [skip(check, "npu-smi is not on PATH: verl's `npu-smi info -t board` probe not emulated")]
    answered, detail, tried = probe_sequence(env, lambda i: _board(exe, i))
    note = f" after {', '.join(f'-i {i}' for i, _ in tried)} failed" if tried else ""
    if answered is not None and not detail:
        return [error(check, f"`npu-smi info -t board -i {answered}` has no 'Software Version' line: verl's "
                      "get_npu_versions() raises when the vLLM rollout starts",
                      "update the NPU driver/npu-smi, or check that this card is the one the job uses")]
    if answered is not None:
        return [ok(check, f"verl's version probe `npu-smi info -t board -i {answered}` answers "
                     f"(Software Version {detail}){note}")]
    reason = detail
    shown = "; ".join(f"-i {i}: {why}" for i, why in tried)
    return [error(check, f"verl's get_npu_versions() would fail when the vLLM rollout starts: {shown}; {reason} "
                  "(verl#6756, verl#6751)",
                  "export ASCEND_VISIBLE_DEVICES=<first card this container sees, as in `npu-smi info -m`> "
                  "before `ray start`")]

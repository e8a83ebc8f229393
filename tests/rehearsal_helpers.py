"""What the rehearsal tests share: running `verl-ascend rehearse`, reading its logs, proving nothing is left."""

import contextlib
import os
import re
import signal
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from subproc import clean_env, processes_naming, run_cli

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh"
DAPO_RECIPE = ROOT / "recipes" / "dapo_qwen2_5_7b_a2.sh"
NODES_RECIPE = ROOT / "recipes" / "grpo_qwen2_5_32b_a2.sh"  # the multi-node rehearsals' (test_rehearse_nodes*.py)
NODES = ("--nnodes", "2", "--nproc", "1", "--steps", "1")
# verl's own Ascend example of GRPO on FSDP, verbatim (examples/ascend_extras/grpo_trainer/run_qwen3_4b_fsdp.sh): the
# cheapest recipe that runs the whole loop; its MODEL_PATH names a folder with Qwen3-4B's config as its model card
# publishes it (the sizes the tiny model shrinks; the family it keeps)
FSDP_EXAMPLE = ROOT / "tests" / "fixtures" / "wild_recipes" / "ascend_qwen3_4b_grpo_fsdp.sh"
QWEN3_4B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
            "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
            "rope_theta": 1000000, "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False}
VERL = version("verl")
SUPPORTED = not VERL.startswith(("0.5.", "0.6.", "0.7.", "0.8."))  # test_rehearse asserts the sources say the same
needs_09 = pytest.mark.skipif(not SUPPORTED, reason=f"verl {VERL} has no platform registry: the refusal test runs")
RUN_TIMEOUT = 1500  # hard limit of one `rehearse` call; each main_ppo in it is ended after MAIN_PPO_TIMEOUT
MAIN_PPO_TIMEOUT = 600


def rehearse(out: Path, *extra, recipe=RECIPE, timeout=RUN_TIMEOUT, env=None):
    return subprocess.run([sys.executable, "-m", "verl_ascend", "rehearse", str(recipe), "--out", str(out),
                           "--timeout", str(MAIN_PPO_TIMEOUT), *extra],
                          env=env or clean_env(), cwd=str(out.parent), capture_output=True, text=True, timeout=timeout)


def weights_named(folder) -> list:
    """``--override`` args naming the actor's and ref's dist checkpoint (the rehearsal then converts nothing)."""
    return [arg for role in ("actor", "ref") for arg in
            ("--override", f"actor_rollout_ref.{role}.megatron.dist_checkpointing_path={folder}")]


def logs_tail(out: Path, chars: int = 6000) -> str:
    """The end of each console log of a rehearsal (the temporary folder is gone when the assertion is read)."""
    parts = [f"\n--- {log.name}:\n" + log.read_text(errors="replace")[-chars:] for log in sorted(out.glob("console*.log"))]
    return "".join(parts) or "\n(no console log)"


def steps(log: Path) -> dict:
    found = {}
    for line in log.read_text(errors="replace").splitlines():
        match = re.search(r"step:(\d+) - (.*)", line)
        if match:
            metrics = dict(re.findall(r"([\w/@.\-]+):([-+0-9.eE]+|nan|inf)", match.group(2)))
            found[int(match.group(1))] = {k: float(v) for k, v in metrics.items()}
    return found


def ray_folder(stdout: str) -> str:
    match = re.search(r"Ray in (\S+)", stdout)
    assert match, stdout[-2000:]
    return match.group(1)


def namespaces(stdout: str) -> list:
    """(namespace, mark) of each main_ppo the rehearsal ran."""
    return re.findall(r"main_(?:ppo|dapo) ran in PID namespace (pid:\[\d+\]) \(its processes carry "
                      r"VERL_ASCEND_REHEARSE_RUN=(\S+)\)", stdout)


def alive_in(namespace: str, mark: str) -> list:
    """Processes still in that PID namespace that carry the run's mark (Ray renames its workers, so command
    lines cannot tell; the kernel reuses a dead namespace's number, so the number alone cannot either)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "ns" / "pid") == namespace:
                environ = (entry / "environ").read_bytes().split(b"\0")
                if f"VERL_ASCEND_REHEARSE_RUN={mark}".encode() in environ:
                    found.append((entry.name, (entry / "cmdline").read_bytes()[:120]))
        except OSError:
            continue
    return found


def assert_nothing_left(proc, out: Path):
    spaces = namespaces(proc.stdout)
    assert spaces, proc.stdout[-2000:]  # every main_ppo ran in a PID namespace of its own
    for space, mark in spaces:
        assert alive_in(space, mark) == [], space
    assert processes_naming(ray_folder(proc.stdout), str(out)) == []


@contextlib.contextmanager
def cpu_load():
    """One busy process beside the run (CI runs under load); its group is ended on exit."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        yield
    finally:
        os.killpg(burner.pid, signal.SIGKILL)
        burner.wait()


def diagnosed(out: Path, logs=None):
    """`verl-ascend diagnose` on the rehearsal's own console logs (main_ppo's, as the run wrote them), or on ``logs``."""
    logs = [str(p) for p in logs] if logs else sorted(str(p) for p in out.glob("console*.log") if p.suffix == ".log")
    assert logs, sorted(p.name for p in out.iterdir())
    return run_cli("diagnose", *logs, timeout=300)


def assert_diagnosed_clean(out: Path, logs=None):
    """A healthy rehearsal's logs (or ``logs``), read by diagnose: no failure (exit 0), whatever its shutdown printed."""
    proc = diagnosed(out, logs)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def assert_diagnosed_as(out: Path, planted: str, logs=None):
    """A failed rehearsal's logs (or ``logs``), read by diagnose: exit 1, the planted fault in the headline finding."""
    proc = diagnosed(out, logs)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    first = proc.stdout.split("[2]")[0]  # the headline and the first finding, not a later echo
    assert planted in first, (planted, proc.stdout[-4000:])
    return proc

"""`verl-ascend check` as a program (the CLI in subprocesses, each imports verl: keep these few) and the
shipped shell scripts themselves. What check judges, in-process: tests/unit/test_check_recipes.py."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from subproc import FAKE_BIN, ROOT, clean_env, last_json, run_cli

RECIPES = ROOT / "recipes"
ARR = "actor_rollout_ref"


def test_cli_json_on_the_235b_recipe(tmp_path):
    proc = run_cli("check", str(RECIPES / "grpo_qwen3_235b_a22b_a2.sh"), "--json",
                   env=clean_env(HOME=str(tmp_path)), timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = last_json(proc)
    assert report["layout"]["actor"] == {"strategy": "megatron", "tp": 4, "pp": 8, "cp": 1, "ep": 4, "dp": 4}
    assert "--set" not in proc.stderr


def test_cli_unknown_key_is_a_finding_not_a_traceback(tmp_path):
    proc = run_cli("check", str(RECIPES / "grpo_qwen2_5_32b_a2.sh"), "--set", f"{ARR}.actor.no_such_key=1",
                   "--set", "trainer.nnodes=4", env=clean_env(HOME=str(tmp_path)), timeout=240)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "ERROR compose:" in proc.stdout and f"+{ARR}.actor.no_such_key=1" in proc.stdout
    assert "result: errors (exit 2)" in proc.stdout


def test_cli_bad_input_exits_2(tmp_path):
    proc = run_cli("check", str(tmp_path / "missing.sh"), env=clean_env(HOME=str(tmp_path)), timeout=120)
    assert proc.returncode == 2 and "missing.sh" in proc.stderr
    proc = run_cli("check", str(RECIPES / "grpo_qwen2_5_7b_a2.sh"), "--set", "no-equals-sign",
                   env=clean_env(HOME=str(tmp_path)), timeout=120)
    assert proc.returncode == 2 and "no-equals-sign" in proc.stderr


# ---- the shell scripts themselves ----

@pytest.mark.verl_agnostic
@pytest.mark.parametrize("script", sorted(p.name for p in RECIPES.glob("*.sh")))
def test_every_shipped_script_parses_with_bash_n(script):
    proc = subprocess.run(["bash", "-n", str(RECIPES / script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.verl_agnostic
def test_ray_start_waits_for_all_npus(tmp_path):
    assert (FAKE_BIN / "ray").exists()  # the scripts below must meet the double, never a real `ray`
    env = clean_env(bins=("ray",), HOME=str(tmp_path), NNODES="2", RAY_WAIT_TIMEOUT="2", RAY_WAIT_INTERVAL="1")
    ready = subprocess.run(["bash", str(RECIPES / "ray_start_head.sh")], env=dict(env, FAKE_RAY_NPUS="16"),
                           capture_output=True, text=True, timeout=60)
    assert ready.returncode == 0 and "ready: 16 NPU" in ready.stdout, ready.stdout + ready.stderr
    short = subprocess.run(["bash", str(RECIPES / "ray_start_worker.sh"), "10.0.0.1"], env=dict(env, FAKE_RAY_NPUS="8"),
                           capture_output=True, text=True, timeout=60)
    assert short.returncode == 1
    assert "shows 8 NPU, the job needs 16 (2 nodes x 8)" in short.stderr
    assert "--address=10.0.0.1:6166" in short.stdout
    usage = subprocess.run(["bash", str(RECIPES / "ray_start_worker.sh")], env=env, capture_output=True, text=True,
                           timeout=60)
    assert usage.returncode == 2 and "HEAD_IP" in usage.stderr


def test_bridge_command_prints_what_selects_each_bridge_on_this_verl():
    from verl_ascend.core import verl_install

    switch = verl_install.bridge_switch()
    mb = run_cli("bridge", "mbridge", timeout=120)
    assert mb.returncode == 0, mb.stderr
    assert mb.stdout.split() == ([f"{ARR}.actor.megatron.vanilla_mbridge=True"] if switch else []), mb.stdout
    nv = run_cli("bridge", "megatron-bridge", timeout=120)
    if switch:
        assert nv.returncode == 0 and nv.stdout.split() == [f"{ARR}.actor.megatron.vanilla_mbridge=False"], nv
    else:  # verl <= 0.7: mbridge is its only bridge
        assert nv.returncode == 2 and "mbridge only" in nv.stderr and "MEGATRON_BRIDGE=mbridge" in nv.stderr, nv


def test_the_recipes_bridge_question_is_answered_for_the_checked_verl_without_an_activated_venv(tmp_path):
    # a user calling the venv's python by its path, the venv not on PATH: the recipe's `verl-ascend bridge`
    # still finds the verl-ascend of the environment being checked (the sandbox puts its scripts folder on PATH)
    env = clean_env(HOME=str(tmp_path))
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not Path(p, "verl-ascend").exists())
    proc = subprocess.run([sys.executable, "-m", "verl_ascend", "check", str(RECIPES / "grpo_qwen2_5_7b_a2.sh")],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "needs verl-ascend on PATH" not in proc.stdout + proc.stderr

"""patches/: every verl diff applies to the published source of its version, and a source tree with
the diff applied behaves like the runtime patch with the plugin switched off (VERL_ASCEND=0)."""

import json
import shutil
import subprocess

import pytest
from subproc import FAKE_SITE, clean_env, last_json, run_python
from upstream_trees import apply, copy_tree, installed_version, verl_tree

from verl_ascend.upstream import APPLIES, dry_run, load_diffs

VERL_DIFFS = [d for d in load_diffs() if d.project == "verl"]


def _ids(diff):
    return f"{diff.version}/{diff.fix}"


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("diff", VERL_DIFFS, ids=_ids)
def test_diff_applies_to_published_source(diff):
    root = verl_tree(diff.version)
    ok, message = dry_run(diff.path, root)
    assert ok, f"git apply --check: {message}"
    proc = subprocess.run(["patch", "-p1", "--dry-run", "--batch", "--forward", "--fuzz=0", "-i", str(diff.path)],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {"Subject", "Runtime-patch", "Upstream", "Remove-when"} <= set(diff.header), diff.header


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("version", sorted({d.version for d in VERL_DIFFS}))
def test_all_diffs_of_a_version_apply_together(version, tmp_path):
    root = copy_tree(version, tmp_path)
    for diff in (d for d in VERL_DIFFS if d.version == version):
        apply(diff.path, root)
        assert dry_run(diff.path, root, reverse=True)[0], f"{diff.fix} does not read as applied"
    compiled = subprocess.run(["python", "-m", "compileall", "-q", str(root / "verl")],
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr


# --- behaviour of the patched source, in the environment whose verl is that version -------------

MSTX = """
import types, torch_npu
if not hasattr(torch_npu.npu, "mstx"):  # markers verl's profiler imports on NPU; older doubles lack them
    torch_npu.npu.mstx = types.SimpleNamespace(mark=lambda *a, **k: None, range_start=lambda *a, **k: 0,
                                               range_end=lambda *a, **k: None, mstx_range=lambda *a, **k: (lambda f: f))
"""

DEVICE_PROBE = """
import json{prelude}
import verl
from verl.utils.device import get_device_name, get_nccl_backend
out = {{"verl_file": verl.__file__, "device": get_device_name(), "backend": get_nccl_backend()}}
{extra}
print(json.dumps(out))
"""

# RayPPOTrainer built from verl's own composed ppo_trainer config (trainer.device defaults to cuda).
TRAINER_PROBE = """
import os
from hydra import compose, initialize_config_dir
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, Role
with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None):
    config = compose(config_name="ppo_trainer")
    cpu_config = compose(config_name="ppo_trainer", overrides=["trainer.device=cpu"])
RayPPOTrainer._create_dataloader = lambda self, *args, **kwargs: None  # needs datasets; not under test
out["config_device_before"] = config.trainer.device
def build(cfg):
    return RayPPOTrainer(config=cfg, tokenizer=None, role_worker_mapping={Role.ActorRollout: object},
                         resource_pool_manager=None)
out["trainer_device"] = build(config).device_name
out["config_device_after"] = config.trainer.device
out["cpu_kept"] = build(cpu_config).device_name
"""

# MindSpeed's adaptor imports transfer_to_npu before verl; a stray nvidia-smi is on PATH: the worst case.
ASCEND_PRELUDE = "\nimport torch_npu.contrib.transfer_to_npu"


def _diffs_for_installed(fix=None):
    version = installed_version()
    chosen = [d for d in VERL_DIFFS if d.version == version and (fix is None or d.fix == fix)]
    if not chosen:
        pytest.skip(f"no {fix or 'verl'} diff for the installed verl {version}")
    return chosen


@pytest.fixture(scope="module")
def patched_tree(tmp_path_factory):
    """A copy of the installed verl with every diff for its version applied."""
    root = copy_tree(installed_version(), tmp_path_factory.mktemp("patched"))
    for diff in _diffs_for_installed():
        apply(diff.path, root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _patched_env(root, fake_npu=True, **extra):
    env = clean_env(fake_npu=fake_npu, VERL_ASCEND="0", **extra)
    env["PYTHONPATH"] = f"{root}:{FAKE_SITE}" if fake_npu else str(root)
    return env


def test_patched_source_gives_npu_like_the_runtime_patch(patched_tree):
    _diffs_for_installed("device")
    needs_trainer = any(d.fix == "trainer_device" for d in _diffs_for_installed())
    code = DEVICE_PROBE.format(prelude=MSTX + ASCEND_PRELUDE, extra=TRAINER_PROBE if needs_trainer else "")
    out = last_json(run_python(code, env=_patched_env(patched_tree, bins=("nvidia-smi",))))
    assert out["verl_file"].startswith(str(patched_tree))
    # The runtime patch's answer in the same situation (tests/test_device.py::test_all_three_at_once).
    assert (out["device"], out["backend"]) == ("npu", "hccl")
    if needs_trainer:  # runtime patch trainer_device: cuda -> npu, cpu kept
        assert out["config_device_before"] == "cuda"
        assert (out["trainer_device"], out["config_device_after"], out["cpu_kept"]) == ("npu", "npu", "cpu")


def test_patched_source_changes_nothing_without_ascend(patched_tree):
    # Stock verl's answer here comes from the installed verl with the plugin on, which off Ascend hosts
    # changes nothing (tests/test_device.py::test_without_doubles_the_answer_is_verls_own); the same
    # run shows the installed verl passes the supported-range probe. The stock answer in the Ascend
    # situation (cuda) is tests/test_device.py::test_transfer_to_npu_without_plugin_reproduces_the_bug.
    _diffs_for_installed("device")
    patched = last_json(run_python(DEVICE_PROBE.format(prelude="", extra=""), env=_patched_env(patched_tree, fake_npu=False)))
    extra = "from verl_ascend import support\nout['support'] = support.verdict()"
    proc = run_python(DEVICE_PROBE.format(prelude="", extra=extra))
    stock = last_json(proc)
    assert patched["verl_file"].startswith(str(patched_tree))
    assert (patched["device"], patched["backend"]) == (stock["device"], stock["backend"])
    assert stock["support"] == {"verl": installed_version(), "supported": True, "reason": ""}
    assert "is outside the range" not in proc.stderr


def test_patched_source_reports_broken_torch_npu_once(patched_tree):
    # The runtime patch raises with the CANN fix; the diff, fit for upstream, warns once and carries on.
    _diffs_for_installed("device")
    proc = run_python(DEVICE_PROBE.format(prelude="", extra=""),
                      env=_patched_env(patched_tree, FAKE_TORCH_NPU_BROKEN="1"))
    out = last_json(proc)
    warnings = [ln for ln in proc.stderr.splitlines() if "torch_npu is installed but cannot be imported" in ln]
    assert len(warnings) == 1, proc.stderr[-3000:]
    assert "libhccl.so" in warnings[0] and "set_env.sh" in warnings[0]
    assert out["device"] != "npu"

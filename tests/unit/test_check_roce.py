"""check's `roce` rule (#36 item 4): HCCL_INTRA_ROCE_ENABLE judged per CANN version and checkpoint engine.

verl's checkpoint-engine README (verl PR 5546) requires HCCL_INTRA_ROCE_ENABLE=1 for kimi_ckpt_engine on Ascend
from CANN 8.5.0 on; check used to say the variable has no effect for verl on A3 whatever the engine."""

import json

import pytest
from omegaconf import OmegaConf
from subproc import ROOT, clean_env, last_json, run_cli

from verl_ascend.check import alloc, roce, rules
from verl_ascend.core.profiles import PROFILES

RECIPE = str(ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh")


def ctx(backend=None, cann="", device="a2", **env):
    rollout = {"name": "vllm"}
    if backend:
        rollout["checkpoint_engine"] = {"backend": backend}
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}})
    return rules.Context(cfg, None, False, profile=PROFILES[device], launch_env=env, cann=cann)


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("backend, cann, env, expect", [
    ("kimi_ckpt_engine", "8.5.0", {}, "warning"),                                     # required, missing
    ("kimi_ckpt_engine", "9.1.0", {"HCCL_INTRA_ROCE_ENABLE": "0"}, "warning"),        # required, wrong value
    ("kimi_ckpt_engine", "8.5.0", {"HCCL_INTRA_ROCE_ENABLE": "1"}, None),
    ("kimi_ckpt_engine", "8.3.RC1", {}, None),                                         # before 8.5: not needed
    ("kimi_ckpt_engine", "", {}, "warning"),                                           # unknown: says from when
    ("kimi_ckpt_engine", "", {"ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/ascend-toolkit/8.0.RC3"}, None),
    ("kimi_ckpt_engine", "", {"ASCEND_HOME_PATH": "/usr/local/Ascend/cann-8.5.0"}, "warning"),
    ("naive", "8.5.0", {}, None),
    ("nccl", "8.5.0", {}, None),
    (None, "8.5.0", {}, None),                                                         # verl's default, naive
])
def test_kimi_engine_needs_intra_roce_from_cann_8_5(backend, cann, env, expect):
    found = roce.findings(ctx(backend, cann, **env))
    assert [f.severity for f in found] == ([expect] if expect else []), found
    if expect:
        (f,) = found
        assert f.subject == "roce" and roce.BACKEND in f.keys and "HCCL_INTRA_ROCE_ENABLE=1" in f.fix
        assert "8.5.0" in f.message and roce.README in f.sources
        known = cann or roce.toolkit_version(env)[0]
        assert (f"CANN is {known}" in f.message) if known else ("not known here" in f.message and "--cann" in f.message)


@pytest.mark.verl_agnostic
def test_the_version_is_read_from_the_toolkits_install_info(tmp_path):
    info = tmp_path / "aarch64-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir()
    info.write_text("package_name=Ascend-cann-toolkit\nversion=8.5.0\narch=aarch64\n")
    assert roce.toolkit_version({"ASCEND_TOOLKIT_HOME": str(tmp_path)}) == ("8.5.0", str(info))
    (f,) = roce.findings(ctx("kimi_ckpt_engine", ASCEND_TOOLKIT_HOME=str(tmp_path)))
    assert "CANN is 8.5.0" in f.message and str(info) in f.message
    info.write_text("version=8.2.RC1\n")
    assert roce.findings(ctx("kimi_ckpt_engine", ASCEND_TOOLKIT_HOME=str(tmp_path))) == []


@pytest.mark.verl_agnostic
def test_on_a3_the_variable_is_no_longer_called_useless_for_verl():
    (f,) = roce.findings(ctx("naive", device="a3", HCCL_INTRA_ROCE_ENABLE="1"))
    assert f.severity == "info" and roce.KIMI in f.message and "no effect for verl" not in f.message
    assert roce.findings(ctx("kimi_ckpt_engine", "8.5.0", device="a3", HCCL_INTRA_ROCE_ENABLE="1")) == []
    env_texts = [f.message for f in rules.env(rules.Context(None, None, False, profile=PROFILES["a3"],
                                                            launch_env={"HCCL_INTRA_ROCE_ENABLE": "1"}))]
    assert not any("HCCL_INTRA_ROCE_ENABLE" in m for m in env_texts), env_texts


@pytest.mark.verl_agnostic
def test_alloc_names_verls_own_toggle_as_the_alternative():
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": "vllm", "enable_sleep_mode": True}}})
    (f,) = alloc.findings(rules.Context(cfg, None, False, launch_env={alloc.VAR: "expandable_segments:True"}))
    assert "6346" in f.fix and "torch_npu >= 2.9" in f.fix and "expandable_segments patch" in f.fix
    assert "https://github.com/verl-project/verl/pull/6346" in f.sources


def test_check_cli_with_a_kimi_engine_on_cann_8_5(tmp_path):
    env = clean_env(HOME=str(tmp_path))
    for name in ("HCCL_INTRA_ROCE_ENABLE", "ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        env.pop(name, None)
    args = ("check", RECIPE, "--json", "--set", f"{roce.BACKEND}=kimi_ckpt_engine")
    proc = run_cli(*args, "--cann", "8.5.0", env=env)
    report = last_json(proc)
    found = [f for f in report["findings"] if f["subject"] == "roce"]
    if not _verl_has_checkpoint_engines():  # verl <= 0.7.0: the key itself is refused, nothing to judge
        assert found == [] and any(roce.BACKEND in f["message"] for f in report["findings"] if f["subject"] == "compose")
    else:
        assert [f["severity"] for f in found] == ["warning"], json.dumps(report["findings"], indent=1)
        older = last_json(run_cli(*args, "--cann", "8.0.RC3", env=env))
        assert [f for f in older["findings"] if f["subject"] == "roce"] == []
    assert proc.returncode >= 1
    bad = run_cli(*args, "--cann", "latest", env=env)
    assert bad.returncode == 2 and "'latest'" in bad.stderr + bad.stdout and "--cann 8.5.0" in bad.stderr + bad.stdout


def _verl_has_checkpoint_engines() -> bool:
    """Does the installed verl's rollout config have checkpoint_engine (verl 0.7.1+), read from its files?"""
    from verl_ascend.core import verl_install

    path = verl_install.package_dir() / "trainer" / "config" / "rollout" / "rollout.yaml"
    return path.is_file() and "\ncheckpoint_engine:" in path.read_text()

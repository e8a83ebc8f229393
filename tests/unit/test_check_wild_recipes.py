"""`verl-ascend check` on recipes written the way launch scripts elsewhere are, in this process
(run_check; the recipe runs in its sandbox): the shell constructs work, a timeout ends what the recipe
started, and the verdicts are right (SP factor, rollout engine, host limits, hub ids, fix texts). That
nothing of a hostile recipe touches the host, and the refusal without a sandbox:
tests/process/test_check_wild.py."""

import json
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
from subproc import ROOT, path_without

WILD = ROOT / "tests" / "fixtures" / "wild_recipes"
ARR = "actor_rollout_ref"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path


@pytest.fixture
def check(monkeypatch):
    """run_check from a launch directory (the recipe runs from the caller's current directory)."""
    from verl_ascend.check import run_check

    def run(script, cwd=None, sets=()):
        if cwd:
            monkeypatch.chdir(cwd)
        return run_check(str(script), list(sets))

    return run


def findings(report, rule=None, severity=None):
    return [f for f in report["findings"] if (rule is None or f["subject"] == rule)
            and (severity is None or f["severity"] == severity)]


def test_text_report_lists_what_was_skipped():
    from verl_ascend.check.render import text
    from verl_ascend.check.report import Report

    device = {"profile": "a2", "title": "Atlas 800T A2", "per": "NPU", "rank_gb": 64}
    out = text(Report(recipe="r.sh", device=device, skipped=["pkill -9 python", "rm -rf /tmp/ray"]))
    assert "skipped (not run): pkill -9 python; rm -rf /tmp/ray" in out


def test_sources_common_sh_from_the_launch_directory_and_writes_nothing(home, tmp_path, check):
    work = tmp_path / "launch-dir"
    work.mkdir()
    shutil.copy(WILD / "common.sh", work / "common.sh")
    recipes = tmp_path / "elsewhere"
    recipes.mkdir()
    shutil.copy(WILD / "sources_cwd_common.sh", recipes / "run.sh")
    report = check(recipes / "run.sh", cwd=work)
    assert report.get("entry") == "verl.trainer.main_ppo", report["findings"]
    assert {"trainer.nnodes=1", "trainer.device=npu"} <= set(report["overrides"])
    assert sorted(p.name for p in work.iterdir()) == ["common.sh"]  # `mkdir -p logs` + `> $LOG` stayed inside
    # from another directory the same recipe cannot find ./common.sh, and the fix says why
    report = check(recipes / "run.sh", cwd=tmp_path)
    bad = findings(report, "extract", "error")
    assert bad and "common.sh" in bad[0]["message"] and "directory you launch" in bad[0]["fix"]


def test_shell_constructs_reach_the_recorded_call(home, tmp_path, check):
    report = check(WILD / "bash_features.sh", cwd=tmp_path)
    assert {"trainer.nnodes=2", "trainer.n_gpus_per_node=8", "data.train_batch_size=16",
            f"{ARR}.actor.ppo_mini_batch_size=8"} <= set(report["overrides"]), report


@pytest.mark.parametrize("divisor", [1, 2])
def test_dynamic_batch_limits_count_the_sequence_parallel_size(home, tmp_path, monkeypatch, divisor, check):
    monkeypatch.setenv("DIVISOR", str(divisor))
    report = check(WILD / "dapo_sp4_dynamic_bsz.sh", cwd=tmp_path)
    lengths = findings(report, "lengths", "error")
    if divisor == 1:  # 22528-token sequences, limits 5632 per GPU x SP 4: they fit
        assert lengths == [], json.dumps(lengths, indent=1)
    else:  # the actor's limit halved: 2816 x 4 < 22528
        assert len(lengths) == 1 and "x sequence parallel 4 = 11264" in lengths[0]["message"], lengths
        assert lengths[0]["fix"].endswith(">= 5632")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_chunked_prefill_rule_is_vllm_only_and_knows_what_verl_fixes(home, tmp_path, monkeypatch, engine, check):
    from verl_ascend.check import verl_checks

    monkeypatch.setenv("ENGINE", engine)
    report = check(WILD / "no_chunked_prefill.sh", cwd=tmp_path)
    hits = [f for f in findings(report, "lengths") if "max_num_batched_tokens" in f["message"]]
    if engine == "sglang":
        assert hits == []
    else:
        assert len(hits) == 1
        assert hits[0]["severity"] == ("info" if verl_checks.raises_batched_tokens() else "error")


def test_verl_probe_for_raising_batched_tokens_matches_its_source():
    """The probe reads the installed verl; this reads the same method another way (AST) to confirm."""
    import ast
    import importlib.util

    from verl_ascend.check import verl_checks

    root = Path(list(importlib.util.find_spec("verl").submodule_search_locations)[0])
    path = root / "workers" / "rollout" / "vllm_rollout" / "vllm_async_server.py"
    found = False
    if path.exists():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(ast.unparse(t) == "self.config.max_num_batched_tokens"
                                                    for t in node.targets):
                found = found or ast.unparse(node.value) == "self.config.max_model_len"
    assert verl_checks.raises_batched_tokens() is found


def test_host_limits_and_hub_ids_are_not_recipe_errors(home, tmp_path, check):
    started = time.monotonic()
    report = check(WILD / "hub_id_with_critic.sh", cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert "ulimit -n 99999999" in report["skipped"] and "ulimit -u unlimited" in report["skipped"]
    assert findings(report, "extract") == []
    models = {k for f in findings(report, "model", "info") for k in f["keys"]}
    assert {f"{ARR}.model.path", "critic.model.path"} <= models, report["findings"]
    assert not any("Qwen/Qwen2.5-0.5B-Instruct" in f["message"] for f in findings(report, severity="error"))
    print(f"hub-id recipe checked in {elapsed:.1f} s")


@pytest.mark.parametrize("bwrap_on_path", [True, False])
def test_timeout_ends_every_process_the_recipe_started(tmp_path, monkeypatch, bwrap_on_path):
    """With bwrap, and with no bwrap on PATH (verl_ascend/recipe/kernel_jail.py makes the namespaces)."""
    from verl_ascend.recipe import extract

    if not bwrap_on_path:
        monkeypatch.setenv("PATH", path_without("bwrap"))
    assert bool(shutil.which("bwrap")) == bwrap_on_path

    tag = f"{4000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    monkeypatch.setenv("TAG", tag)
    got = extract.extract(str(WILD / "leaves_children.sh"), timeout=3, cwd=tmp_path)
    assert got.launch is None and "did not finish within 3 s" in got.findings[0].message
    time.sleep(0.5)
    left = []
    for proc in Path("/proc").iterdir():
        try:
            if tag in (proc / "cmdline").read_bytes().decode(errors="replace"):
                left.append(proc.name)
        except OSError:
            continue
    assert left == [], f"processes left behind: {left}"


def test_bash_syntax_error_gets_its_own_fix(home, tmp_path, check):
    script = tmp_path / "broken.sh"
    script.write_text("if [ 1 = 1 ]; then\npython3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    bad = findings(check(script, cwd=tmp_path), "extract", "error")
    assert "syntax error" in bad[0]["message"] and "bash -n" in bad[0]["fix"]


def test_compose_fix_texts_name_the_installed_verl(home, tmp_path, check):
    import importlib.metadata

    from verl_ascend.recipe.compose import verl_config_dir

    script = tmp_path / "groups.sh"
    script.write_text("python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer data=no_such_data\n")
    bad = findings(check(script, cwd=tmp_path), "compose", "error")
    options = sorted(p.stem for p in (verl_config_dir() / "data").glob("*.yaml"))
    assert "no option 'no_such_data'" in bad[0]["message"] and all(o in bad[0]["message"] for o in options)
    assert "+key=value" not in bad[0]["fix"].replace("not +key=value", "")
    script.write_text("python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer "
                      f"{ARR}.actor.megatron.grad_offload=True\n")
    report = check(script, cwd=tmp_path)
    from omegaconf import OmegaConf

    megatron = OmegaConf.load(verl_config_dir() / "engine" / "megatron.yaml")
    if "grad_offload" in megatron:  # this verl has the key: the override composes
        assert findings(report, "compose", "error") == []
    else:
        fix = findings(report, "compose", "error")[0]["fix"]
        assert f"installed verl {importlib.metadata.version('verl')} has no megatron.grad_offload" in fix


def test_trainer_loop_is_named_and_its_missing_packages_warned(home, tmp_path, monkeypatch, check):
    import importlib.metadata
    import importlib.util

    report = check(WILD / "bash_features.sh", cwd=tmp_path)
    assert findings(report, "trainer", "warning") == []  # the test environment has what the loop needs
    real = importlib.util.find_spec
    hidden = ("transfer_queue", "zmq", "msgspec")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a))
    report = check(WILD / "bash_features.sh", cwd=tmp_path)
    warned = findings(report, "trainer", "warning")
    if report["trainer"].startswith("v1"):  # verl 0.9: use_v1 defaults to True
        assert len(warned) == 1 and "TransferQueue, pyzmq, msgspec" in warned[0]["message"]
        assert f'pip install "verl[verl-core]=={importlib.metadata.version("verl")}"' in warned[0]["fix"]
        report = check(WILD / "bash_features.sh", cwd=tmp_path, sets=["trainer.use_v1=False"])
        assert report["trainer"].startswith("Ray PPO trainer") and findings(report, "trainer", "warning") == []
    else:
        assert report["trainer"] == "Ray PPO trainer (the only one in this verl)" and warned == []


def test_check_leaves_the_callers_environment_as_it_was(home, tmp_path, check):
    before = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    check(WILD / "bash_features.sh", cwd=tmp_path)
    assert {k: os.environ.get(k) for k in before} == before


def test_hub_clients_imported_before_the_check_are_offline_during_it(monkeypatch):
    # Both read HF_HUB_OFFLINE once, at import: in a process that imported them first (a pytest worker,
    # a user's program calling run_check), setting the variable alone left verl's validation retrying the
    # network for a hub id (~40 s here). Runs in every environment: the transformers there differ.
    import huggingface_hub.constants as hub_constants
    import transformers.utils.hub as transformers_hub

    from verl_ascend.check import report

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)  # as imported on a host that is online
    if hasattr(transformers_hub, "_is_offline_mode"):  # older transformers keep their own copy
        monkeypatch.setattr(transformers_hub, "_is_offline_mode", False)
    clients = lambda: (hub_constants.HF_HUB_OFFLINE, transformers_hub.is_offline_mode())  # noqa: E731
    assert clients() == (False, False)
    with report._offline():
        assert clients() == (True, True)
    assert clients() == (False, False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a user who wants the hub checked keeps it
    with report._offline():
        assert clients() == (False, False)


def test_verls_own_ascend_examples_read_where_cann_is_missing_and_their_0_9_1_faults_are_named(home, tmp_path, check):
    # verl's Ascend examples source CANN's environment scripts first; a host without CANN skips exactly those
    # (listed) and reads the rest of the script as bash would
    model = tmp_path / "Qwen3-4B"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                                   "hidden_size": 2560, "num_hidden_layers": 36,
                                                   "num_attention_heads": 32, "num_key_value_heads": 8,
                                                   "intermediate_size": 9728, "vocab_size": 151936}))
    from verl_ascend.recipe.extract import cann_env_missing

    fsdp = WILD / "ascend_qwen3_4b_grpo_fsdp.sh"
    missing = cann_env_missing(fsdp.read_text())
    if not missing:
        pytest.fail("CANN is installed on this host: the missing-CANN reading cannot be shown here")
    os.environ["MODEL_PATH"] = str(model)
    try:
        report = check(fsdp, cwd=tmp_path)
    finally:
        del os.environ["MODEL_PATH"]
    assert report["entry"].endswith("main_ppo"), report
    assert [s for s in report["skipped"] if "set_env.sh" in s] == [f"source {p}" for p in missing], report["skipped"]
    assert not findings(report, "extract", "error"), findings(report, "extract")
    # the Megatron example sets use_mbridge=False, which verl 0.9.1's Megatron engine asserts against
    report = check(WILD / "ascend_qwen3_30b_a3b_dapo_megatron.sh", cwd=tmp_path)
    from verl_ascend.check.bridge import engine_requires_bridge

    named = [f for f in findings(report, "bridge", "error") if "use_mbridge must be True" in f["message"]]
    assert len(named) == (2 if engine_requires_bridge() else 0), findings(report, "bridge")

"""`verl-ascend check` against the installed verl, in this process (run_check; the recipe itself runs in
its sandbox): the shipped recipes pass, one planted error per rule is reported as exactly that rule
with the right keys, Hydra errors come back as findings. The CLI and the shell scripts themselves:
tests/process/test_check.py.

Recipes are copied to a temp dir before they are edited; HOME points at an empty temp dir so model
paths resolve to the built-in model facts unless a test writes a config.json.
"""

import json
import shutil
from pathlib import Path

import pytest
from subproc import ROOT

RECIPES = ROOT / "recipes"
SHIPPED = sorted(p.name for p in RECIPES.glob("*_a2.sh"))
ARR = "actor_rollout_ref"
_RECIPE_ENV = ("NNODES", "TRAIN_TP", "TRAIN_PP", "TRAIN_EP", "GEN_TP", "GEN_DP", "MODEL_PATH", "OFFLOAD", "VERL_SRC",
               "DAPO_LAYOUT", "N_RESP", "MICRO_BATCH_SIZE", "HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "SOCKET_IFNAME",
               "FIRST_STAGE_LAYERS", "LAST_STAGE_LAYERS", "MEGATRON_BRIDGE")


def _verl_has_bridge_switch() -> bool:
    """The installed verl's Megatron engine config has ``vanilla_mbridge`` (read from its yaml)."""
    import importlib.util
    import re
    from pathlib import Path

    root = Path(list(importlib.util.find_spec("verl").submodule_search_locations)[0])
    yaml = root / "trainer" / "config" / "engine" / "megatron.yaml"
    return yaml.is_file() and bool(re.search(r"^vanilla_mbridge:", yaml.read_text(), re.M))


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in _RECIPE_ENV:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def planted(tmp_path, recipe, overrides=()):
    """A copy of the shipped recipes dir with extra override lines before the script's "$@"."""
    dst = tmp_path / "recipes"
    shutil.copytree(RECIPES, dst)
    script = dst / recipe
    text = script.read_text()
    assert text.count('    "$@"\n') == 1
    extra = "".join(f"    {o} \\\n" for o in overrides)
    script.write_text(text.replace('    "$@"\n', extra + '    "$@"\n'))
    return script


def check(script, sets=(), verl_src=None):
    from verl_ascend.check import run_check

    return run_check(str(script), list(sets), verl_src)


def flagged(report) -> set:
    return {f["subject"] for f in report["findings"] if f["severity"] in ("error", "warning")}


def keys_of(report, rule) -> set:
    return {k for f in report["findings"] if f["subject"] == rule for k in f["keys"]}


def _main_ppo_runs_dapo() -> bool:
    """verl >= 0.9: its own main_ppo filters groups (the v1 trainer's replay buffer) -- read from its files."""
    import importlib.util

    root = Path(importlib.util.find_spec("verl").submodule_search_locations[0])
    buffer = root / "trainer" / "ppo" / "v1" / "replay_buffer.py"
    return buffer.is_file() and "filter_groups" in buffer.read_text()


@pytest.mark.parametrize("recipe", SHIPPED)
def test_shipped_recipe_passes(recipe, home, tmp_path):
    # DAPO without a verl tree runs in verl's main_ppo where that verl runs DAPO itself; older verl needs the tree
    tree = _dapo_tree(tmp_path / "verl") if recipe.startswith("dapo") and not _main_ppo_runs_dapo() else None
    report = check(RECIPES / recipe, verl_src=tree)
    assert report["exit_code"] == 0, json.dumps(report["findings"], indent=1)
    assert flagged(report) == set()
    assert report["verl_validation"]["ran"] and report["verl_validation"]["errors"] == []
    layout = report["layout"]
    expected = {"7b": (8, 2, 1, 1), "32b": (32, 8, 2, 1), "235b": (128, 4, 8, 4)}
    world, tp, pp, ep = next(v for k, v in expected.items() if f"_{k}" in recipe)
    assert (layout["world_size"], layout["actor"]["tp"], layout["actor"]["pp"], layout["actor"]["ep"]) == (world, tp, pp, ep)
    assert ("ref" in layout) == recipe.startswith("grpo")  # DAPO runs without KL, hence without a reference model
    if "235b" in recipe:
        assert report["model"]["layers"] == 94 and report["model"]["experts"] == 128
        assert layout["rollout"] == {"name": "vllm", "tp": 8, "dp": 8, "ep": 64, "replica": 64, "replicas": 2}
    if recipe.startswith("dapo") and tree is None:
        assert report["entry"] == "verl.trainer.main_ppo", report["entry"]
        assert {"algorithm.filter_groups.enable=True", "reward.reward_manager.name=dapo"} <= set(report["overrides"])
    elif recipe.startswith("dapo"):
        assert report["entry"] == "recipe.dapo.main_dapo" and report["config_source"].startswith(f"DAPO config {tree}")
    hbm = [f["message"] for f in report["findings"] if f["subject"] == "hbm"]
    assert any(m.startswith("training phase") for m in hbm) and any(m.startswith("rollout KV cache") for m in hbm)


# every recipe that launches a trainer (not a2_env.sh, dapo_common.sh, the Ray start scripts)
TRAINER_RECIPES = sorted(p.name for p in RECIPES.glob("*.sh") if p.name.startswith(("grpo_", "dapo_qwen")))


@pytest.mark.field_stack
@pytest.mark.parametrize("recipe", TRAINER_RECIPES)
def test_every_shipped_recipe_composes_or_says_why(recipe, home, tmp_path):
    """On every verl we support (the field report's 0.5.0 included): a report with findings and exit
    0/1/2, never an exception. A recipe whose keys the installed verl lacks (the 235B layout's
    rollout.data_parallel_size on 0.5.0) is a compose finding naming the key; one that composes is judged."""
    tree = _dapo_tree(tmp_path / "verl") if recipe.startswith("dapo") and not _main_ppo_runs_dapo() else None
    report = check(RECIPES / recipe, verl_src=tree)
    assert report["exit_code"] in (0, 1, 2) and report["findings"], report
    compose_errors = [f for f in report["findings"] if f["subject"] == "compose" and f["severity"] == "error"]
    if compose_errors:
        assert report["exit_code"] == 2 and all(f["keys"] for f in compose_errors), compose_errors
        return
    layout = report["layout"]
    assert layout["actor"]["strategy"] == "megatron"
    assert ("ref" in layout) == recipe.startswith("grpo")  # GRPO keeps a reference model (KL), DAPO does not
    assert any(f["subject"] == "hbm" for f in report["findings"]), report["findings"]


@pytest.mark.field_stack
def test_a_size_written_as_None_is_unset_and_a_word_is_a_finding(home, tmp_path):
    """verl 0.5.0's ref/megatron_ref.yaml writes `expert_tensor_parallel_size: None` (YAML: the string
    'None'); planted here on whatever verl is installed. It reads as unset (Megatron's default: the
    dense TP); a size that is no number at all is an error finding naming the key, exit 2."""
    key = f"{ARR}.ref.megatron.expert_tensor_parallel_size"
    plain = check(RECIPES / "grpo_qwen2_5_7b_a2.sh")
    as_none = check(planted(tmp_path / "none", "grpo_qwen2_5_7b_a2.sh", [f"++{key}=None"]))
    assert as_none["exit_code"] == plain["exit_code"], as_none["findings"]
    assert as_none["layout"] == plain["layout"]
    word = check(planted(tmp_path / "word", "grpo_qwen2_5_7b_a2.sh", [f"++{key}=two"]))
    assert word["exit_code"] == 2, word["findings"]
    (bad,) = [f for f in word["findings"] if key in f["keys"]]
    assert bad["severity"] == "error" and "'two'" in bad["message"] and key in bad["fix"], bad


_MOE_CONFIG = {"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 94, "hidden_size": 4096,
               "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 12288,
               "moe_intermediate_size": 1536, "num_experts": 126, "num_experts_per_tok": 8, "vocab_size": 151936,
               "max_position_embeddings": 40960, "tie_word_embeddings": False}

# (id, recipe, env, extra overrides, rule, keys that must be named, severity)
PLANTS = [
    ("compose", "grpo_qwen2_5_7b_a2.sh", {}, [f"{ARR}.actor.no_such_key=1"],
     "compose", {f"{ARR}.actor.no_such_key"}, "error"),
    ("verl", "grpo_qwen2_5_7b_a2.sh", {}, [f"{ARR}.rollout.val_kwargs.do_sample=True", f"{ARR}.rollout.temperature=0"],
     "verl", set(), "error"),
    ("parallel", "grpo_qwen2_5_32b_a2.sh", {"NNODES": "3"}, [],
     "parallel", {"trainer.nnodes", f"{ARR}.actor.megatron.tensor_model_parallel_size",
                  f"{ARR}.actor.megatron.pipeline_model_parallel_size"}, "error"),
    ("batch-micro", "grpo_qwen2_5_7b_a2.sh", {"MICRO_BATCH_SIZE": "3"}, [],
     "batch", {f"{ARR}.actor.ppo_micro_batch_size_per_gpu", f"{ARR}.actor.ppo_mini_batch_size"}, "error"),
    ("batch-n", "dapo_qwen2_5_7b_a2.sh", {"N_RESP": "1"}, [],
     "batch", {f"{ARR}.rollout.n", "algorithm.adv_estimator"}, "error"),
    ("lengths", "grpo_qwen2_5_7b_a2.sh", {}, [f"{ARR}.rollout.max_model_len=2048"],
     "lengths", {f"{ARR}.rollout.max_model_len", "data.max_prompt_length", "data.max_response_length"}, "error"),
    ("pipeline", "grpo_qwen3_235b_a22b_a2.sh", {"LAST_STAGE_LAYERS": "10"}, [],
     "pipeline", {f"{ARR}.actor.megatron.override_transformer_config.num_layers_in_last_pipeline_stage"}, "error"),
    # the 235B field report's `++ref...override_transformer_config.use_flash_attn` replaces the inherited dict
    ("pipeline-ref", "grpo_qwen3_235b_a22b_a2.sh", {},
     [f"++{ARR}.ref.megatron.override_transformer_config.use_flash_attn=True"],
     "pipeline", {f"{ARR}.ref.megatron.pipeline_model_parallel_size"}, "error"),
    ("heads", "grpo_qwen2_5_7b_a2.sh", {"GEN_TP": "8"}, [],
     "heads", {f"{ARR}.rollout.tensor_model_parallel_size"}, "error"),
    ("experts", "grpo_qwen3_235b_a22b_a2.sh", {"MODEL_PATH": "{tmp}/Qwen3-MoE-126"}, [],
     "experts", {f"{ARR}.actor.megatron.expert_model_parallel_size", f"{ARR}.rollout.expert_parallel_size"}, "error"),
    ("hbm", "grpo_qwen3_235b_a22b_a2.sh", {"OFFLOAD": "False"}, [],
     "hbm", {f"{ARR}.actor.megatron.param_offload", f"{ARR}.rollout.gpu_memory_utilization"}, "error"),
    ("known-bad", "grpo_qwen2_5_32b_a2.sh", {},
     [f"{ARR}.actor.megatron.use_mbridge=True", f"{ARR}.actor.megatron.virtual_pipeline_model_parallel_size=2"],
     "known-bad", {f"{ARR}.actor.megatron.use_mbridge", f"{ARR}.actor.megatron.virtual_pipeline_model_parallel_size"},
     "error"),
    ("env", "grpo_qwen2_5_7b_a2.sh", {"HCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth1"}, [],
     "env", {"HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}, "warning"),
]


@pytest.mark.parametrize("case", PLANTS, ids=[p[0] for p in PLANTS])
def test_planted_error_is_reported_as_its_rule(case, home, tmp_path, monkeypatch):
    _, recipe, env, overrides, rule, keys, severity = case
    (tmp_path / "Qwen3-MoE-126").mkdir()
    (tmp_path / "Qwen3-MoE-126" / "config.json").write_text(json.dumps(_MOE_CONFIG))
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    # a DAPO recipe without a verl tree runs in main_ppo only where that verl runs DAPO itself
    tree = _dapo_tree(tmp_path / "verl") if recipe.startswith("dapo") and not _main_ppo_runs_dapo() else None
    report = check(planted(tmp_path, recipe, overrides), verl_src=tree)
    assert flagged(report) == {rule}, json.dumps(report["findings"], indent=1)
    assert keys <= keys_of(report, rule), keys_of(report, rule)
    assert {f["severity"] for f in report["findings"] if f["subject"] == rule and f["severity"] != "info"} == {severity}
    assert report["exit_code"] == (2 if severity == "error" else 1)
    for f in report["findings"]:
        if f["subject"] == rule and f["severity"] != "info":
            assert f["fix"], f  # every finding says how to fix it
    if rule == "verl":
        assert "temperature" in json.dumps(report["findings"])
    if rule == "experts":
        assert report["model"]["experts"] == 126 and "config.json" in report["model"]["source"]


def test_trainer_device_cuda_is_known_bad_only_where_verl_lacks_auto_set_device(home, tmp_path):
    import verl.utils.device as device

    report = check(planted(tmp_path, "grpo_qwen2_5_7b_a2.sh", ["trainer.device=cuda"]))
    if hasattr(device, "auto_set_device"):
        assert flagged(report) == set()
    else:
        assert flagged(report) == {"known-bad"} and keys_of(report, "known-bad") == {"trainer.device"}


def test_script_without_trainer_call_is_an_extract_error(home, tmp_path):
    script = tmp_path / "not_a_recipe.sh"
    script.write_text("#!/usr/bin/env bash\necho preparing\npython3 -c 'print(1)'\nexit 0\n")
    report = check(script)
    assert flagged(report) == {"extract"} and report["exit_code"] == 2


def _dapo_tree(root, with_reward=True):
    """A verl source tree's recipe/dapo/config, written here with the installed verl's reward layout."""
    from verl_ascend.recipe.compose import dapo_layout, verl_config_dir

    config = root / "recipe" / "dapo" / "config"
    config.mkdir(parents=True)
    (root / "recipe" / "dapo" / "main_dapo.py").write_text("")
    reward = ("reward_model:\n  reward_manager: dapo\n  overlong_buffer: {enable: false, len: 0, penalty_factor: 0.0}\n"
              if dapo_layout(verl_config_dir()) == "reward_model" else
              "reward:\n  reward_manager: {name: dapo}\n  reward_kwargs:\n"
              "    overlong_buffer_cfg: {enable: false, len: 0, penalty_factor: 0.0}\n    max_resp_len: null\n")
    groups = "algorithm:\n  filter_groups: {enable: false, metric: null, max_num_gen_batches: 0}\n"
    (config / "dapo_megatron_trainer.yaml").write_text(
        "hydra:\n  searchpath:\n    - file://verl/trainer/config\ndefaults:\n  - ppo_megatron_trainer\n  - _self_\n"
        "data:\n  gen_batch_size: ${data.train_batch_size}\n" + groups + (reward if with_reward else ""))
    return root


def test_dapo_composes_the_given_tree(home, tmp_path):
    good = _dapo_tree(tmp_path / "verl")
    report = check(RECIPES / "dapo_qwen2_5_7b_a2.sh", verl_src=good)
    assert report["exit_code"] == 0, report["findings"]
    assert report["config_source"].startswith(f"DAPO config {good}")
    # the tree is really used: without DAPO's reward keys the recipe's reward overrides cannot compose
    bad = _dapo_tree(tmp_path / "verl-old", with_reward=False)
    report = check(RECIPES / "dapo_qwen2_5_7b_a2.sh", verl_src=bad)
    assert flagged(report) == {"compose"}, report["findings"]
    assert any(k.startswith("reward") for k in keys_of(report, "compose")), keys_of(report, "compose")


def test_shipped_megatron_recipe_builds_through_the_bridge_it_chose(home):
    """No MEGATRON_BRIDGE: the recipes choose mbridge (recipes/megatron_bridge.sh): on a verl with the switch
    through vanilla_mbridge=True, as `verl-ascend bridge mbridge` prints it; on older verls by passing
    nothing. Either way the workers import mbridge, which this environment has: an info line, no warning."""
    report = check(RECIPES / "grpo_qwen2_5_7b_a2.sh")
    assert report["exit_code"] == 0, report["findings"]  # on verl <= 0.7 the key would not compose: none passed
    hits = [f for f in report["findings"] if f["subject"] == "bridge"]
    assert all("import mbridge" in f["message"] and f["severity"] == "info" for f in hits), hits
    if _verl_has_bridge_switch():
        assert hits and all(f"{ARR}.actor.megatron.vanilla_mbridge=True" in f["message"] for f in hits), hits
    # verl <= 0.7: its legacy Megatron workers build without a bridge unless use_mbridge is on (no finding then)

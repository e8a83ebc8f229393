"""check's `alloc` rule and diagnose's NPU OOM advice: expandable segments are unsafe under vLLM sleep mode
(#35 item 4). vllm-ascend's sleep-mode memory pool asserts on `expandable_segments:True`; PR 9242 is open."""

import pytest
from omegaconf import OmegaConf

from verl_ascend.check import alloc, rules
from verl_ascend.diagnose import table

pytestmark = pytest.mark.verl_agnostic


def cfg(name="vllm", **rollout):
    return OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": name, **rollout}}})


def ctx(config, **env):
    return rules.Context(config, None, False, launch_env=env)


@pytest.mark.parametrize("rollout,env,runtime_env,fires", [
    ({"free_cache_engine": True}, "expandable_segments:True", None, True),               # verl <= 0.6: free_cache_engine
    ({"enable_sleep_mode": True, "free_cache_engine": False}, "expandable_segments:True", None, True),  # 0.9: the pool exists
    ({"enable_sleep_mode": False, "free_cache_engine": True}, "expandable_segments:True", None, False),
    ({"free_cache_engine": False}, "expandable_segments:True", None, False),
    ({}, "expandable_segments:True", None, True),                                       # both unset: verl's default is on
    ({"free_cache_engine": True}, "page_size:1g,expandable_segments:True", None, True),
    ({"free_cache_engine": True}, "expandable_segments:False", None, False),
    ({"free_cache_engine": True}, "expandable_segments:True,expandable_segments:False", None, False),  # the last wins
    ({"free_cache_engine": True}, None, None, False),
    ({"free_cache_engine": True}, None, "expandable_segments:True", True),              # via Ray's runtime env
])
def test_expandable_segments_with_sleep_mode(rollout, env, runtime_env, fires):
    config = cfg(**rollout)
    if runtime_env:
        OmegaConf.update(config, alloc.RUNTIME_ENV, runtime_env, force_add=True)
    found = alloc.findings(ctx(config, **({alloc.VAR: env} if env else {})))
    assert bool(found) == fires, found
    if fires:
        (f,) = found
        assert f.severity == "error" and f.subject == "alloc"
        assert "9242" in f.message and "expandable_segments:False" in f.fix
        assert (alloc.SLEEP if "enable_sleep_mode" in rollout else alloc.FREE) in f.keys


def test_other_rollouts_are_not_judged():
    assert alloc.findings(ctx(cfg("sglang", free_cache_engine=True), PYTORCH_NPU_ALLOC_CONF="expandable_segments:True")) == []


def test_the_rule_is_in_the_table_and_needs_a_config():
    (rule,) = [r for r in rules.ALL if r.name == "alloc"]
    assert rule.needs_config and rule.function is alloc.findings


def test_diagnose_oom_fix_says_when_expandable_segments_is_unsafe():
    fix = table.FAMILIES["npu_oom"].fix
    assert "expandable_segments:True" in fix and "sleep mode" in fix and "9242" in fix
    assert "enable_sleep_mode" in fix and "gpu_memory_utilization" in fix  # what to use there instead
    assert "https://github.com/vllm-project/vllm-ascend/pull/9242" in table.FAMILIES["npu_oom"].sources

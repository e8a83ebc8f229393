"""check's `megatron_path` rule: MindSpeed-only transformer options where MegatronAdaptor (not MindSpeed) runs
Megatron. The facts and megatron-core's field names are handed in; how they are read from an environment is
tests/unit/test_megatron_path.py's and the real megatron-core's (the last test)."""

import pytest
from omegaconf import OmegaConf

from verl_ascend.check import megatron_path, rules
from verl_ascend.core import megatron_path as facts_mod

FIELDS = {"num_layers", "recompute_granularity", "recompute_method", "attention_backend"}
ADAPTOR_ONLY = {"mindspeed": None, "megatron_adaptor": "ma 0.18.0", "transformer_engine": None}


def ctx(strategy="megatron", **options):
    cfg = OmegaConf.create({"actor_rollout_ref": {"actor": {"strategy": strategy,
                                                            "megatron": {"override_transformer_config": options}}}})
    return rules.Context(cfg, None, False, launch_env={})


@pytest.mark.verl_agnostic
def test_mindspeed_keys_on_the_adaptor_path_are_named_with_megatron_cores_way():
    (f,) = megatron_path.findings(ctx(use_flash_attn=True, recompute_method="uniform"), ADAPTOR_ONLY, FIELDS)
    assert f.severity == "warning" and f.subject == "megatron_path"
    assert f.keys == ("actor_rollout_ref.actor.megatron.override_transformer_config.use_flash_attn",)
    assert "use_flash_attn" in f.message and "attention_backend" in f.fix and "10087" in f.fix


@pytest.mark.parametrize("facts", [
    dict(ADAPTOR_ONLY, mindspeed="0.18.0"),      # MindSpeed there too: its wrapper takes the keys
    dict(ADAPTOR_ONLY, megatron_adaptor=None),   # no MegatronAdaptor: not this rule's path
])
@pytest.mark.verl_agnostic
def test_silent_where_mindspeed_takes_the_keys_or_the_adaptor_is_absent(facts):
    assert megatron_path.findings(ctx(use_flash_attn=True), facts, FIELDS) == []


@pytest.mark.verl_agnostic
def test_silent_on_fsdp_on_known_keys_and_when_megatron_core_cannot_be_read():
    assert megatron_path.findings(ctx("fsdp", use_flash_attn=True), ADAPTOR_ONLY, FIELDS) == []
    assert megatron_path.findings(ctx(recompute_method="uniform"), ADAPTOR_ONLY, FIELDS) == []


def test_the_real_megatron_core_does_not_define_the_mindspeed_keys_our_recipes_pass():
    fields = facts_mod.transformer_config_fields()  # a child process importing the installed megatron-core
    assert fields and "recompute_method" in fields and "attention_backend" in fields
    assert "use_flash_attn" not in fields
    (f,) = megatron_path.findings(ctx(use_flash_attn=True, recompute_method="uniform"), ADAPTOR_ONLY, fields)
    assert "use_flash_attn" in f.message

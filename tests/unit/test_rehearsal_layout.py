"""How a rehearsal scales a Megatron recipe's parallel kinds and layer counts to the CPU ranks and the tiny model."""

from importlib.metadata import version

import pytest
from omegaconf import OmegaConf

from verl_ascend.rehearse.plan import layout

ARR = "actor_rollout_ref"
FIELDS = {"num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage", "recompute_num_layers",
          "recompute_method", "recompute_granularity", "moe_layer_freq", "attention_backend"}  # a TransformerConfig


def composed(tp=1, pp=1, ep=1, etp=None, vpp=None, cp=1, otc=None, ref_inherits=True):
    """The part of a composed config the layout reads (verl's shape: the ref inherits the actor's dict)."""
    def role(name):
        return {"strategy": "megatron", "megatron": {
            "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp, "expert_model_parallel_size": ep,
            "expert_tensor_parallel_size": etp, "virtual_pipeline_model_parallel_size": vpp,
            "context_parallel_size": cp,
            "override_transformer_config": ("${" + ARR + ".actor.megatron.override_transformer_config}"
                                            if name == "ref" and ref_inherits else dict(otc or {}))}}

    return OmegaConf.create({ARR: {"actor": role("actor"), "ref": role("ref")}})


RECIPE_235B = dict(tp=4, pp=8, ep=4, otc={"num_layers_in_first_pipeline_stage": 11,
                                          "num_layers_in_last_pipeline_stage": 11, "recompute_method": "uniform",
                                          "recompute_granularity": "full", "recompute_num_layers": 1,
                                          "use_flash_attn": True})


SET_BY_235B = {f"{ARR}.actor.megatron.override_transformer_config.{k}" for k in RECIPE_235B["otc"]}


def test_235b_on_four_ranks_keeps_tp_pp_and_ep_with_two_layers_split_one_and_one():
    lay = layout.plan(composed(**RECIPE_235B), 4, real_layers=94, experts=16, fields=FIELDS, recipe_keys=SET_BY_235B)
    for role in ("actor", "ref"):
        new = lay.roles[role].new
        assert (new.tp, new.pp, new.ep, new.etp, new.cp, new.vpp) == (2, 2, 2, 1, 1, None), (role, new)
    assert lay.layers == 2 and (lay.roles["actor"].first, lay.roles["actor"].last) == (1, 1)
    otc = f"{ARR}.actor.megatron.override_transformer_config"
    assert f"++{otc}.num_layers_in_first_pipeline_stage=1" in lay.overrides
    assert f"++{otc}.num_layers_in_last_pipeline_stage=1" in lay.overrides
    assert f"{ARR}.ref.megatron.expert_model_parallel_size=2" in lay.overrides
    # ETP was megatron's default (= TP 4); EP2 x TP2 on one 2-rank stage needs it at 1, written out
    assert f"{ARR}.actor.megatron.expert_tensor_parallel_size=1" in lay.overrides
    changes = "\n".join(lay.changes)
    assert "num_layers_in_first_pipeline_stage: 11 -> 1" in changes and "use_flash_attn: True -> (dropped)" in changes
    assert "recompute_num_layers: 1 -> 1" in changes, changes  # checked, kept
    assert f"{otc}.use_flash_attn" in lay.replaced and not any("use_flash_attn" in o for o in lay.overrides)
    assert "kept TP PP EP" in lay.note, lay.note


def test_mindspeed_keeps_the_keys_plain_megatron_core_refuses():
    lay = layout.plan(composed(**RECIPE_235B), 4, real_layers=94, experts=16, fields=FIELDS, mindspeed=True)
    assert "use_flash_attn" not in "\n".join(lay.changes) and not any("use_flash_attn" in k for k in lay.replaced)


def test_a_default_key_megatron_core_lacks_is_deleted_not_dropped_from_the_recipe():
    lay = layout.plan(composed(tp=2, otc={"use_fused_rmsnorm": True}), 2, real_layers=28, experts=0, fields=FIELDS)
    assert f"~{ARR}.actor.megatron.override_transformer_config.use_fused_rmsnorm" in lay.overrides


def test_two_ranks_keep_tp_first_and_drop_the_uneven_split_at_pp1():
    lay = layout.plan(composed(**RECIPE_235B), 2, real_layers=94, experts=16, fields=FIELDS)
    new = lay.roles["actor"].new
    assert (new.tp, new.pp) == (2, 1), new
    changes = "\n".join(lay.changes)
    # megatron-core accepts the split at PP1 and builds 11 layers on the one stage: it goes
    assert "num_layers_in_first_pipeline_stage: 11 -> (dropped)" in changes, changes
    assert lay.layers == 2


@pytest.mark.parametrize("recipe, nproc, expected", [
    (dict(tp=8, pp=2), 4, (2, 2)),   # the 32B recipe: both kinds
    (dict(tp=8, pp=2), 2, (2, 1)),   # TP first
    (dict(tp=2, pp=1), 4, (2, 1)),   # the 7B recipe: never above the recipe's
    (dict(tp=1, pp=4), 4, (1, 4)),
])
def test_dense_layouts(recipe, nproc, expected):
    lay = layout.plan(composed(**recipe), nproc, real_layers=64, experts=0, fields=FIELDS)
    new = lay.roles["actor"].new
    assert (new.tp, new.pp) == expected and new.ep == 1
    assert lay.layers % new.pp == 0 and lay.layers >= 2
    assert f"{ARR}.actor.megatron.expert_tensor_parallel_size=null" in lay.overrides  # dense: megatron's default


def test_vpp_is_kept_with_the_fewest_layers_that_divide_over_virtual_stages():
    # verl's Qwen3-30B-A3B Megatron example: TP4 PP2 VPP2 EP2
    lay = layout.plan(composed(tp=4, pp=2, vpp=2, ep=2), 4, real_layers=48, experts=8, fields=FIELDS)
    new = lay.roles["actor"].new
    assert (new.pp, new.vpp, new.ep) == (2, 2, 2) and lay.layers == 4, (new, lay.layers)
    assert f"{ARR}.actor.megatron.virtual_pipeline_model_parallel_size=2" in lay.overrides


def test_uneven_split_with_middle_stages_stays_proportional():
    # 94 = 11 + 6 x 12 + 11 at PP8; at PP4 the tiny model gets even middle stages and valid ends
    lay = layout.plan(composed(pp=8, otc={"num_layers_in_first_pipeline_stage": 11,
                                          "num_layers_in_last_pipeline_stage": 11}), 4,
                      real_layers=94, experts=0, fields=FIELDS)
    r = lay.roles["actor"]
    assert r.new.pp == 4 and r.first >= 1 and r.last >= 1
    middle = lay.layers - r.first - r.last
    assert middle > 0 and middle % 2 == 0, (lay.layers, r.first, r.last)


def test_context_parallel_goes_to_one_saying_why():
    lay = layout.plan(composed(tp=2, cp=2), 4, real_layers=28, experts=0, fields=FIELDS)
    assert lay.roles["actor"].new.cp == 1
    assert layout.CP_REASON in "\n".join(lay.changes)


def test_moe_layer_pattern_and_recompute_count_scale_with_the_layers():
    otc = {"moe_layer_freq": "([0]*2+[1]*6)", "recompute_method": "block", "recompute_num_layers": 4}
    lay = layout.plan(composed(pp=2, otc=otc), 2, real_layers=8, experts=4, fields=FIELDS)
    r = lay.roles["actor"]
    pattern = [o for o in lay.overrides if "moe_layer_freq" in o][0].split("=", 1)[1]
    assert pattern.count(",") + 1 == lay.layers, (pattern, lay.layers)
    recompute = [o for o in lay.overrides if "recompute_num_layers" in o][0].split("=", 1)[1]
    assert 1 <= int(recompute) <= lay.layers // r.new.pp


def test_every_candidate_layout_is_one_megatron_core_can_build():
    recipe = layout.Sizes(tp=4, pp=8, ep=4, etp=4)
    for nproc in (1, 2, 3, 4, 6, 8):
        for s in layout.candidates(recipe, nproc, experts=16):
            assert nproc % (s.tp * s.pp) == 0 and (nproc // s.pp) % (s.ep * s.etp) == 0 and 16 % s.ep == 0, s


def _compose(config_name, overrides):
    from verl_ascend.recipe.compose import compose_launch
    from verl_ascend.recipe.extract import Launch

    launch = Launch(module="verl.trainer.main_ppo", config_path="config", config_name=config_name,
                    overrides=overrides, cwd=".", env={})
    return compose_launch(launch).config


@pytest.mark.skipif(not version("verl").startswith("0.9"), reason="verl 0.9's model_engine defaults group")
@pytest.mark.parametrize("config_name, overrides, engine", [
    ("ppo_megatron_trainer", [], "megatron"),
    ("ppo_trainer", ["model_engine=megatron"], "megatron"),   # verl's own Qwen3-30B-A3B Megatron example
    ("ppo_trainer", [], "fsdp"),
])
def test_the_engine_is_the_one_verl_composes(config_name, overrides, engine):
    from verl_ascend.rehearse.plan.overrides import engine_of

    assert engine_of(_compose(config_name, overrides)) == engine

"""Which initial weights a Megatron rehearsal loads: the converted tiny model, or the dist checkpoint --override names."""

import pytest
from omegaconf import OmegaConf

from verl_ascend.rehearse.plan import engine, layout
from verl_ascend.rehearse.plan import overrides as plan

pytestmark = pytest.mark.verl_agnostic  # plan and rehearsal decide this from the override strings alone

LOADS_BOTH = ["actor_rollout_ref.actor.megatron.use_dist_checkpointing=True",
              "actor_rollout_ref.ref.megatron.use_dist_checkpointing=True",
              "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"]
# the layout the plan would scale to (its own tests: test_rehearsal_layout.py); only the weights differ here
LAYOUT = layout.Layout(roles={}, layers=2, real_layers=28, nproc=2, moe=False, overrides=[], replaced={},
                       changes=[])


CALLS = []  # what the conversion step was asked to do (the real one is run/steps.convert_tiny_model)


@pytest.fixture
def converted():
    CALLS.clear()
    return CALLS


# the composed config's bridge choice, as the shipped recipes make it (mbridge: every test environment has it)
CFG = OmegaConf.create({"actor_rollout_ref": {"actor": {"megatron": {"vanilla_mbridge": True}}}})


def _weights(tmp_path, overrides, given=()):
    m = engine._megatron(CFG, overrides + list(given), LAYOUT, tmp_path / "model", tmp_path / "mcore", given=given,
                         convert=lambda model, output: CALLS.append((str(model), output)))
    _, changes = plan._megatron_overrides(m, 2)
    return m, " | ".join(changes)


def test_a_recipe_loading_a_dist_checkpoint_gets_the_converted_tiny_model(tmp_path, converted):
    m, changes = _weights(tmp_path, LOADS_BOTH)
    assert converted == [(str(tmp_path / "model"), str(tmp_path / "mcore"))]
    assert m.dist_ckpt == str(tmp_path / "mcore") and not m.weights_given
    assert "initial weights: the tiny model converted by verl-ascend convert" in changes, changes


def test_weights_the_user_names_for_every_loading_role_are_used_unconverted(tmp_path, converted):
    (tmp_path / "mine").mkdir()
    given = [f"actor_rollout_ref.{role}.megatron.dist_checkpointing_path={tmp_path / 'mine'}" for role in plan.ROLES]
    m, changes = _weights(tmp_path, LOADS_BOTH, given)
    assert converted == [] and m.dist_ckpt == "" and m.weights_given
    assert "initial weights: the dist checkpoint that --override names (nothing converted here)" in changes, changes


def test_a_path_of_the_clusters_that_is_not_here_is_replaced_by_the_conversion(tmp_path, converted):
    # a user passing the recipe's "$@" as on the cluster: the folder exists there, not on this machine
    given = [f"actor_rollout_ref.{role}.megatron.dist_checkpointing_path={tmp_path / 'absent'}" for role in plan.ROLES]
    m, changes = _weights(tmp_path, LOADS_BOTH, given)
    assert len(converted) == 1 and m.dist_ckpt == str(tmp_path / "mcore") and not m.weights_given
    assert "initial weights: the tiny model converted by verl-ascend convert" in changes, changes


def test_one_role_named_still_converts_for_the_other(tmp_path, converted):
    (tmp_path / "mine").mkdir()
    given = [f"actor_rollout_ref.actor.megatron.dist_checkpointing_path={tmp_path / 'mine'}"]
    m, _ = _weights(tmp_path, LOADS_BOTH, given)
    assert len(converted) == 1 and m.dist_ckpt and not m.weights_given


def test_the_recipe_naming_a_path_is_not_the_user_naming_it(tmp_path, converted):
    # the shipped recipes set dist_checkpointing_path to a cluster folder: that one is replaced, not used
    recipe = LOADS_BOTH + [f"actor_rollout_ref.{role}.megatron.dist_checkpointing_path=/mnt/models/mcore"
                           for role in plan.ROLES]
    m, _ = _weights(tmp_path, recipe)
    assert len(converted) == 1 and m.dist_ckpt and not m.weights_given


def test_a_recipe_without_dist_checkpointing_converts_nothing(tmp_path, converted):
    m, changes = _weights(tmp_path, ["actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"])
    assert converted == [] and m.dist_ckpt == "" and not m.weights_given
    assert "initial weights" not in changes, changes

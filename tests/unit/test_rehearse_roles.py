"""Which roles a recipe runs beside actor, rollout and reference, read from the config verl composes (need_critic)."""

import pytest
from omegaconf import OmegaConf

from verl_ascend.rehearse.rehearsal import needs_critic, unsupported_roles

pytestmark = pytest.mark.verl_agnostic


def cfg(critic=None, estimator="gae", rm=False, legacy_rm=None, strategy="fsdp"):
    doc = {"critic": {"enable": critic, "strategy": strategy}, "algorithm": {"adv_estimator": estimator},
           "reward": {"reward_model": {"enable": rm}}}
    if legacy_rm is not None:
        doc["reward_model"] = {"enable": legacy_rm}
    return OmegaConf.create(doc)


@pytest.mark.parametrize("config, critic", [
    (cfg(), True),  # verl's default estimator is gae
    (cfg(estimator="grpo"), False),
    (cfg(critic=False), False),
    (cfg(critic=True, estimator="grpo"), True),
])
def test_a_critic_exactly_where_verl_builds_one(config, critic):
    assert needs_critic(config) is critic


@pytest.mark.parametrize("config, expected", [
    (cfg(), []),  # an FSDP critic is rehearsed
    (cfg(strategy="megatron"), ["a Megatron critic (critic.strategy=megatron; an FSDP critic is rehearsed, "
                                "algorithm.adv_estimator=gae)"]),
    (cfg(critic=False, strategy="megatron"), []),
    (cfg(estimator="grpo", rm=True), ["a reward model (reward.reward_model.enable=True)"]),
    (cfg(estimator="grpo", legacy_rm=True), ["a reward model (reward_model.enable=True)"]),
    (cfg(estimator="grpo", legacy_rm=False), []),
])
def test_roles_the_rehearsal_cannot_scale_are_named(config, expected):
    assert unsupported_roles(config) == expected

"""Which roles a recipe runs beside actor, rollout and reference, read from the config verl composes (need_critic)."""

import pytest
from omegaconf import OmegaConf

from verl_ascend.rehearse.rehearsal import unsupported_roles

pytestmark = pytest.mark.verl_agnostic


def cfg(critic=None, estimator="gae", rm=False, legacy_rm=None):
    doc = {"critic": {"enable": critic}, "algorithm": {"adv_estimator": estimator},
           "reward": {"reward_model": {"enable": rm}}}
    if legacy_rm is not None:
        doc["reward_model"] = {"enable": legacy_rm}
    return OmegaConf.create(doc)


@pytest.mark.parametrize("config, expected", [
    (cfg(), ["a critic (critic.enable=None, algorithm.adv_estimator=gae)"]),  # verl's default estimator is gae
    (cfg(estimator="grpo"), []),
    (cfg(critic=False), []),
    (cfg(critic=True, estimator="grpo"), ["a critic (critic.enable=True, algorithm.adv_estimator=grpo)"]),
    (cfg(estimator="grpo", rm=True), ["a reward model (reward.reward_model.enable=True)"]),
    (cfg(estimator="grpo", legacy_rm=True), ["a reward model (reward_model.enable=True)"]),
    (cfg(estimator="grpo", legacy_rm=False), []),
])
def test_roles_follow_verls_own_rule(config, expected):
    assert unsupported_roles(config) == expected

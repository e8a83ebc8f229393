"""Which roles a recipe runs beside actor, rollout and reference, as verl decides them (need_critic)."""

import pytest

from verl_ascend.rehearse.rehearsal import unsupported_roles

pytestmark = pytest.mark.verl_agnostic


@pytest.mark.parametrize("overrides, expected", [
    ([], ["a critic (critic.enable=null, algorithm.adv_estimator=gae)"]),  # verl's default estimator is gae
    (["algorithm.adv_estimator=grpo"], []),
    (["algorithm.adv_estimator=gae", "critic.enable=False"], []),
    (["algorithm.adv_estimator=grpo", "critic.enable=True"], ["a critic (critic.enable=true, algorithm.adv_estimator=grpo)"]),
    (["algorithm.adv_estimator=grpo", "reward.reward_model.enable=True"], ["a reward model (reward.reward_model.enable=True)"]),
    (["algorithm.adv_estimator=grpo", "reward_model.enable=True"], ["a reward model (reward_model.enable=True)"]),
    (["algorithm.adv_estimator=grpo", "reward_model.enable=True", "reward_model.enable=False"], []),  # last wins
])
def test_roles_follow_verls_own_rule(overrides, expected):
    assert unsupported_roles(overrides) == expected

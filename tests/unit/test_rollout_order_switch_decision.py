"""VERL_ASCEND_ROLLOUT_ORDER decided in this process: per host and value, a missing dispatch point, a bad value.
The fresh-interpreter runs are in tests/process/test_rollout_order_switch.py."""

import types

import pytest

from verl_ascend.patches import rollout_order

TARGET = "verl.single_controller.ray.base"


def target_module():
    return types.SimpleNamespace(__name__=TARGET, func_generator=lambda *a, **k: None)


@pytest.mark.verl_agnostic
@pytest.mark.parametrize(
    "value,ascend,applies",
    [(None, False, False), (None, True, True), ("tiled", False, True), ("interleaved", True, False)],
)
def test_decision_per_host_and_value(monkeypatch, value, ascend, applies):
    monkeypatch.delenv("VERL_ASCEND_ROLLOUT_ORDER", raising=False)
    if value:
        monkeypatch.setenv("VERL_ASCEND_ROLLOUT_ORDER", value)
    monkeypatch.setattr(rollout_order.platform, "is_ascend_host", lambda: ascend)
    monkeypatch.setattr(rollout_order, "spmd_trainer_path", lambda: True)  # a verl whose trainer has the sync path
    reason = rollout_order.PATCH.applies(target_module())
    assert (reason is None) == applies
    if not applies and value is None:
        assert "set VERL_ASCEND_ROLLOUT_ORDER=tiled" in reason  # off Ascend: says how to turn it on


@pytest.mark.verl_agnostic
def test_missing_dispatch_point_is_not_applicable(monkeypatch):
    monkeypatch.setenv("VERL_ASCEND_ROLLOUT_ORDER", "tiled")
    reason = rollout_order.PATCH.applies(types.SimpleNamespace(__name__=TARGET))
    assert reason and "func_generator" in reason
    reason = rollout_order.PATCH.applies(types.SimpleNamespace(__name__=rollout_order.AGENT_LOOP))
    assert reason and "AgentLoopManager" in reason


@pytest.mark.verl_agnostic
def test_bad_value_is_an_error_naming_it_and_the_fix(monkeypatch):
    # The one test of this switch's bad-word message (every word switch's wording: test_settings.py):
    # the probe raises rather than guessing; the registry records it as `failed` and the import goes on.
    monkeypatch.setenv("VERL_ASCEND_ROLLOUT_ORDER", "tiles")
    with pytest.raises(ValueError) as err:
        rollout_order.PATCH.applies(target_module())
    assert "'tiles'" in str(err.value) and "VERL_ASCEND_ROLLOUT_ORDER=tiled" in str(err.value)
    assert "VERL_ASCEND_ROLLOUT_ORDER=interleaved" in str(err.value)

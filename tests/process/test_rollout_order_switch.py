"""VERL_ASCEND_ROLLOUT_ORDER: the decision per host and value; a fresh Ascend-host interpreter applies it."""

import types

import pytest
from subproc import clean_env, last_json, run_python

from verl_ascend.patches import rollout_order

PROBE = """
import json
import verl.single_controller.ray.base as base
import verl.experimental.agent_loop.agent_loop
from verl_ascend.core import registry
from verl_ascend.core.marks import is_wrapped
row = registry.summarize("rollout_order")["targets"]
wrapped = is_wrapped(base.func_generator, "rollout_order")
print(json.dumps({"rows": {r["target"]: [r["state"], r["detail"]] for r in row}, "wrapped": wrapped}))
"""
TARGET = "verl.single_controller.ray.base"


def probe(**env):
    return last_json(run_python(PROBE, env=clean_env(**env), timeout=600))


@pytest.mark.field_stack
def test_ascend_host_default_follows_the_trainer_path():
    """Unset on an Ascend host: tiled where the dispatch position decides the load (verl 0.6's
    rollout.mode=sync), not applicable on the agent loop, whose requests verl routes itself."""
    on = probe(fake_npu=True)
    spmd = rollout_order.spmd_trainer_path()  # the installed verl's trainer, read from its source
    assert spmd == _verl_is_0_6()
    if spmd:
        assert on["rows"][TARGET][0] == "applied" and on["wrapped"]
        assert "default on Ascend hosts" in on["rows"][TARGET][1] and "spmd" in on["rows"][TARGET][1]
    else:
        assert on["rows"][TARGET][0] == "not applicable" and not on["wrapped"]
        assert "rollout.mode=sync" in on["rows"][TARGET][1]
    state, reason = on["rows"][rollout_order.AGENT_LOOP]
    assert state == "not applicable" and "bench/rollout_balance.py" in reason
    assert ("AsyncLLMServerManager" if _verl_is_0_6() else "GlobalRequestLoadBalancer") in reason


@pytest.mark.field_stack
def test_explicit_tiled_applies_on_every_dispatch_point():
    on = probe(fake_npu=True, VERL_ASCEND_ROLLOUT_ORDER="tiled")
    assert on["wrapped"] and on["rows"][TARGET][0] == "applied"
    state, detail = on["rows"][rollout_order.AGENT_LOOP]
    assert state == "applied" and "no gain expected" in detail


def _verl_is_0_6() -> bool:
    """verl up to 0.6 (0.5.0 of the field report's images included): the spmd path is the default."""
    from importlib.metadata import version

    from packaging.version import Version

    return Version(version("verl")) < Version("0.7")


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

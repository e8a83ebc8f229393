"""VERL_ASCEND_ROLLOUT_ORDER: the decision per host and value; a fresh Ascend-host interpreter applies it."""

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

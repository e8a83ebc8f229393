"""`verl-ascend status` says "applied, inactive on this path" for rollout_order where the trainer loop the
installed verl runs by default never calls what the patch wrapped (#36 item 6; rehearse's TaskRunner line
says the same from the live manager). verl 0.9 runs the v1 TransferQueue loop by default
(trainer.use_v1=True): its AgentLoopManagerTQ defines its own generate_sequences, and no verl >= 0.7 trainer
generates through the worker group. Decided from the installed verl's files, never from its version."""

import json
from importlib.metadata import version

import pytest
from packaging.version import Version
from subproc import clean_env, last_json, run_cli

from verl_ascend.core import registry, status, verl_install
from verl_ascend.patches import rollout_order

TILED = {"fake_npu": True, "VERL_ASCEND_ROLLOUT_ORDER": "tiled"}


def _installed_verl():
    return Version(version("verl"))


def test_status_says_applied_inactive_where_the_default_loop_never_calls_the_wrapped_dispatch():
    env = clean_env(bins=("npu-smi",), **TILED)
    proc = run_cli("status", "--json", "--patch", "rollout_order", env=env)
    report = last_json(proc)
    (patch,) = report["patches"]
    rows = {row["target"]: row for row in patch["targets"]}
    assert patch["state"] == "applied", json.dumps(patch, indent=1)
    # what the installed verl's own files say, read here without the patch module's helpers
    root = verl_install.package_dir()
    v1_manager = (root / "trainer" / "ppo" / "v1" / "agent_loop_tq.py")
    v1_default = verl_install.v1_default()
    self_dispatching = v1_manager.is_file() and "    def generate_sequences(" in v1_manager.read_text()
    spmd = "actor_rollout_wg.generate_sequences" in (root / "trainer" / "ppo" / "ray_trainer.py").read_text()
    if _installed_verl() >= Version("0.9"):  # the case the issue is about must be the one exercised here
        assert v1_default and self_dispatching and not spmd
    agent = rows[rollout_order.AGENT_LOOP]
    group = rows[rollout_order.WORKER_GROUP]
    assert bool(agent.get("inactive")) == bool(v1_default and self_dispatching), agent
    assert bool(group.get("inactive")) == (not spmd), group
    if v1_default and self_dispatching:
        assert "AgentLoopManagerTQ" in agent["inactive"] and "trainer.use_v1=False" in agent["inactive"]
    every = all(row.get("inactive") for row in (agent, group))
    assert bool(patch.get("inactive")) == every
    text = status.render(report)  # the text `status` prints, from this very report
    headline = next(line for line in text.splitlines() if line.strip().startswith("rollout_order"))
    assert headline.split(None, 1)[1] == ("applied, inactive on this path" if every else "applied"), text
    assert f"{rollout_order.AGENT_LOOP}: applied, inactive on this path (" in text or not agent.get("inactive")
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.verl_agnostic
def test_the_legacy_loop_keeps_the_agent_loop_wrap_active(monkeypatch):
    """A verl whose default loop is not v1 (trainer.use_v1 default False, or no v1 loop) calls
    AgentLoopManager.generate_sequences itself: not inactive there."""
    monkeypatch.setattr(verl_install, "v1_default", lambda: False)
    assert rollout_order._inactive(rollout_order.AGENT_LOOP) is None
    monkeypatch.setattr(verl_install, "v1_default", lambda: None)
    assert rollout_order._inactive(rollout_order.AGENT_LOOP) is None
    monkeypatch.setattr(verl_install, "v1_default", lambda: True)
    monkeypatch.setattr(rollout_order, "v1_dispatching_manager", lambda: "")
    assert rollout_order._inactive(rollout_order.AGENT_LOOP) is None
    monkeypatch.setattr(rollout_order, "v1_dispatching_manager", lambda: "AgentLoopManagerTQ (x)")
    assert "AgentLoopManagerTQ (x)" in rollout_order._inactive(rollout_order.AGENT_LOOP)


@pytest.mark.verl_agnostic
def test_the_headline_is_inactive_only_when_every_applied_target_is():
    import types

    calls = []

    def inactive(target):
        calls.append(target)
        return "never called" if target == "va_probe_a" else None

    patch = registry.Patch(name="probe_inactive", targets=("va_probe_a", "va_probe_b"), applies=lambda m: None,
                           apply=lambda m: "wrapped", inactive=inactive)
    reg = registry.Registry()
    reg.install([patch])  # hooks on modules nobody imports: decided below by hand
    reg.apply_to(patch, "va_probe_a", types.ModuleType("va_probe_a"))
    row = reg.summarize("probe_inactive")
    assert row["state"] == "applied" and row["inactive"] == "never called"  # b is pending: a decides alone
    reg.apply_to(patch, "va_probe_b", types.ModuleType("va_probe_b"))
    row = reg.summarize("probe_inactive")
    assert [t.get("inactive") for t in row["targets"]] == ["never called", None] and "inactive" not in row
    assert set(calls) == {"va_probe_a", "va_probe_b"}

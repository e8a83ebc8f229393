"""check's rule table (rules.ALL) against docs/check.md, and the HCCL/Gloo interface decision that check's
`env` rule and doctor's `network.socket_ifname_pair` take from one place (core.ifname)."""

import re
from pathlib import Path

import pytest

from verl_ascend.check import rules
from verl_ascend.core.profiles import PROFILES
from verl_ascend.doctor import network
from verl_ascend.doctor.network import Interface

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "check.md").read_text()
STAGES = ("compose", "verl", "extract", "trainer")  # the pipeline's own subjects, one row in the docs


def doc_rules() -> list:
    table = DOC.split("| rule | checks |", 1)[1].split("\n\n", 1)[0]
    names = []
    for line in table.strip().splitlines()[1:]:
        names += re.findall(r"`([^`]+)`", line.strip("|").split("|")[0])
    return names


@pytest.mark.verl_agnostic
def test_the_docs_rule_table_lists_every_rule_once_and_the_stages():
    names = doc_rules()
    assert len(names) == len(set(names)), names
    assert set(STAGES) <= set(names)
    assert set(names) - set(STAGES) == {r.name for r in rules.ALL}


@pytest.mark.verl_agnostic
def test_every_rule_takes_the_one_context_and_names_its_findings_by_itself():
    ctx = rules.Context(None, None, False, profile=PROFILES["a3"],
                        launch_env={"HCCL_SOCKET_IFNAME": "eth0", "HCCL_INTER_HCCS_DISABLE": "TRUE"})
    script_only = [r for r in rules.ALL if not r.needs_config]
    assert [r.name for r in script_only] == ["env"]
    found = rules.run(ctx, needs_config=False)
    assert len(found) == 2 and {f.subject for f in found} == {"env"}, found


NODE = {n: Interface(n, [ip]) for n, ip in (("lo", "127.0.0.1"), ("eth0", "10.1.2.3"), ("eth1", "10.9.9.9"))}


def check_says(hccl, gloo) -> str:
    """check's env rule on a script exporting the two: 'ok' or its severity."""
    env = {k: v for k, v in (("HCCL_SOCKET_IFNAME", hccl), ("GLOO_SOCKET_IFNAME", gloo)) if v}
    found = rules.env(rules.Context(None, None, False, launch_env=env))
    return found[0].severity if found else "ok"


def doctor_says(hccl, gloo) -> str:
    env = {k: v for k, v in (("HCCL_SOCKET_IFNAME", hccl), ("GLOO_SOCKET_IFNAME", gloo)) if v}
    (pair,) = network.check_ifname_pair(env, NODE, nnodes=2)
    return pair.severity


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("hccl, gloo, same", [
    ("=eth0", "eth0", True),         # the strings differ, the interface is one: neither tool complains
    ("eth0", "eth0", True),
    ("=eth0,eth1", "eth1,eth0", True),
    ("eth0", "eth1", False),
    ("eth", "eth0", False),           # HCCL's prefix takes eth1 too
    ("^lo", "eth0", False),           # HCCL's exclusion takes every other interface
    ("eth0", "", False),              # Gloo picks its own
])
def test_check_and_doctor_agree_on_which_interfaces_the_variables_select(hccl, gloo, same):
    """The same pair through both tools: check warns (the script is not yet on a node) exactly where
    doctor, on a node with lo, eth0 and eth1, finds an error."""
    assert check_says(hccl, gloo) == ("ok" if same else "warning")
    assert doctor_says(hccl, gloo) == ("ok" if same else "error")


def test_check_on_a_recipe_exporting_equal_eth0_and_eth0_has_no_env_finding(tmp_path, monkeypatch):
    """The done-when of #28 through check's whole pipeline: the shipped 7B recipe launched with
    HCCL_SOCKET_IFNAME='=eth0' GLOO_SOCKET_IFNAME=eth0 (doctor's side: the test above)."""
    from verl_ascend.check import run_check

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HCCL_SOCKET_IFNAME", "=eth0")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth0")
    monkeypatch.delenv("SOCKET_IFNAME", raising=False)
    report = run_check(str(ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh"))
    assert [f for f in report["findings"] if f["subject"] == "env"] == [], report["findings"]
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth1")  # and the rule is live on this path
    report = run_check(str(ROOT / "recipes" / "grpo_qwen2_5_7b_a2.sh"))
    (env,) = [f for f in report["findings"] if f["subject"] == "env"]
    assert "'=eth0' selects eth0" in env["message"] and "'eth1' selects eth1" in env["message"]

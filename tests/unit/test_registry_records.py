"""core.registry's rules, on a Registry of each test's own: a gate arms the steps, the headline is
what the steps did, failures are recorded and never raised, each target once, revert, disabled.

The targets are modules each test writes to tmp_path and imports for real, through core.hooks;
the fixture forgets them afterwards (hooks.uninstall, sys.modules). What needs a fresh interpreter
(activation, `import verl`, the .pth) is in tests/process/test_registry.py.
"""

import itertools
import logging
import sys

import pytest

from verl_ascend.core import hooks, registry
from verl_ascend.core.registry import APPLIED, DISABLED, FAILED, NOT_APPLICABLE, OVERRIDDEN, PENDING, REVERTED, WATCHING, Patch, Registry, Step

pytestmark = pytest.mark.verl_agnostic
_serial = itertools.count()


@pytest.fixture
def world(tmp_path, monkeypatch):
    """(a fresh Registry, module(stem) -> a new importable module name) for this test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("VERL_ASCEND_PATCHES", raising=False)
    made = []

    def module(stem: str, source: str = "VALUE = 1\n") -> str:
        name = f"va_reg_{stem}_{next(_serial)}"
        (tmp_path / f"{name}.py").write_text(source)
        made.append(name)
        return name

    yield Registry(), module
    hooks.uninstall(made)
    for name in made:
        sys.modules.pop(name, None)


@pytest.fixture
def logged():
    """The messages the verl_ascend logger emits during the test (it does not propagate to pytest's)."""
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger("verl_ascend")
    logger.addHandler(handler)
    yield messages
    logger.removeHandler(handler)


def _import(name):
    return __import__(name)


def _rows(summary):
    return {row["target"]: (row["state"], row["detail"]) for row in summary["targets"]}


def test_a_gate_that_says_no_is_the_headline_and_arms_nothing(world):
    reg, module = world
    gate, step_target = module("gate"), module("step")
    calls = []
    reg.install([Patch(name="p", targets=(gate,), applies=lambda m: "not an Ascend host",
                       steps=(Step(step_target, applies=lambda m: None, apply=calls.append),))])
    _import(gate)
    _import(step_target)
    summary = reg.summarize("p")
    assert (summary["state"], summary["detail"]) == (NOT_APPLICABLE, "not an Ascend host")
    assert _rows(summary) == {gate: (NOT_APPLICABLE, "not an Ascend host")}
    assert calls == []


def test_the_steps_decide_the_headline_never_the_watching_gate(world):
    """What torch_npu_save does on a fixed torch_npu: the gate applies, its step says why not."""
    reg, module = world
    gate, step_target = module("torch"), module("torch_npu")
    reg.install([Patch(name="p", targets=(gate,), applies=lambda m: None,
                       steps=(Step(step_target, applies=lambda m: "fixed in this release"),))])
    _import(gate)
    summary = reg.summarize("p")
    assert summary["state"] == PENDING and _rows(summary)[gate][0] == WATCHING
    assert _rows(summary)[step_target] == (PENDING, f"waits for `import {step_target}`")
    _import(step_target)
    summary = reg.summarize("p")
    assert (summary["state"], summary["detail"]) == (NOT_APPLICABLE, "fixed in this release")
    assert _rows(summary)[gate] == (WATCHING, f"watching {step_target}")


def test_an_applied_step_is_the_headline_over_others_that_say_no(world):
    reg, module = world
    gate, first, second = module("gate"), module("first"), module("second")
    steps = (Step(first, applies=lambda m: "nothing to fix"), Step(second, applies=lambda m: None,
                                                                  apply=lambda m: f"changed VALUE={m.VALUE}"))
    reg.install([Patch(name="p", targets=(gate,), applies=lambda m: None, steps=steps)])
    for name in (gate, first, second):
        _import(name)
    summary = reg.summarize("p")
    assert (summary["state"], summary["detail"]) == (APPLIED, "changed VALUE=1")
    assert [row["target"] for row in summary["targets"]] == [gate, first, second]  # gate first, steps in order


def test_a_before_import_step_runs_before_the_module_and_may_import_it(world):
    reg, module = world
    gate, log = module("gate"), module("log", "ORDER = []\n")
    target = module("late", f"import {log}\nSEEN = list({log}.ORDER)\n")
    order = _import(log).ORDER

    def adaptor(m):
        order.append(("adaptor", m))
        return "ran first"

    reg.install([Patch(name="p", targets=(gate,), applies=lambda m: None,
                       steps=(Step(target, applies=lambda m: None, apply=adaptor, before_import=True),))])
    _import(gate)
    assert _rows(reg.summarize("p"))[target] == (PENDING, f"waits for `import {target}` (runs before it)")
    late = _import(target)
    assert late.SEEN == [("adaptor", None)]  # the step ran before the module's body, which saw it
    assert _rows(reg.summarize("p"))[target] == (APPLIED, "ran first")


def test_a_step_on_a_module_already_imported_gets_the_module(world):
    reg, module = world
    gate, target = module("gate"), module("early")
    _import(target)
    seen = []
    reg.install([Patch(name="p", targets=(gate,), applies=lambda m: None,
                       steps=(Step(target, applies=lambda m: seen.append(m) or "too late", before_import=True),))])
    _import(gate)
    assert seen == [sys.modules[target]]
    assert reg.summarize("p")["state"] == NOT_APPLICABLE


@pytest.mark.parametrize("where", ["applies", "apply"])
def test_a_raising_step_is_recorded_failed_and_the_import_goes_on(world, where, logged):
    reg, module = world
    gate, target = module("gate"), module("target")

    def boom(m):
        raise RuntimeError(f"injected in {where}")

    step = Step(target, applies=boom) if where == "applies" else Step(target, applies=lambda m: None, apply=boom)
    reg.install([Patch(name="p", targets=(gate,), applies=lambda m: None, steps=(step,))])
    _import(gate)
    assert _import(target).VALUE == 1
    summary = reg.summarize("p")
    assert (summary["state"], summary["detail"]) == (FAILED, f"RuntimeError: injected in {where}")
    assert any(m.startswith(f"patch 'p' failed on {target} and was skipped") for m in logged), logged


def test_each_target_is_decided_once_however_often_it_is_installed_or_imported(world):
    reg, module = world
    target = module("once")
    calls = []
    patch = Patch(name="p", targets=(target,), applies=lambda m: None, apply=lambda m: calls.append(m) or "done")
    for _ in range(3):
        reg.install([patch])
    _import(target)
    reg.apply_to(patch, target, sys.modules[target])
    assert len(calls) == 1 and reg.summarize("p")["state"] == APPLIED


def test_revert_undoes_the_patch_and_lets_it_apply_again(world):
    reg, module = world
    target = module("rev")
    log = []
    patch = Patch(name="p", targets=(target,), applies=lambda m: None, apply=lambda m: log.append("apply") or "on",
                  revert=lambda: log.append("revert"))
    reg.install([patch, Patch(name="q", targets=(target,), applies=lambda m: None, apply=lambda m: "on")])
    mod = _import(target)
    assert reg.revert("p") is True
    assert reg.summarize("p")["state"] == REVERTED and log == ["apply", "revert"]
    assert reg.apply_to(patch, target, mod).state == APPLIED and log == ["apply", "revert", "apply"]
    assert reg.revert("q") is False  # no revert: nothing undone, the row says what it did
    assert reg.summarize("q")["state"] == APPLIED


def test_a_disabled_patch_arms_nothing_and_an_unknown_name_is_warned(world, logged):
    reg, module = world
    target = module("off")
    calls = []
    reg.install([Patch(name="p", targets=(target,), applies=lambda m: None, apply=calls.append)],
                environ={"VERL_ASCEND_PATCHES": "-p,-nosuch"})
    _import(target)
    assert calls == [] and reg.summarize("p")["state"] == DISABLED
    assert any("names no patch called nosuch" in m for m in logged), logged


def test_live_reads_overridden_when_something_else_took_the_place(world):
    reg, module = world
    target = module("live")
    now = {"ours": True}
    reg.install([Patch(name="p", targets=(target,), applies=lambda m: None, apply=lambda m: "installed",
                       live=lambda t: None if now["ours"] else "another function")])
    _import(target)
    assert reg.summarize("p")["state"] == APPLIED
    now["ours"] = False
    summary = reg.summarize("p")
    assert (summary["state"], summary["detail"]) == (OVERRIDDEN, "installed; now another function")


def test_a_record_without_apply_or_steps_is_refused():
    with pytest.raises(ValueError, match="neither apply nor steps"):
        Patch(name="p", targets=("x",), applies=lambda m: None)


def test_disabled_names_parsing():
    assert registry.disabled_names({"VERL_ASCEND_PATCHES": "-device, -ray_runtime_env,"}) == {"device", "ray_runtime_env"}
    assert registry.disabled_names({}) == set()

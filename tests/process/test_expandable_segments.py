"""The `expandable_segments` patch (#36 item 2): verl 0.6.1-0.7.x call set_expandable_segments(False/True) around
the colocated rollout's wake-up and sleep, but the function acts only on CUDA there (verl issue 6412); verl 0.8
added the NPU branch (verl PR 6346). With the patch the same calls reach torch_npu's allocator
(`torch_npu.npu.memory._set_allocator_settings`, the double records them). Run against the installed verl's own
`verl.utils.device` and workers in fresh interpreters on a (fake) Ascend host; which verl decides what is
expected is read from its function's source, never its version."""

import inspect
import json

import pytest
import real_torch_npu
from subproc import clean_env, last_json, run_python

PROBE = """
import json, sys
import verl.utils.device as device
import torch_npu
from verl_ascend.core import registry
for enable in (False, True):
    device.set_expandable_segments(enable)
direct = [c for c in torch_npu.calls if c[0] == "_set_allocator_settings"]
bound = {}
for name in WORKERS:
    try:
        mod = __import__(name, fromlist=["x"])
    except Exception as exc:
        bound[name] = f"import failed: {type(exc).__name__}"
        continue
    if hasattr(mod, "set_expandable_segments"):
        before = len(torch_npu.calls)
        mod.set_expandable_segments(False)
        bound[name] = [c for c in torch_npu.calls[before:] if c[0] == "_set_allocator_settings"]
row = registry.summarize("expandable_segments")
print(json.dumps({"state": row["state"], "detail": row["detail"], "bound": bound, "calls": direct}))
"""
# verl's modules that import set_expandable_segments by name and call it around the rollout's wake-up / sleep
WORKERS = ("verl.workers.fsdp_workers", "verl.workers.engine_workers")


def probe(**env):
    code = f"WORKERS = {WORKERS!r}\n" + PROBE
    return last_json(run_python(code, env=clean_env(fake_npu=True, bins=("npu-smi",), **env), timeout=600))


def verl_function_handles_npu() -> bool:
    """What the installed verl's own set_expandable_segments does, from its source (verl PR 6346 added NPU)."""
    import verl.utils.device as device

    text = inspect.getsource(device.set_expandable_segments)
    return "npu" in text or "get_platform" in text


def _sleep_wake_callers() -> list:
    """verl's worker modules that call the toggle on the sleep/wake path, read from the installed files."""
    import importlib.util

    found = []
    for name in WORKERS:
        spec = importlib.util.find_spec(name)
        if spec and spec.origin and "set_expandable_segments(False)" in open(spec.origin).read():
            found.append(name)
    return found


EXPECTED = [["_set_allocator_settings", "expandable_segments:False"], ["_set_allocator_settings", "expandable_segments:True"]]


def test_the_toggle_reaches_torch_npus_allocator_on_every_verl():
    """verl 0.6.1-0.7.x through the patch, verl 0.8+ by itself: either way the calls reach the allocator."""
    got = probe()
    assert got["calls"] == EXPECTED, got
    callers = _sleep_wake_callers()
    assert callers, "the installed verl calls set_expandable_segments on no sleep/wake path: the test says nothing"
    for name in callers:  # the workers' own name for the function reaches the allocator too
        assert got["bound"][name] == [EXPECTED[0]], (name, got["bound"])
    if verl_function_handles_npu():
        assert got["state"] == "not applicable" and "6346" in got["detail"], got
    else:
        assert got["state"] == "applied", got


def test_without_the_patch_verl_before_0_8_leaves_the_allocator_alone():
    """The bug itself, on the installed verl: what the patch is for (a verl with the NPU branch calls anyway)."""
    got = probe(VERL_ASCEND_PATCHES="-expandable_segments")
    assert got["state"] == "disabled"
    assert got["calls"] == ([] if not verl_function_handles_npu() else EXPECTED), got


def test_a_torch_npu_without_the_allocator_call_is_not_applicable_and_named():
    got = probe(FAKE_TORCH_NPU_ALLOCATOR_SETTINGS="0", FAKE_TORCH_NPU_VERSION="2.7.1")
    assert got["calls"] == []
    if not verl_function_handles_npu():
        assert got["state"] == "not applicable"
        assert "torch_npu 2.7.1 has no torch_npu.npu.memory._set_allocator_settings" in got["detail"]
        assert "2.7.1.post2" in got["detail"] and "PYTORCH_NPU_ALLOC_CONF" in got["detail"]


def test_an_allocator_that_refuses_is_warned_once_and_training_goes_on():
    code = ("WORKERS = ()\n" + PROBE.replace("for enable in (False, True):", "for enable in (False, True, False):"))
    env = clean_env(fake_npu=True, bins=("npu-smi",), FAKE_TORCH_NPU_ALLOCATOR_SETTINGS="raise")
    proc = run_python(code, env=env, timeout=600)
    got = last_json(proc)
    assert len(got["calls"]) == 3  # every call was tried, none raised out of set_expandable_segments
    if not verl_function_handles_npu():
        assert proc.stderr.count("refused expandable_segments") == 1, proc.stderr[-2000:]


def test_off_ascend_it_is_not_applicable():
    env = clean_env()
    got = last_json(run_python("import json, verl.utils.device\nfrom verl_ascend.core import registry\n"
                               "print(json.dumps(registry.summarize('expandable_segments')))", env=env, timeout=600))
    assert got["state"] == "not applicable" and "Ascend" in got["detail"], got


@pytest.mark.verl_agnostic
def test_the_double_models_the_real_allocator_call():
    """The double's call is the real one's (2.13.0), and its `=0` mode the releases before it (2.5.1)."""
    tree = real_torch_npu.module_tree(real_torch_npu.CURRENT, "torch_npu/npu/memory.py")
    func = real_torch_npu.function(tree, "_set_allocator_settings")
    assert func is not None and [a.arg for a in func.args.args] == ["settings"]
    old = real_torch_npu.module_tree(real_torch_npu.FIXED_SAVE, "torch_npu/npu/memory.py")
    assert real_torch_npu.function(old, "_set_allocator_settings") is None
    got = json.loads(run_python("import json, torch_npu; print(json.dumps(hasattr(torch_npu.npu.memory, "
                                "'_set_allocator_settings')))", env=clean_env(fake_npu=True)).stdout.strip().splitlines()[-1])
    assert got is True

"""torch_npu's unsafe nbytes swap (the 7B field report's RecursionError, docs/field-reports.md), reproduced with the torch_npu double, and fixed.

Each case runs in a fresh interpreter with the Ascend doubles; torch only, no verl. The affected
builds (``FAKE_TORCH_NPU_SAVE_BUG=1``, modelled on the 2.4.0 wheel) get the patch; the fixed save
path of every release from 2.5.1 on (the double's default, modelled on 2.13.0) is left alone.
"""

import pytest
from subproc import clean_env, last_json, run_python

pytestmark = pytest.mark.verl_agnostic

COMMON = r"""
import io, json, threading, torch, torch_npu

def depth():
    func, n = torch.storage.UntypedStorage.nbytes, 0
    while getattr(func, "__name__", "") == "npu_nbytes":
        func = func.__closure__[func.__code__.co_freevars.index("cpu_nbytes")].cell_contents
        n += 1
    return n

class Unpicklable:
    def __reduce__(self):
        raise TypeError("cannot pickle on purpose")

def failing_saves(n):
    failures = 0
    for _ in range(n):
        try:
            torch.save(Unpicklable(), io.BytesIO())
        except TypeError:
            failures += 1
    return failures

def save_tensor():
    try:
        buf = io.BytesIO()
        torch.save({"x": torch.arange(6.0).reshape(2, 3)}, buf)
        buf.seek(0)
        back = torch.load(buf)
        return "ok" if torch.equal(back["x"], torch.arange(6.0).reshape(2, 3)) else "mismatch"
    except RecursionError:
        return "RecursionError"

def interleaved_rounds(rounds):
    # Thread A is inside torch.save when thread B enters; B leaves after A. Stock torch_npu then
    # restores A's wrapper last. Timeouts keep a serialising (patched) save from waiting forever.
    for _ in range(rounds):
        b_in, a_done = threading.Event(), threading.Event()

        class EnterA:
            def __reduce__(self):
                b_in.wait(0.2)
                return (int, (1,))

        class EnterB:
            def __reduce__(self):
                b_in.set()
                a_done.wait(0.2)
                return (int, (2,))

        def run_a():
            torch.save(EnterA(), io.BytesIO())
            a_done.set()

        a = threading.Thread(target=run_a)
        b = threading.Thread(target=lambda: torch.save(EnterB(), io.BytesIO()))
        a.start(); b.start(); a.join(10); b.join(10)
    return depth()
"""


def run(body, **env):
    env.setdefault("FAKE_TORCH_NPU_SAVE_BUG", "1")
    return last_json(run_python(COMMON + body, env=clean_env(fake_npu=True, **env), timeout=240))


STOCK_THEN_REPAIR = """
out = {"interleaved": interleaved_rounds(4)}
out["failures"] = failing_saves(1200)
out["depth"] = depth()
out["save"] = save_tensor()
# A process that already hit the bug: the patch applied now unwinds the pile.
out["before_repair"] = depth()
from verl_ascend.core import registry
from verl_ascend.patches import torch_npu_save
outcome = registry.apply_to(torch_npu_save.PATCH, "torch_npu", torch_npu)
out.update(repaired_depth=depth(), state=outcome.state, detail=outcome.detail, save_after_repair=save_tensor())
print(json.dumps(out))
"""


def test_double_reproduces_the_bug_and_the_patch_repairs_a_process_that_hit_it():
    out = run(STOCK_THEN_REPAIR, VERL_ASCEND_PATCHES="-torch_npu_save")
    assert out["interleaved"] == 4  # each overlapping pair of saves leaves one wrapper behind
    assert out["failures"] == 1200
    assert out["depth"] == 1204
    assert out["save"] == "RecursionError"
    assert out["before_repair"] == 1205  # the save that hit RecursionError failed too, and left one more
    assert out["state"] == "applied" and "unwound 1205 " in out["detail"]
    assert out["repaired_depth"] == 0
    assert out["save_after_repair"] == "ok"


PATCHED = """
out = {"interleaved": interleaved_rounds(4)}
out["failures"] = failing_saves(1200)
out["depth_after_failures"] = depth()
errors = []
def worker(seed):
    for i in range(150):
        if i % 3 == 0:
            failing_saves(1)
        else:
            buf = io.BytesIO(); t = torch.full((4,), float(seed * 1000 + i))
            torch.save(t, buf); buf.seek(0)
            if not torch.equal(torch.load(buf), t):
                errors.append((seed, i))
threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
[t.start() for t in threads]; [t.join(60) for t in threads]
out["thread_errors"] = errors

class SavesInside:  # Ray pickles a storage by calling torch.save inside another save
    def __reduce__(self):
        inner = io.BytesIO(); torch.save(torch.ones(3), inner)
        return (bytes, (inner.getvalue(),))
nested = io.BytesIO(); torch.save(SavesInside(), nested)
out["depth"] = depth()
out["save"] = save_tensor()
print(json.dumps(out))
"""


def test_patch_keeps_depth_zero_after_failing_interleaved_concurrent_and_nested_saves():
    out = run(PATCHED)
    assert out == {"interleaved": 0, "failures": 1200, "depth_after_failures": 0, "thread_errors": [],
                   "depth": 0, "save": "ok"}


def test_a_fixed_torch_npu_is_not_applicable_and_its_save_is_untouched():
    body = """
from verl_ascend.core import registry
summary = registry.summarize("torch_npu_save")
row = [r for r in summary["targets"] if r["target"] == "torch_npu"][0]
print(json.dumps({"row": row, "headline": [summary["state"], summary["detail"]],
                  "failures": failing_saves(50), "depth": depth(), "save": save_tensor(),
                  "helper": hasattr(torch_npu.utils.serialization, "_get_npu_save_result")}))
"""
    out = run(body, FAKE_TORCH_NPU_SAVE_BUG="0")
    assert out["row"]["state"] == "not applicable"
    assert out["row"]["detail"] == "fixed in this torch_npu 2.13.0: its save does not swap UntypedStorage.nbytes"
    assert out["headline"] == ["not applicable", out["row"]["detail"]]  # the step's verdict, not the gate's
    assert out == {**out, "failures": 50, "depth": 0, "save": "ok", "helper": False}


def test_affected_torch_npu_is_detected_by_its_helper_without_saving_anything():
    body = """
calls = []
orig = torch.serialization.save
torch.serialization.save = lambda *a, **k: calls.append(1) or orig(*a, **k)
from verl_ascend.core import registry
from verl_ascend.patches import torch_npu_save
outcome = registry.apply_to(torch_npu_save.PATCH, "torch_npu", torch_npu)
print(json.dumps({"state": outcome.state, "saves_during_detection": len(calls)}))
"""
    assert run(body, VERL_ASCEND_PATCHES="-torch_npu_save") == {"state": "applied", "saves_during_detection": 0}


def test_revert_takes_the_wrapper_off_and_the_bug_is_back():
    body = """
from verl_ascend.core import registry
before = registry.summarize("torch_npu_save")["state"]
failing_saves(3)
kept = depth()
registry.revert("torch_npu_save")
failing_saves(3)
print(json.dumps({"before": before, "kept": kept, "after": depth(), "state": registry.summarize("torch_npu_save")["state"]}))
"""
    assert run(body) == {"before": "applied", "kept": 0, "after": 3, "state": "reverted"}

"""TensorDict.to("cpu") waits for the NPU: measured with the real tensordict and the real vllm-ascend code.

A fresh interpreter with the torch_npu double (its ``torch.npu.synchronize`` and ``Event.synchronize``
record each call; its ``transfer_to_npu`` aliases every public ``torch.npu`` name onto
``torch.cuda`` as the real one does), the installed verl, and a real tensordict: the environment's
0.10 (verl's pin) or 0.12.4 fetched from the package index (the first line that waits through
``torch.cuda.Event``). vllm-ascend's ``_torch_cuda_wrapper`` is read from its 0.13.0 wheel and run
as it is, so ``torch.cuda.Event`` ends up as its real placeholder. Each situation is measured with
the patch (when it applies) and with tensordict's own ``_sync_all`` put back, in the same process.
"""

import ast
import os

import pytest
import real_torch_npu as real
from subproc import clean_env, last_json, run_python

MEASURE = r"""
import json, sys, torch, torch_npu
import verl
from contextlib import contextmanager
from tensordict import TensorDict
from tensordict.base import TensorDictBase
from verl_ascend.core import registry
from verl_ascend.patches import tensordict_sync
from verl_ascend.core import marks as _util

def waits(action):
    torch_npu.calls.clear()
    action()
    return sum(1 for call in torch_npu.calls if call[0] in ("synchronize", "event.synchronize"))

row = registry.summarize("tensordict_sync")["targets"][0]
out = {"state": row["state"], "detail": row["detail"]}

def both(action):
    if out["state"] != "applied":
        return {"stock": waits(action)}
    patched = waits(action)
    assert _util.unwrap(TensorDictBase, "_sync_all", tensordict_sync.NAME)
    stock = waits(action)
    _util.wrap(TensorDictBase, "_sync_all", tensordict_sync.NAME, tensordict_sync._npu_first)
    return {"patched": patched, "stock": stock}

td = TensorDict({"a": torch.ones(4, 2), "b": {"c": torch.zeros(4)}}, batch_size=[4])
out["plain_to_cpu"] = both(lambda: td.to("cpu"))
# A Megatron worker: MindSpeed's adaptor imports transfer_to_npu after verl (and tensordict).
import torch_npu.contrib.transfer_to_npu
out["transfer_to_npu"] = both(lambda: td.to("cpu"))
out["blocking_copy"] = both(lambda: td.to("cpu", non_blocking=False))
# The same process builds a vLLM-Ascend model runner: the real wrapper, run as it is.
namespace = {"torch": torch, "contextmanager": contextmanager}
exec(sys.argv[1], namespace)
with namespace["_torch_cuda_wrapper"]():
    pass
out["event_after_runner"] = torch.cuda.Event.__name__
out["after_vllm_runner"] = both(lambda: td.to("cpu"))
out["three_copies"] = both(lambda: [td.to("cpu") for _ in range(3)])
torch_npu.state["initialized"] = False  # a process that has not used the NPU yet
out["npu_unused"] = both(lambda: td.to("cpu"))
from verl_ascend.core import status
report = status.collect(import_targets=False)
out["status"] = {p["name"]: {r["target"]: [r["state"], r["detail"]] for r in p["targets"]}
                 for p in report["patches"] if p["name"] in ("mindspeed", "torch_npu_save", "tensordict_sync")}
out["tensordict_version"] = report["versions"]["tensordict"]
print(json.dumps(out))
"""

_cache = {}


def runner_wrapper_source() -> str:
    """vllm_ascend/worker/model_runner_v1.py::_torch_cuda_wrapper from the real wheel, undecorated."""
    path = "vllm_ascend/worker/model_runner_v1.py"
    text = real.source(real.VLLM_ASCEND_PLACEHOLDER, path, dist="vllm-ascend")
    func = real.function(ast.parse(text), "_torch_cuda_wrapper")
    return "@contextmanager\n" + ast.get_source_segment(text, func)


def measured(tensordict=None):
    # One interpreter per tensordict serves several tests; a failure is kept, so it is not paid twice.
    if tensordict not in _cache:
        env = clean_env(fake_npu=True)
        if tensordict:  # a private folder first on the path; the environment keeps verl's pin
            extra = [str(real.unpacked(tensordict, "tensordict")), str(real.unpacked(real.PYVERS, "pyvers"))]
            env["PYTHONPATH"] = os.pathsep.join([*extra, env["PYTHONPATH"]])
        try:
            _cache[tensordict] = last_json(run_python(MEASURE, env=env, timeout=300, args=(runner_wrapper_source(),)))
        except Exception as exc:
            _cache[tensordict] = exc
    if isinstance(_cache[tensordict], Exception):
        raise _cache[tensordict]
    return _cache[tensordict]


@pytest.mark.field_stack
def test_the_real_vllm_ascend_runner_leaves_a_no_op_event():
    out = measured()
    assert out["event_after_runner"] == "_EventPlaceholder"


@pytest.mark.field_stack
def test_tensordict_0_10_waits_for_the_npu_itself_so_the_patch_stays_out():
    out = measured()
    assert out["state"] == "not applicable", out
    assert f"tensordict {out['tensordict_version']} synchronizes the NPU itself" in out["detail"]
    # Stock tensordict waits once per copy in every situation, the vLLM runner's placeholder included.
    assert out["plain_to_cpu"] == out["transfer_to_npu"] == out["after_vllm_runner"] == {"stock": 1}
    assert out["three_copies"] == {"stock": 3}
    assert out["blocking_copy"] == out["npu_unused"] == {"stock": 0}


@pytest.mark.field_stack
def test_tensordict_0_12_after_the_vllm_runner_waits_only_with_the_patch():
    out = measured(real.TENSORDICT_EVENT_SYNC)
    assert out["state"] == "applied", out
    assert out["detail"].startswith(f"tensordict {real.TENSORDICT_EVENT_SYNC} waits through torch.cuda.Event")
    assert out["plain_to_cpu"] == {"patched": 1, "stock": 1}
    assert out["transfer_to_npu"] == {"patched": 1, "stock": 1}  # torch.cuda.Event is still the NPU's
    # The bug: tensordict's event is vllm-ascend's placeholder, so stock waits for nothing.
    assert out["after_vllm_runner"] == {"patched": 1, "stock": 0}
    assert out["three_copies"] == {"patched": 3, "stock": 0}
    assert out["blocking_copy"] == out["npu_unused"] == {"patched": 0, "stock": 0}


@pytest.mark.field_stack
def test_status_on_an_ascend_host_says_what_each_runtime_fix_did():
    out = measured()
    status = out["status"]
    assert status["tensordict_sync"]["verl"] == [out["state"], out["detail"]]
    assert status["torch_npu_save"]["torch_npu"] == [
        "not applicable", "fixed in this torch_npu 2.13.0: its save does not swap UntypedStorage.nbytes"]
    # MindSpeed (the double) is installed: the gate on verl armed the steps on megatron and verl's workers
    assert status["mindspeed"]["verl"][0] == "watching"
    assert "watching megatron" in status["mindspeed"]["verl"][1]

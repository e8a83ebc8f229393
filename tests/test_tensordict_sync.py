"""TensorDict.to("cpu") waits for the NPU exactly when tensordict asks for a sync and the NPU is in use.

A fresh interpreter with the torch_npu double (its ``torch.npu.synchronize`` records each call) and
the installed verl and tensordict. The privateuse1 backend is renamed to ``npu`` as the real
torch_npu does, so tensordict's own device choice is the one an Ascend worker sees. Each situation
is measured with the patch (as activated by ``import verl``) and with tensordict's own ``_sync_all``
put back, in the same process.
"""

from subproc import clean_env, last_json, run_python

MEASURE = r"""
import json, torch, torch_npu
torch.utils.rename_privateuse1_backend("npu")  # what the real torch_npu does at import
import verl
from tensordict import TensorDict
from tensordict.base import TensorDictBase
from verl_ascend import registry
from verl_ascend.patches import _util, tensordict_sync

def syncs(action):
    torch_npu.calls.clear()
    action()
    return sum(1 for call in torch_npu.calls if call[0] == "synchronize")

def both(action):
    patched = syncs(action)
    assert _util.unwrap(TensorDictBase, "_sync_all", tensordict_sync.NAME)
    stock = syncs(action)
    _util.wrap(TensorDictBase, "_sync_all", tensordict_sync.NAME, tensordict_sync._npu_first)
    return {"patched": patched, "stock": stock}

row = registry.summarize("tensordict_sync")["targets"][0]
out = {"state": row["state"], "detail": row["detail"]}
td = TensorDict({"a": torch.ones(4, 2), "b": {"c": torch.zeros(4)}}, batch_size=[4])
if out["state"] == "applied":
    out["plain_to_cpu"] = both(lambda: td.to("cpu"))
    # After MindSpeed's adaptor: torch_npu.contrib.transfer_to_npu makes torch.cuda answer for the NPU.
    import torch_npu.contrib.transfer_to_npu
    out["mindspeed_to_cpu"] = both(lambda: td.to("cpu"))
    out["three_copies"] = both(lambda: [td.to("cpu") for _ in range(3)])
    out["blocking_copy"] = both(lambda: td.to("cpu", non_blocking=False))
    out["caller_wants_async"] = both(lambda: td.to("cpu", non_blocking=True))
    torch_npu.state["initialized"] = False  # a process that has not used the NPU yet
    out["npu_unused"] = both(lambda: td.to("cpu"))
# What `verl-ascend status` reports for the three runtime fixes in this (Ascend) process.
from verl_ascend import status
report = status.collect(import_targets=False)
out["status"] = {p["name"]: {r["target"]: [r["state"], r["detail"]] for r in p["targets"]}
                 for p in report["patches"] if p["name"] in ("mindspeed", "torch_npu_save", "tensordict_sync")}
out["tensordict_version"] = report["versions"]["tensordict"]
print(json.dumps(out))
"""


_cache = {}


def measured():
    # One interpreter serves both tests; a failure is kept too, so it is not paid for twice.
    if "out" not in _cache:
        try:
            _cache["out"] = last_json(run_python(MEASURE, env=clean_env(fake_npu=True), timeout=300))
        except Exception as exc:
            _cache["out"] = exc
    if isinstance(_cache["out"], Exception):
        raise _cache["out"]
    return _cache["out"]


def test_patch_syncs_the_npu_exactly_once_per_transfer_that_needs_it():
    out = measured()
    assert out["state"] == "applied", out
    assert out["detail"].startswith("tensordict 0.")
    # tensordict finds the renamed npu backend by itself; the patch replaces that sync, never adds one.
    assert out["plain_to_cpu"] == {"patched": 1, "stock": 1}
    # The bug: after transfer_to_npu tensordict asks torch.cuda, which is not initialised, and skips it.
    assert out["mindspeed_to_cpu"] == {"patched": 1, "stock": 0}
    assert out["three_copies"] == {"patched": 3, "stock": 0}
    # No sync where none is needed: blocking copy, caller-managed async copy, NPU never used.
    assert out["blocking_copy"] == {"patched": 0, "stock": 0}
    assert out["caller_wants_async"] == {"patched": 0, "stock": 0}
    assert out["npu_unused"] == {"patched": 0, "stock": 0}


def test_status_on_an_ascend_host_says_what_each_runtime_fix_did():
    out = measured()
    status = out["status"]
    assert out["tensordict_version"] in status["tensordict_sync"]["verl"][1]
    assert status["torch_npu_save"]["torch_npu"][0] == "applied"
    assert "restores UntypedStorage.nbytes" in status["torch_npu_save"]["torch_npu"][1]
    assert status["tensordict_sync"]["verl"][0] == "applied"
    assert status["mindspeed"]["verl"][0] == "applied"  # MindSpeed (the double) is installed
    assert "watching megatron" in status["mindspeed"]["verl"][1]

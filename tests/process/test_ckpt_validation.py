"""ckpt_validation in fresh interpreters: status shows the mode, a bad mode is reported with torch left
alone, and a MindSpeed that replaced the checks after us is named. The equivalence with torch's own
answers, run in the pytest process against the installed torch's originals (taken from under the patch
if the .pth already applied it), is tests/unit/test_ckpt_validation_checks.py.
"""

import json

import pytest
from subproc import clean_env, last_json, run_cli, run_python

from verl_ascend.patches import ckpt_validation as patch

# Tests of torch's own behaviour run in every environment, each with its torch (2.13, 2.7.1, 2.5.1):
# they assert what the installed torch answers, found by calling it, never one torch's answer.
per_torch = pytest.mark.field_stack
agnostic = pytest.mark.verl_agnostic  # torch-independent, or the same on every torch


@per_torch
def test_status_shows_mode():
    # --patch: only this patch's targets are imported, only it is listed
    proc = run_cli("status", "--json", "--patch", "ckpt_validation", env=clean_env(VERL_ASCEND_CKPT_VALIDATION="skip"),
                   timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    (skip,) = report["patches"]
    assert skip["name"] == "ckpt_validation"
    assert skip["state"] == "applied"
    details = {row["target"]: row["detail"] for row in skip["targets"]}
    assert details[patch.SAVE].startswith("skip: _validate_global_plan answers valid")
    assert details[patch.LOAD].startswith("skip: ")
    assert details[patch.READ].startswith("skip: create_read_items_for_chunk_list replaced")


@agnostic
def test_bad_mode_is_reported_and_torch_left_alone():
    code = """
import json
import torch.distributed.checkpoint.default_planner as dp
from verl_ascend.core import registry
print(json.dumps({"patch": registry.summarize("ckpt_validation"),
                  "marked": hasattr(dp._validate_global_plan, "verl_ascend_mode")}))
"""
    proc = run_python(code, env=clean_env(VERL_ASCEND_CKPT_VALIDATION="quick"), timeout=300)
    out = last_json(proc)
    assert out["patch"]["state"] == "failed" and not out["marked"]
    assert "VERL_ASCEND_CKPT_VALIDATION='quick' is not a mode" in out["patch"]["targets"][0]["detail"]
    assert "failed on torch.distributed" in proc.stderr  # logged at WARNING with the fix


OVERRIDE = r"""
import json
import torch.distributed.checkpoint  # the patch installs the fast checks here
from verl_ascend.core import registry
rows = lambda: {r["target"].rsplit(".", 1)[-1]: [r["state"], r["detail"]] for r in registry.summarize("ckpt_validation")["targets"]}
before = rows()
import mindspeed.megatron_adaptor  # MindSpeed double, generation from FAKE_MINDSPEED_VERSION, argv from below
from torch.distributed.checkpoint import default_planner
try:
    answer = repr(default_planner._validate_global_plan([], None))
except Exception as exc:  # a real check needs real metadata
    answer = type(exc).__name__
print(json.dumps({"before": before, "after": rows(), "state": registry.summarize("ckpt_validation")["state"],
                  "plan_answer": answer}))
"""


@agnostic
@pytest.mark.parametrize("generation,argv,replaced", [("26", "--ckpt-acceleration", True), ("26", "", False),
                                                      ("2.2", "--ckpt-acceleration", False)])
def test_status_names_mindspeed_when_it_replaced_the_checks_after_us(generation, argv, replaced):
    env = clean_env(fake_npu=True, FAKE_MINDSPEED_VERSION=generation)
    out = last_json(run_python(OVERRIDE, env=env, timeout=180, args=(argv,) if argv else ()))
    assert all(state == "applied" for state, _ in out["before"].values())
    load, save, read = (out["after"][k] for k in ("_internals", "default_planner", "planner_helpers"))
    assert read[0] == "applied"  # MindSpeed leaves read planning alone
    if not replaced:
        assert out["state"] == "applied" and load[0] == save[0] == "applied"
        return
    # MindSpeed 26.x --ckpt-acceleration stubbed both validators after the patch: status says so and who
    assert out["plan_answer"] == "True" and out["state"] == "overridden"
    for state, detail in (load, save):
        assert state == "overridden"
        assert "mindspeed/core/dist_checkpointing/checkpoint_adaptor.py" in detail and "--ckpt-acceleration" in detail

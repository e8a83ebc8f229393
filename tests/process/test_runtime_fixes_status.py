"""`verl-ascend status` shows the mindspeed, torch_npu_save and tensordict_sync patches with reasons."""

import ast
import json
import re

import pytest
import real_torch_npu as real
from subproc import FAKE_SITE, clean_env, run_cli, run_python

NAMES = ("mindspeed", "torch_npu_save", "tensordict_sync")


def status(env):
    proc = run_cli("status", "--json", "--no-import", env=env)  # verl alone reaches all three gates
    report = json.loads(proc.stdout)
    return {p["name"]: p for p in report["patches"] if p["name"] in NAMES}, report


@pytest.mark.field_stack
def test_off_ascend_all_three_are_not_applicable_with_the_reason():
    patches, _ = status(clean_env())
    assert set(patches) == set(NAMES)
    for patch in patches.values():
        assert patch["state"] == "not applicable", patch
        assert "not an Ascend host" in patch["targets"][0]["detail"]


def _has_swap_helper(version: str) -> bool:
    tree = real.module_tree(version, "torch_npu/utils/serialization.py")
    return any(isinstance(n, ast.FunctionDef) and n.name == "_get_npu_save_result" for n in ast.walk(tree))


# 2.7.1: what verl 0.6.1's Ascend stacks pin (the double with that version); "2.13.0 real": the real 2.13.0
# wheel's save path (serialization.py and the Python it imports) over the double's compiled stand-ins.
@pytest.mark.parametrize("version", ["2.7.1", f"{real.CURRENT} real"])
def test_status_says_torch_npu_save_is_not_applicable_on_a_fixed_torch_npu_and_why(version, tmp_path):
    version, _, real_python = version.partition(" ")
    env = clean_env(fake_npu=True, FAKE_TORCH_NPU_VERSION=version)
    if real_python:
        assert not _has_swap_helper(version)  # the premise, read from the wheel: its save has no nbytes swap
        site = real.save_path_over_double(version, FAKE_SITE, tmp_path / "site")
        env["PYTHONPATH"] = env["PYTHONPATH"].replace(str(FAKE_SITE), str(site))
        probe = run_python("import torch_npu.utils.serialization as s; print(s.__file__)", env=env)
        assert probe.stdout.strip().splitlines()[-1] == str(site / "torch_npu/utils/serialization.py"), probe.stderr
    proc = run_cli("status", "--patch", "torch_npu_save", env=env)
    reason = f"fixed in this torch_npu {version}: its save does not swap UntypedStorage.nbytes"
    # the headline is what the step on torch_npu decided, not the gate on torch that armed it
    assert re.search(rf"^  torch_npu_save  not applicable \({re.escape(reason)}\)$", proc.stdout, re.M), proc.stdout
    assert re.search(rf"^ +torch_npu: not applicable \({re.escape(reason)}\)$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^ +torch: watching \(watching torch_npu\)$", proc.stdout, re.M), proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]

# On an Ascend host: tests/process/test_tensordict_sync.py checks the same report from the measuring process.

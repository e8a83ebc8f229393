"""`verl-ascend status` shows the mindspeed, torch_npu_save and tensordict_sync patches with reasons."""

import json

import pytest
from subproc import clean_env, run_cli

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

# On an Ascend host: tests/process/test_tensordict_sync.py checks the same report from the measuring process.

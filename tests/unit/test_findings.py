"""The one finding record: validated severities, one text form, one JSON form, one exit-code policy."""

import json

import pytest

from verl_ascend.core.findings import ERROR, INFO, OK, SKIP, WARNING, Finding, exit_code, lines, summary, verdict

pytestmark = pytest.mark.verl_agnostic


def test_a_bad_severity_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="'warn' is not one of error, warning, info, ok, skip"):
        Finding("warn", "x", "m")


@pytest.mark.parametrize("severities, code", [
    ((), 0), ((OK, SKIP, INFO), 0), ((OK, WARNING), 1), ((WARNING, ERROR, INFO), 2), ((ERROR,), 2),
])
def test_exit_code_is_the_worst_severity(severities, code):
    assert exit_code([Finding(s, "x", "m") for s in severities]) == code


def test_text_names_the_subject_the_keys_and_the_fix_only_where_there_is_something_to_do():
    found = [Finding(ERROR, "hbm", "does not fit", "lower the batch", keys=("a.b", "c")),
             Finding(INFO, "model", "read offline", "not shown"),
             Finding(OK, "python", "3.11", "not shown either"),
             Finding(SKIP, "npu.devices", "no npu-smi", "install the driver")]
    assert lines(found, indent="  ") == [
        "  ERROR hbm: does not fit [a.b, c]",
        "         fix: lower the batch",
        "  info  model: read offline",
        "  ok    python: 3.11",
        "  skip  npu.devices: no npu-smi",
        "         fix: install the driver",
    ]
    assert summary(found) == "1 error(s), 1 info, 1 ok, 1 not checked here"
    assert summary([]) == "no findings"
    assert verdict(exit_code(found)) == "result: errors (exit 2)"
    assert verdict(0, ok="resumable") == "result: resumable (exit 0)"


def test_json_form_is_the_same_for_every_command_and_reads_back():
    f = Finding(WARNING, "/ckpt/global_step_2", "shard missing", "copy it", keys=["k"], code="shard_missing")
    d = json.loads(json.dumps(f.as_dict()))
    assert d == {"severity": "warning", "subject": "/ckpt/global_step_2", "message": "shard missing",
                 "fix": "copy it", "keys": ["k"], "code": "shard_missing", "where": {}, "sources": [], "details": {}}
    assert Finding(**d) == f


def test_status_and_patches_check_reach_their_codes_through_the_policy():
    from verl_ascend.core import status
    from verl_ascend.diffs import check as patches

    def report(patch_state="applied", problem="", verl_error=None):
        return {"verl_import_error": verl_error, "patches": [{"name": "device", "state": patch_state}],
                "settings": [{"name": "VERL_ASCEND_PATCHES", "problem": problem}]}

    assert exit_code(status.judge(report())) == 0
    assert exit_code(status.judge(report("not applicable"))) == 0
    assert exit_code(status.judge(report("overridden"))) == 1
    assert exit_code(status.judge(report(problem="unknown patch 'devcie'"))) == 1
    assert exit_code(status.judge(report("failed", verl_error="import torch fails: x"))) == 2

    def tree(supported=True, *states):
        return {"project": "verl", "supported": supported, "note": "" if supported else "no diffs for 0.5.0",
                "diffs": [{"fix": f"fix{i}", "state": s, "detail": ""} for i, s in enumerate(states)]}

    assert exit_code(patches.judge([tree(True, patches.APPLIES, patches.APPLIED, patches.OBSOLETE)])) == 0
    assert exit_code(patches.judge([tree(True, patches.APPLIES), tree(True, patches.CONFLICT)])) == 1
    assert exit_code(patches.judge([tree(False, patches.APPLIED)])) == 1

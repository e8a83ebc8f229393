"""Every ``--json`` is one envelope, ``{schema, command, exit_code, findings, ...}``, written by
``core.findings.to_json``: the exit code in it is the one the command returns, every finding has the
shared fields, and each command's own keys sit beside them. Run in this process through ``cli.main``."""

import json
from pathlib import Path

import pytest

from verl_ascend import cli
from verl_ascend.core import findings

ROOT = Path(__file__).parents[1]
FIELDS = ["severity", "subject", "message", "fix", "keys", "code", "where", "sources", "details"]


def _argv(tmp):
    ckpt = tmp / "ckpt"
    (ckpt / "global_step_1").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1")
    return {
        "status": (["status", "--json", "--no-import"], "patches"),
        "check": (["check", "--json", str(ROOT.parent / "recipes" / "grpo_qwen2_5_7b_a2.sh")], "layout"),
        "doctor": (["doctor", "--json", "--skip", "ray,patches,versions"], "context"),
        "logs": (["logs", "--json", str(ROOT / "fixtures" / "verl_steps.log")], "last_step"),
        "diagnose": (["diagnose", "--json", str(ROOT / "fixtures" / "diagnose" / "port_in_use.log")], "first_failure"),
        "ckpt check": (["ckpt", "check", "--json", str(ckpt)], "roles"),
        "patches check": (["patches", "check", "--json", "--project", "verl"], "trees"),
        "gsm8k": (["gsm8k", "--json", "--sample", "--local_dir", str(tmp / "gsm8k")], "splits"),
    }


COMMANDS = ["status", "check", "doctor", "logs", "diagnose", "ckpt check", "patches check", "gsm8k"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_json_is_the_one_envelope(command, tmp_path, capsys, monkeypatch):
    argv, own_key = _argv(tmp_path)[command]
    monkeypatch.chdir(tmp_path)
    code = cli.main(argv)
    out = capsys.readouterr().out.strip().splitlines()[-1]
    got = json.loads(out)
    assert list(got)[:4] == ["schema", "command", "exit_code", "findings"], list(got)
    assert got["schema"] == findings.SCHEMA and got["command"] == command
    assert got["exit_code"] == code
    assert own_key in got, sorted(got)
    for f in got["findings"]:
        assert list(f) == FIELDS, f
        assert findings.Finding(**f).as_dict() == f  # the shared record, readable back by a tool
    worst = findings.exit_code(findings.Finding(**f) for f in got["findings"])
    assert worst == code


def test_a_report_key_may_not_hide_the_envelopes():
    with pytest.raises(ValueError, match=r"report keys \['exit_code'\] are the envelope's own"):
        findings.envelope("x", [], exit_code=0)

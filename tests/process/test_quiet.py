"""Quiet by default: `import verl` prints what stock verl prints; bad switches are one warning line."""

import json

import pytest
from subproc import clean_env, run_python

# `import verl`, then the plugin's own account of itself written to a file (stdout and stderr stay verl's)
IMPORT_VERL = """
import verl
import json, sys
from verl_ascend.core import activation, registry
with open(sys.argv[1], "w") as f:
    json.dump({"info": activation.activation_info(), "patches": registry.snapshot()}, f)
"""


def _output(env, tmp_path, name):
    account = tmp_path / f"{name}.json"
    proc = run_python(IMPORT_VERL, env=env, args=(str(account),))
    return (proc.stdout, proc.stderr), json.loads(account.read_text())


@pytest.mark.field_stack
def test_import_verl_prints_the_same_with_and_without_the_plugin_and_off_means_off(tmp_path):
    (on, on_account), (off, off_account) = (_output(clean_env(), tmp_path, "on"),
                                             _output(clean_env(VERL_ASCEND="0"), tmp_path, "off"))
    assert on == off
    assert on_account["info"]["active"] is True and on_account["patches"], on_account  # the plugin was there
    # VERL_ASCEND=0 turns everything off: not active, no patch record, no line of ours
    assert off_account["info"]["active"] is False and off_account["patches"] == [], off_account
    assert "verl-ascend" not in off[1]


@pytest.mark.verl_agnostic  # the settings table's warnings: the same words whichever verl triggers activation
def test_bad_switches_are_one_warning_each_not_a_failed_activation():
    code = "import verl\nfrom verl_ascend.core import activation\nprint(activation.activation_info()['active'])"
    proc = run_python(code, env=clean_env(VERL_ASCEND_PATCHES="-rollout_ordr,-device", VERL_ASCEND_LOG_LEVEL="loud"))
    assert proc.stdout.strip().splitlines()[-1] == "True"
    assert "Traceback" not in proc.stderr and "activation failed" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "verl-ascend" in line]
    assert len(lines) == 2 and all(line.startswith("WARNING") for line in lines), proc.stderr
    level, names = sorted(lines, key=lambda line: "VERL_ASCEND_PATCHES" in line)
    assert "'loud'" in level and "DEBUG" in level
    assert "rollout_ordr" in names and "rollout_order" in names and "device," in names


@pytest.mark.verl_agnostic  # `ray --version` never imports verl
def test_tools_that_start_python_print_nothing_of_ours():
    import shutil
    import subprocess

    ray = shutil.which("ray")
    assert ray, "the test environment has Ray's CLI"
    outputs = []
    for env in (clean_env(), clean_env(VERL_ASCEND="0")):
        proc = subprocess.run([ray, "--version"], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs.append((proc.stdout, proc.stderr))
    assert outputs[0] == outputs[1]
    assert "verl-ascend" not in outputs[0][0] + outputs[0][1]

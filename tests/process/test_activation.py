"""The plugin activates in a fresh interpreter that imports verl, with no change to the command."""

import json
import re

import pytest
from subproc import clean_env, last_json, run_cli, run_python

STATUS_AFTER_IMPORT = """
import json, verl
from verl_ascend.core import activation, registry
print(json.dumps({"info": activation.activation_info(), "patches": registry.snapshot()}))
"""


@pytest.mark.field_stack
def test_import_verl_activates_plugin_and_logs_what_it_patched_at_debug():
    # Quiet by default (patch lines are DEBUG) is asserted by test_quiet.py against VERL_ASCEND=0.
    proc = run_python(STATUS_AFTER_IMPORT, env=clean_env(VERL_ASCEND_LOG_LEVEL="debug"))
    out = last_json(proc)
    assert out["info"]["active"] is True
    assert "pth" in out["info"]["sources"] or "entry-point" in out["info"]["sources"]
    states = {p["name"]: p["state"] for p in out["patches"]}
    # verl imports ray (verl.protocol), so the runtime_env forwarding is in place after `import verl`.
    assert states["ray_runtime_env"] == "applied"
    assert "DEBUG verl-ascend: patched ray_runtime_env" in proc.stderr


@pytest.mark.field_stack
def test_patch_switch_disables_one_patch():
    proc = run_python(STATUS_AFTER_IMPORT, env=clean_env(VERL_ASCEND_PATCHES="-ray_runtime_env"))
    states = {p["name"]: p["state"] for p in last_json(proc)["patches"]}
    assert states["ray_runtime_env"] == "disabled"
    assert states["device"] != "disabled"


@pytest.mark.field_stack
def test_interpreter_start_stays_cheap():
    # The .pth runs in every process of the environment (pip included): it must not pull in heavy modules.
    proc = run_python(
        "import sys, json; import verl_ascend;"
        "from verl_ascend.core import activation;"
        "info = activation.activation_info();"
        "print(json.dumps({'active': info['active'], 'armed': info['armed'],"
        " 'heavy': [m for m in ('torch', 'ray', 'verl', 'numpy', 'logging') if m in sys.modules],"
        " 'patch_code': sorted(m for m in sys.modules if m.startswith(('verl_ascend.patches', 'verl_ascend.core.registry')))}))"
    )
    out = last_json(proc)
    # armed by the .pth, not yet active: no patch code runs until a patched module is imported
    assert out == {"active": False, "armed": True, "heavy": [], "patch_code": []}


@pytest.fixture(scope="module")
def status_json():
    """One `status --json` run for this module: it imports every patch target (the suite's costliest probe)."""
    proc = run_cli("status", "--json")
    return proc, json.loads(proc.stdout)


@pytest.mark.field_stack
def test_status_json_lists_every_patch(status_json):
    from verl_ascend.core.activation import PATCHES

    proc, report = status_json
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p["name"] for p in report["patches"]] == list(PATCHES)
    for patch in report["patches"]:
        assert patch["state"] in {"applied", "not applicable", "pending"}, patch  # none fails on this verl
    assert report["versions"]["verl"]
    assert report["plugin"]["active"] is True


@pytest.mark.field_stack
def test_status_text_and_bad_flags(status_json):
    from verl_ascend.core.status import render

    text = render(status_json[1])  # the text form of the same report (the CLI prints exactly this)
    assert "patches:" in text and "verl device:" in text
    for patch in status_json[1]["patches"]:
        # several rows: the headline names the reason of the one that decided it (not for applied)
        reason = f" ({patch['detail']})" if len(patch["targets"]) > 1 and patch["state"] != "applied" else ""
        assert re.search(rf"^  {patch['name']} +{re.escape(patch['state'] + reason)}$", text, re.M), (patch["name"], text)
    bad = run_cli("status", "--no-such-flag")
    assert bad.returncode == 2
    assert "unrecognized arguments" in bad.stderr
    assert run_cli().returncode == 2
    unknown = run_cli("status", "--patch", "ckpt_validation,rollout_ordr")  # refused before verl is imported
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.strip().splitlines() == [
        "verl-ascend status: --patch rollout_ordr: no such patch; the patches are "
        + ", ".join(p["name"] for p in status_json[1]["patches"])], unknown.stderr

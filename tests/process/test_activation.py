"""The plugin activates in a fresh interpreter that imports verl, with no change to the command."""

import json

from subproc import clean_env, last_json, run_cli, run_python

STATUS_AFTER_IMPORT = """
import json, verl
from verl_ascend.core import activation, registry
print(json.dumps({"info": activation.activation_info(), "patches": registry.snapshot()}))
"""


def test_import_verl_activates_plugin_and_logs_what_it_patched_at_debug():
    proc = run_python(STATUS_AFTER_IMPORT)
    out = last_json(proc)
    assert out["info"]["active"] is True
    assert "pth" in out["info"]["sources"] or "entry-point" in out["info"]["sources"]
    states = {p["name"]: p["state"] for p in out["patches"]}
    # verl imports ray (verl.protocol), so the runtime_env forwarding is in place after `import verl`.
    assert states["ray_runtime_env"] == "applied"
    assert "verl-ascend" not in proc.stderr  # quiet by default: patch lines are DEBUG
    debug = run_python(STATUS_AFTER_IMPORT, env=clean_env(VERL_ASCEND_LOG_LEVEL="debug"))
    assert "DEBUG verl-ascend: patched ray_runtime_env" in debug.stderr


def test_verl_ascend_0_turns_everything_off():
    proc = run_python(STATUS_AFTER_IMPORT, env=clean_env(VERL_ASCEND="0"))
    out = last_json(proc)
    assert out["info"]["active"] is False
    assert out["patches"] == []
    assert "verl-ascend" not in proc.stderr


def test_patch_switch_disables_one_patch():
    proc = run_python(STATUS_AFTER_IMPORT, env=clean_env(VERL_ASCEND_PATCHES="-ray_runtime_env"))
    states = {p["name"]: p["state"] for p in last_json(proc)["patches"]}
    assert states["ray_runtime_env"] == "disabled"
    assert states["device"] != "disabled"


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


def test_status_json_lists_every_patch():
    from verl_ascend.core.activation import PATCHES

    proc = run_cli("status", "--json")
    report = json.loads(proc.stdout)
    assert [p["name"] for p in report["patches"]] == list(PATCHES)
    for patch in report["patches"]:
        assert patch["state"] in {"applied", "not applicable", "pending"}, patch  # none fails on this verl
    assert report["versions"]["verl"]
    assert report["plugin"]["active"] is True


def test_status_text_and_bad_flags():
    proc = run_cli("status")
    assert "patches:" in proc.stdout and "device" in proc.stdout
    bad = run_cli("status", "--no-such-flag")
    assert bad.returncode == 2
    assert "unrecognized arguments" in bad.stderr
    assert run_cli().returncode == 2

"""A host where torch_npu is installed but CANN is not sourced, with torch's backend autoload on.

``import torch`` itself fails there (torch loads torch_npu through its entry point), and a second
``import torch`` in the same process fails with an unrelated "Only a single TORCH_LIBRARY ..."
error. ``status`` and ``doctor`` must name the real cause (the loader's ``libhccl.so`` message,
chained under torch's error) and the fix, without a traceback and without that second error.
Also: the torch_npu double prints CANN warnings to stdout like the real one, and every ``--json``
output stays one valid JSON document.
"""

import json

import pytest
from subproc import clean_env, run_cli

# `import torch` fails before verl is reached: nothing here depends on the installed verl.
pytestmark = pytest.mark.verl_agnostic

BROKEN = dict(fake_npu=True, bins=("npu-smi",), FAKE_TORCH_NPU_BROKEN="1")
QUICK_DOCTOR = ("--ray-address", "off", "--skip", "network,hccl,env,npu")


def test_doctor_json_names_the_missing_library_and_the_fix():
    proc = run_cli("doctor", "--json", *QUICK_DOCTOR, env=clean_env(**BROKEN))
    assert proc.returncode == 2, proc.stderr[-3000:]  # errors found
    data = json.loads(proc.stdout)
    errors = {f["subject"]: f for f in data["findings"] if f["severity"] == "error"}
    npu = errors["torch_npu"]
    assert "libhccl.so" in npu["message"] and "Failed to load the backend extension" in npu["message"]
    assert "set_env.sh" in npu["fix"] and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in npu["fix"]
    assert "import torch fails" in errors["plugin.patches"]["message"]
    assert "TORCH_LIBRARY" not in proc.stdout + proc.stderr


def test_status_exits_2_with_one_clear_message_and_no_traceback():
    proc = run_cli("status", env=clean_env(**BROKEN))
    assert proc.returncode == 2
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "TORCH_LIBRARY" not in out
    failed = [line for line in proc.stdout.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and failed[0].startswith("import torch FAILED: RuntimeError: Failed to load the backend")
    assert "libhccl.so" in failed[0]
    assert "set_env.sh" in proc.stdout and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in proc.stdout


def test_status_json_with_a_broken_torch_npu_is_valid_and_has_the_cause():
    proc = run_cli("status", "--json", env=clean_env(**BROKEN))
    assert proc.returncode == 2
    report = json.loads(proc.stdout)
    assert "libhccl.so" in report["torch_import_error"]
    assert report["verl_import_error"].startswith("import torch fails")


def test_json_outputs_stay_valid_when_torch_npu_prints_to_stdout():
    env = clean_env(fake_npu=True, bins=("npu-smi",))
    env.pop("ASCEND_HOME_PATH", None)  # the double then prints torch_npu's CANN warning on stdout
    status = run_cli("status", "--json", "--no-import", env=env)
    assert json.loads(status.stdout)["versions"]["torch_npu"] == "2.13.0"
    assert "ASCEND_HOME_PATH environment variable is not set" in status.stderr
    # the torch group imports torch and with it torch_npu, which prints; the verl-importing groups add nothing here
    doctor = run_cli("doctor", "--json", "--ray-address", "off", "--skip", "network,hccl,env,npu,versions,patches",
                     env=env)
    assert doctor.returncode in (0, 1, 2), doctor.stderr[-3000:]  # any verdict; the JSON must parse
    assert json.loads(doctor.stdout)["schema"] == 3 and json.loads(doctor.stdout)["command"] == "doctor"
    assert "ASCEND_HOME_PATH environment variable is not set" in doctor.stderr  # printed, and kept off stdout

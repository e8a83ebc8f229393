"""verl versions besides the full CI environments: 0.7.1 and 0.8.0 work, older ones (0.4.1) get one
warning; the installed verl (0.5.0 in the field report's small environment) is judged by its layout.

Each runs the published wheel's source (cached under ~/.cache, see upstream_trees.py) on PYTHONPATH
in the first test environment, with the plugin active, in a fresh interpreter.
"""

import shutil
from pathlib import Path

import pytest
from subproc import FAKE_SITE, clean_env, last_json, run_cli, run_python
from upstream_trees import verl_tree

RANGE = "is outside the range verl-ascend supports"
PROBE = """
import json{prelude}
import verl
from verl.utils.device import get_device_name, get_nccl_backend
from verl_ascend.core import registry, support
try:
    backend = get_nccl_backend()
except RuntimeError as exc:  # verl 0.5.0 raises on a CPU-only host
    backend = str(exc)
print(json.dumps({{"file": verl.__file__, "device": get_device_name(), "backend": backend,
                  "support": support.verdict(), "patches": {{p["name"]: p for p in registry.snapshot()}}}}))
"""


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("version", ["0.7.1", "0.8.0"])
def test_between_the_pinned_versions_the_plugin_fixes_the_device(version):
    root = verl_tree(version)
    env = clean_env(fake_npu=True, bins=("nvidia-smi",))
    env["PYTHONPATH"] = f"{root}:{FAKE_SITE}"
    proc = run_python(PROBE.format(prelude="\nimport torch_npu.contrib.transfer_to_npu"), env=env)
    out = last_json(proc)
    assert out["file"].startswith(str(root))
    assert out["support"] == {"verl": version, "supported": True, "reason": ""}
    assert (out["device"], out["backend"]) == ("npu", "hccl")
    assert out["patches"]["device"]["state"] == "applied"
    assert RANGE not in proc.stderr


@pytest.mark.field_stack
def test_installed_verl_is_supported_and_gets_the_device_fix_on_an_ascend_host():
    """Every environment's verl is in the supported range (verl 0.5.0 since the field report's images
    run it): no warning, and on a simulated Ascend host verl answers npu / hccl."""
    proc = run_python(PROBE.format(prelude=""), env=clean_env(fake_npu=True, bins=("nvidia-smi",)))
    out = last_json(proc)
    assert out["support"]["supported"] is True and out["support"]["reason"] == "", out["support"]
    assert RANGE not in proc.stderr
    assert (out["device"], out["backend"]) == ("npu", "hccl")
    assert out["patches"]["device"]["state"] == "applied"


@pytest.mark.verl_agnostic
def test_older_verl_gets_one_warning_naming_what_is_missing(tmp_path):
    # verl 0.4.x's device module lacks get_visible_devices_keyword (0.4.1 itself no longer imports
    # without pkg_resources): the 0.5.0 tree without it stands for that layout.
    root = tmp_path / "old"
    shutil.copytree(verl_tree("0.5.0"), root)
    device = root / "verl" / "utils" / "device.py"
    assert "def get_visible_devices_keyword(" in device.read_text()
    device.write_text(device.read_text().replace("def get_visible_devices_keyword(", "def _gone_before_0_5("))
    proc = run_python(PROBE.format(prelude=""), env=clean_env(PYTHONPATH=str(root)))
    out = last_json(proc)
    assert out["file"].startswith(str(root))
    assert out["support"]["verl"] == "0.5.0" and out["support"]["supported"] is False
    assert "get_visible_devices_keyword" in out["support"]["reason"]
    lines = [ln for ln in proc.stderr.splitlines() if RANGE in ln]
    assert len(lines) == 1 and lines[0].startswith("WARNING verl-ascend: verl 0.5.0")
    assert "0.5.0 to 0.9.x" in lines[0]
    # Patches still report for themselves: off an Ascend host the device fix says why it is idle.
    assert out["patches"]["device"]["state"] == "not applicable"
    assert "not an Ascend host" in out["patches"]["device"]["targets"][0]["detail"]


def _has_platform_registry() -> bool:
    import importlib.util

    root = Path(list(importlib.util.find_spec("verl").submodule_search_locations)[0])
    return (root / "plugin" / "platform" / "platform_manager.py").is_file()


@pytest.mark.field_stack
@pytest.mark.skipif(_has_platform_registry(), reason="this verl has a platform registry: test_rehearse.py runs the rehearsal")
def test_rehearse_refuses_where_verl_has_no_platform_registry(tmp_path):
    """verl 0.5.0 and 0.6.1 alike: exit 2 with the reason and the fix, before anything is written."""
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "grpo_qwen2_5_7b_a2.sh"
    proc = run_cli("rehearse", str(recipe), "--out", str(tmp_path / "out"), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "platform registry" in proc.stderr and "verl 0.9" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()

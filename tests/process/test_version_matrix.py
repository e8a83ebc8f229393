"""verl versions besides the two CI environments: 0.7.1 and 0.8.0 work, older ones get one warning.

Each runs the published wheel's source (cached under ~/.cache, see upstream_trees.py) on PYTHONPATH
in the first test environment, with the plugin active, in a fresh interpreter.
"""

import pytest
from subproc import FAKE_SITE, clean_env, last_json, run_python
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


@pytest.mark.verl_agnostic
def test_older_verl_gets_one_warning_naming_what_is_missing():
    root = verl_tree("0.5.0")
    proc = run_python(PROBE.format(prelude=""), env=clean_env(PYTHONPATH=str(root)))
    out = last_json(proc)
    assert out["file"].startswith(str(root))
    assert out["support"]["verl"] == "0.5.0" and out["support"]["supported"] is False
    assert "set_expandable_segments" in out["support"]["reason"]
    lines = [ln for ln in proc.stderr.splitlines() if RANGE in ln]
    assert len(lines) == 1 and lines[0].startswith("WARNING verl-ascend: verl 0.5.0")
    assert "0.6.1 to 0.9.x" in lines[0]
    # Patches still report for themselves: off an Ascend host the device fix says why it is idle.
    assert out["patches"]["device"]["state"] == "not applicable"
    assert "not an Ascend host" in out["patches"]["device"]["targets"][0]["detail"]

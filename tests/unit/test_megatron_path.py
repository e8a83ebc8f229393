"""Which Megatron-on-NPU stack an environment has (core.megatron_path) and doctor's verdict on it.

The facts are read in a fresh interpreter over a site folder of installed-package metadata written here:
NVIDIA's TransformerEngine as its wheels lay it out (the ``transformer_engine`` meta-package requiring
``transformer_engine_cu12``, which owns the module; read from the 2.8.0 wheels), and a non-NVIDIA owner of
the same module standing in for TransformerEngine-NPU, whose distribution name is not public here."""

import json
import os

import pytest
from subproc import clean_env, last_json, run_python

from verl_ascend.doctor import versions

pytestmark = pytest.mark.verl_agnostic


def dist(site, name, version, top=None, requires=()):
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    if top:
        (info / "top_level.txt").write_text(top + "\n")
        (site / top).mkdir(exist_ok=True)
        (site / top / "__init__.py").write_text("")


def facts(site):
    env = clean_env()
    env["PYTHONPATH"] = str(site) + os.pathsep + env.get("PYTHONPATH", "")
    code = "import json; from verl_ascend.core import megatron_path as m; f = m.facts(); print(json.dumps([f, m.summary(f)]))"
    return last_json(run_python(code, env=env, timeout=120))


def test_nvidia_te_is_told_from_another_owner_of_the_module_and_both_are_a_clash(tmp_path):
    nvidia = tmp_path / "nvidia"
    dist(nvidia, "transformer_engine", "2.8.0", requires=("transformer_engine_cu12==2.8.0",))
    dist(nvidia, "transformer_engine_cu12", "2.8.0", top="transformer_engine")
    found, line = facts(nvidia)
    te = found["transformer_engine"]
    assert te["nvidia"] == ["transformer_engine_cu12"] and te["other"] == [] and not te["clash"], found
    assert "NVIDIA's CUDA build" in line and found["megatron_adaptor"] is None

    npu = tmp_path / "npu"
    dist(npu, "transformer_engine_npu_standin", "0.1", top="transformer_engine")
    dist(npu, "megatron_adaptor_standin", "0.18.0", top="megatron_adaptor")
    found, line = facts(npu)
    assert found["transformer_engine"]["other"] == ["transformer_engine_npu_standin"] and not found["transformer_engine"]["clash"]
    assert found["megatron_adaptor"] == "megatron_adaptor_standin 0.18.0" and "not NVIDIA's CUDA build" in line

    both = tmp_path / "both"
    dist(both, "transformer_engine_cu12", "2.8.0", top="transformer_engine")
    dist(both, "transformer_engine_npu_standin", "0.1", top="transformer_engine")
    found, line = facts(both)
    assert found["transformer_engine"]["clash"] and "CLASH" in line, found


def row(**found):
    base = {"mindspeed": None, "megatron_adaptor": None, "transformer_engine": None}
    return base | found


NPU_TE = {"owners": ["te_npu"], "nvidia": [], "other": ["te_npu"], "clash": False}
NVIDIA_TE = {"owners": ["transformer_engine_cu12"], "nvidia": ["transformer_engine_cu12"], "other": [], "clash": False}


@pytest.mark.parametrize("found, ascend, severity, needle", [
    (row(transformer_engine=dict(NPU_TE, nvidia=["transformer_engine_cu12"], clash=True)), False, "error", "pip uninstall transformer_engine"),
    (row(mindspeed="0.16.0", transformer_engine=NVIDIA_TE), True, "warning", "ms-swift#6968"),
    (row(mindspeed="0.16.0", transformer_engine=NVIDIA_TE), False, "ok", "MindSpeed"),
    (row(megatron_adaptor="ma 0.18.0"), True, "warning", "TransformerEngine-NPU"),
    (row(megatron_adaptor="ma 0.18.0", transformer_engine=NPU_TE), True, "ok", "verl-project/verl#7142"),
    (row(megatron_adaptor="ma 0.18.0", transformer_engine=NPU_TE, mindspeed="0.18.0"), True, "ok", "stands down"),
    (row(), True, "skip", "neither"),
])
def test_doctor_names_the_stack_and_the_module_clash(found, ascend, severity, needle):
    (finding,) = versions.check_megatron_path(found, ascend)
    assert finding.severity == severity, finding
    assert needle in finding.message + " " + (finding.fix or ""), finding
    json.dumps(found)  # facts travel in doctor --json

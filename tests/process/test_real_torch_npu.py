"""The torch_npu double against the real wheels (fetched, read, never installed), and what real
torch does with it at ``import torch`` now that autoload is on.

Each comparison names the real file and function the double models. The wheels come from the
package index through ``tests/real_torch_npu.py``; a failed download fails these tests.
"""

import ast
import configparser
import json

import pytest
import real_torch_npu as real
from subproc import FAKE_DIST_INFO, FAKE_SITE, clean_env, last_json, run_python

pytestmark = pytest.mark.verl_agnostic

DOUBLE = FAKE_SITE / "torch_npu"


def _backends(text: str) -> dict:
    parser = configparser.ConfigParser()
    parser.read_string(text)
    return dict(parser["torch.backends"]) if parser.has_section("torch.backends") else {}


def test_double_offers_exactly_the_public_names_of_the_real_torch_npu_npu():
    names = real.literal(real.module_tree(real.CURRENT, "torch_npu/npu/__init__.py"), "__all__")
    ours = real.literal(ast.parse((DOUBLE / "_npu_names.py").read_text()), "NPU_ALL")
    assert list(ours) == list(names)
    assert {"is_initialized", "synchronize", "Event", "current_stream"} <= set(names)


def test_autoload_entry_point_is_the_real_one():
    ours = _backends((FAKE_DIST_INFO / "entry_points.txt").read_text())
    assert ours == _backends(real.dist_file(real.CURRENT, "entry_points.txt")) == {"torch_npu": "torch_npu:_autoload"}
    # torch_npu 2.4.0 had no entry point: autoload arrived with 2.5.1.
    assert _backends(real.dist_file(real.AFFECTED_SAVE, "entry_points.txt")) == {}
    assert _backends(real.dist_file(real.FIXED_SAVE, "entry_points.txt")) == ours


def test_real_init_switches_autoload_off_and_back_as_the_double_does():
    init = real.module_tree(real.CURRENT, "torch_npu/__init__.py")
    top = [ast.unparse(n) for n in init.body if isinstance(n, ast.Assign)]
    assert "os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD'] = '0'" in top
    assert real.assigned_targets(real.function(init, "_autoload")) == ["os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD']"]
    double = ast.parse((DOUBLE / "__init__.py").read_text())
    assert "os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD'] = '0'" in [ast.unparse(n) for n in double.body if isinstance(n, ast.Assign)]
    assert real.assigned_targets(real.function(double, "_autoload")) == ["os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD']"]


def test_real_backend_registration_and_cann_warning_are_what_the_double_does():
    backend = ast.unparse(real.function(real.module_tree(real.CURRENT, "torch_npu/_init/registry/backend.py"),
                                        "register_privateuse1_backend"))
    assert "torch.utils.rename_privateuse1_backend('npu')" in backend
    assert "torch._register_device_module('npu', torch_npu.npu)" in backend
    check = ast.unparse(real.function(real.module_tree(real.CURRENT, "torch_npu/_init/registry/registry_manager.py"),
                                      "_cann_package_check"))
    assert "print('Warning: ASCEND_HOME_PATH environment variable is not set.')" in check
    assert "Warning: ASCEND_HOME_PATH environment variable is not set." in (DOUBLE / "__init__.py").read_text()


def test_real_transfer_to_npu_aliases_all_public_names_and_the_device_type_probe():
    tree = real.module_tree(real.CURRENT, "torch_npu/contrib/transfer_to_npu.py")
    assert "['cuda', torch_npu.npu]" in ast.unparse(real.function(tree, "_patch_cuda"))
    assert "torch._utils._get_available_device_type" in real.assigned_targets(real.function(tree, "_init"))
    assert "return 'npu'" in ast.unparse(real.function(tree, "_patch_get_available_device_type"))
    monkey = ast.unparse(real.function(real.module_tree(real.CURRENT, "torch_npu/_init/patches/monkey_patches.py"),
                                       "_apply_patches"))
    assert "for attr in patch.__all__:\n            setattr(dest_module, attr, getattr(patch, attr))" in monkey
    # The double, run: every real public name of torch_npu.npu is now torch.cuda's.
    names = real.literal(real.module_tree(real.CURRENT, "torch_npu/npu/__init__.py"), "__all__")
    code = """
import json, sys, torch, torch_npu.contrib.transfer_to_npu
names = json.loads(sys.argv[1])
print(json.dumps({"not_aliased": [n for n in names if getattr(torch.cuda, n, None) is not getattr(torch.npu, n)],
                  "device_type": torch._utils._get_available_device_type()}))
"""
    out = last_json(run_python(code, env=clean_env(fake_npu=True), args=(json.dumps(names),)))
    assert out == {"not_aliased": [], "device_type": "npu"}


def _save_model(tree):
    adds = real.assigned_targets(real.function(tree, "_add_serialization_methods"))
    helper = real.function(tree, "_get_npu_save_result")
    inner = [n.name for n in ast.walk(helper) if isinstance(n, ast.FunctionDef)][1:] if helper else []
    return {"swap_helper": inner, "torch.save replaced": "torch.save" in adds,
            "serialization._save replaced": "torch.serialization._save" in adds}


@pytest.mark.parametrize("release,bug", [(real.AFFECTED_SAVE, "1"), (real.CURRENT, "0")])
def test_double_save_path_matches_the_real_release(release, bug):
    expected = _save_model(real.module_tree(release, "torch_npu/utils/serialization.py"))
    code = """
import json, torch
save, _save = torch.save, torch.serialization._save
import torch_npu
from torch_npu.utils import serialization as s
helper = getattr(s, "_get_npu_save_result", None)
inner = [c.co_name for c in helper.__code__.co_consts if hasattr(c, "co_name")] if helper else []
print(json.dumps({"swap_helper": inner, "torch.save replaced": torch.save is not save,
                  "serialization._save replaced": torch.serialization._save is not _save}))
"""
    # the double alone, imported here (not by torch) so the test sees what its import replaces
    env = clean_env(fake_npu=True, FAKE_TORCH_NPU_SAVE_BUG=bug, VERL_ASCEND="0", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert last_json(run_python(code, env=env)) == expected
    assert expected["swap_helper"] == (["npu_nbytes"] if bug == "1" else [])
    # Every release from 2.5.1 on is fixed, the first one included.
    assert _save_model(real.module_tree(real.FIXED_SAVE, "torch_npu/utils/serialization.py"))["swap_helper"] == []


AUTOLOAD = """
import json, os, sys
out = {}
try:
    import torch
    out["torch_npu_loaded"] = "torch_npu" in sys.modules
    out["backend"] = torch._C._get_privateuse1_backend_name()
    out["npu_module"] = getattr(torch, "npu", None) is sys.modules.get("torch_npu.npu")
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
    out["cause"] = f"{type(exc.__cause__).__name__}: {exc.__cause__}"
    try:
        import torch  # what a second import in the same process shows
    except Exception as again:
        out["second"] = f"{type(again).__name__}: {again}"
out["autoload_after"] = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD")
print(json.dumps(out))
"""


def test_import_torch_loads_the_double_through_its_entry_point():
    out = last_json(run_python(AUTOLOAD, env=clean_env(fake_npu=True)))
    assert out == {"torch_npu_loaded": True, "backend": "npu", "npu_module": True, "autoload_after": "1"}


def test_broken_torch_npu_breaks_import_torch_and_leaves_autoload_off():
    out = last_json(run_python(AUTOLOAD, env=clean_env(fake_npu=True, FAKE_TORCH_NPU_BROKEN="1")))
    assert out["error"].startswith("RuntimeError: Failed to load the backend extension: torch_npu")
    assert "libhccl.so" in out["cause"] and "libhccl.so" not in out["error"]
    assert out["autoload_after"] == "0"  # torch_npu switched it off and never got to restore it
    assert "libhccl.so" not in out.get("second", "")  # a second import never names the cause

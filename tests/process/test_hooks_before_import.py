"""hooks.before_import: a callback runs before a module's first import and may import it itself."""

import pytest
from subproc import clean_env, last_json, run_python

pytestmark = pytest.mark.verl_agnostic

SCRIPT = r"""
import atexit, json, os, shutil, sys, tempfile
root = tempfile.mkdtemp()
atexit.register(shutil.rmtree, root, True)
def write(path, text):
    path = os.path.join(root, path); os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write(text)
# a regular package and a namespace package (megatron is one), each with an adaptor that imports it
write("lib/__init__.py", "import sys\nsys.modules['log'].append('lib executed')\nfrom . import sub\n")
write("lib/sub.py", "VALUE = 1\n")
write("nsp/core/__init__.py", "VALUE = 2\n")
write("adaptor.py", "import sys\nsys.modules['log'].append('adaptor, lib loaded: %s' % ('lib' in sys.modules))\nimport lib.sub, nsp.core\n")
write("plain.py", "VALUE = 3\n")
sys.path.insert(0, root)
import types
log = []
sys.modules["log"] = log
from verl_ascend.core import hooks
seen = []
hooks.before_import("lib", lambda m: (seen.append(("lib", m)), __import__("adaptor")))
hooks.before_import("nsp", lambda m: seen.append(("nsp", m)))  # runs inside the adaptor's import of it
hooks.before_import("plain", lambda m: seen.append(("plain", m)))
hooks.when_imported("lib", lambda m: log.append("lib post-import"))
import lib.sub, nsp.core, plain
import json as already_there
hooks.before_import("json", lambda m: seen.append(("json", m is already_there)))
lib_mod, nsp_mod = sys.modules["lib"], sys.modules["nsp"]
print(json.dumps({
    "log": log, "seen": [[n, m if isinstance(m, bool) else (m is not None)] for n, m in seen],
    "lib_attr": hasattr(lib_mod, "sub"), "nsp_attr": hasattr(nsp_mod, "core"),
    "lib_spec_origin": lib_mod.__spec__.origin, "nsp_loader": type(nsp_mod.__spec__.loader).__name__,
    "pending": hooks.pending_targets(),
    "finder_after_uninstall": (hooks.uninstall(), [type(f).__name__ for f in sys.meta_path if "PostImport" in type(f).__name__])[1],
}))
"""


def test_before_import_runs_first_and_the_module_executes_once():
    out = last_json(run_python(SCRIPT, env=clean_env(VERL_ASCEND="0")))
    assert out["log"] == ["adaptor, lib loaded: False", "lib executed", "lib post-import"]
    assert out["seen"] == [["lib", False], ["nsp", False], ["plain", False], ["json", True]]
    assert out["lib_attr"] and out["nsp_attr"]  # the module in sys.modules is the one that got its submodule
    assert out["lib_spec_origin"].endswith("lib/__init__.py")  # its real spec is back
    assert out["nsp_loader"] == "NamespaceLoader"
    assert "nsp" not in out["pending"] and "lib" not in out["pending"]
    assert out["finder_after_uninstall"] == []  # uninstall() leaves no finder behind

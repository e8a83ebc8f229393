"""The real torch_npu (and vllm-ascend, tensordict) wheels, fetched from the package index for
reading or for a private ``--target`` folder; never installed into an environment.

The doubles in ``tests/fakes/`` model named files and functions of the real packages; the tests
compare them with the wheels fetched here. ``wheel(version)`` downloads one wheel with
``pip download --no-deps`` into a cache (``$VERL_ASCEND_TEST_CACHE``, default
``~/.cache/verl-ascend-tests``) and ``source(version, path)`` reads one of its files from the zip.
A download that fails raises: the comparison then fails, it is never skipped.
"""

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

CACHE_ENV = "VERL_ASCEND_TEST_CACHE"
# The torch_npu release built for the first test environment's torch (verl 0.9.1: torch 2.13.0; the tests
# that read it are verl_agnostic, so they run there only).
CURRENT = "2.13.0"
# The last release with the nbytes swap in its save path (Ascend/pytorch, removed 2025-03-31),
# and the first package-index release without it.
AFFECTED_SAVE = "2.4.0"
FIXED_SAVE = "2.5.1"
# tensordict's first line that waits through torch.cuda.Event (_sync_cuda_transfer), and the pyvers
# it needs (the environments hold verl's pinned tensordict 0.10 and an older pyvers).
TENSORDICT_EVENT_SYNC = "0.12.4"
PYVERS = "0.2.2"
# A vllm-ascend release that leaves torch.cuda.Event a no-op placeholder (0.12 to 0.23 do).
VLLM_ASCEND_PLACEHOLDER = "0.13.0"
# Wheels of old releases exist only for older Pythons; reading them needs no matching interpreter.
_PYTHON_FOR = {("torch-npu", "2.4.0"): "3.10", ("torch-npu", "2.5.1"): "3.10"}
# wheels read for their sources only, published for fewer Pythons than the environments run: vllm-ascend 0.13.0
# has cp311 wheels only (its Python 3.12 builds start at 0.21.0rc1), so the 3.12 environment asks for 3.11's
_SOURCE_PYTHON = {("vllm-ascend", "0.13.0"): "3.11"}


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "verl-ascend-tests") / "wheels"


def this_python() -> str:
    return "%d.%d" % sys.version_info[:2]


def wheel(version: str, dist: str = "torch-npu", for_this_python: bool = False) -> Path:
    """The wheel, downloaded once. ``for_this_python``: one built for the running interpreter, cached apart per
    Python (a compiled wheel unpacked for 3.11 fails to import under 3.12: the environments share this cache)."""
    folder = cache_dir() / (f"{dist}-{version}-py{this_python()}" if for_this_python else f"{dist}-{version}")
    pattern = f"{dist.replace('-', '_')}-{version}-*.whl"
    found = sorted(folder.glob(pattern))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--only-binary=:all:", "-d", str(folder),
           f"{dist}=={version}"]
    python = None if for_this_python else _PYTHON_FOR.get((dist, version))
    if python:
        cmd += ["--python-version", python, "--platform", "manylinux_2_17_x86_64"]
    elif not for_this_python and (dist, version) in _SOURCE_PYTHON:
        cmd += ["--python-version", _SOURCE_PYTHON[(dist, version)]]  # this machine's platform tags
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    found = sorted(folder.glob(pattern))
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"could not download {dist}=={version} into {folder} (the tests compare the "
                           f"doubles with it; set {CACHE_ENV} to a folder holding the wheel):\n{proc.stderr[-2000:]}")
    return found[0]


def unpacked(version: str, dist: str) -> Path:
    """The wheel's files in a cache folder, to put on a subprocess's PYTHONPATH (not installed)."""
    folder = cache_dir() / f"{dist}-{version}-py{this_python()}" / "site"
    if not (folder / ".complete").exists():
        with zipfile.ZipFile(wheel(version, dist, for_this_python=True)) as whl:
            whl.extractall(folder)
        (folder / ".complete").write_text("")
    return folder


def source(version: str, path: str, dist: str = "torch-npu") -> str:
    with zipfile.ZipFile(wheel(version, dist)) as whl:
        return whl.read(path).decode("utf-8")


def dist_file(version: str, name: str) -> str:
    """A file of the wheel's .dist-info folder (entry_points.txt, METADATA)."""
    with zipfile.ZipFile(wheel(version)) as whl:
        info = next(n for n in whl.namelist() if n.endswith(f".dist-info/{name}"))
        return whl.read(info).decode("utf-8")


def module_tree(version: str, path: str, dist: str = "torch-npu") -> ast.Module:
    return ast.parse(source(version, path, dist))


def literal(tree: ast.Module, name: str):
    """The value of a module-level ``name = <literal>`` assignment."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(name)


def function(tree: ast.Module, name: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def assigned_targets(func: ast.FunctionDef) -> list:
    """Dotted names a function assigns to, e.g. ``torch.serialization._save``."""
    return [ast.unparse(t) for node in ast.walk(func) if isinstance(node, ast.Assign) for t in node.targets]


# The save path of the real wheel: serialization.py and the pure-Python modules it imports. Over a copy of
# the double these replace the double's serialization; the double keeps standing in for the compiled part
# (torch_npu._C, the device runtime) and for the package __init__ that would load it.
SAVE_PATH = ("torch_npu/utils/serialization.py", "torch_npu/utils/storage.py", "torch_npu/utils/_error_code.py",
             "torch_npu/utils/utils.py", "torch_npu/_init/__init__.py", "torch_npu/_init/common/warning_utils.py")


def save_path_over_double(version: str, double_site: Path, dest: Path) -> Path:
    """A site folder: the double with the real wheel's save-path Python in place of its own."""
    import shutil

    shutil.copytree(double_site, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in SAVE_PATH:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(source(version, rel))
    # the real package imports utils.storage before torch.save is replaced (serialization reaches it then)
    with open(dest / "torch_npu" / "utils" / "__init__.py", "a") as init:
        init.write("\nfrom . import storage  # noqa: E402,F401  (added by tests/real_torch_npu.py)\n")
    return dest

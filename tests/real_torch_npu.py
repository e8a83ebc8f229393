"""The real torch_npu wheels, fetched from the package index for reading (never installed).

The doubles in ``tests/fakes/site/torch_npu`` model named files and functions of the real package;
the tests compare them with the wheels fetched here. ``wheel(version)`` downloads one wheel with
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
# The torch_npu release built for the test environments' torch (dev/with-verl.sh: torch 2.13.0).
CURRENT = "2.13.0"
# The last release with the nbytes swap in its save path (Ascend/pytorch, removed 2025-03-31),
# and the first package-index release without it.
AFFECTED_SAVE = "2.4.0"
FIXED_SAVE = "2.5.1"
# Wheels of old releases exist only for older Pythons; reading them needs no matching interpreter.
_PYTHON_FOR = {"2.4.0": "3.10", "2.5.1": "3.10"}


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "verl-ascend-tests") / "wheels"


def wheel(version: str) -> Path:
    folder = cache_dir() / version
    found = sorted(folder.glob(f"torch_npu-{version}-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), f"torch-npu=={version}"]
    python = _PYTHON_FOR.get(version)
    if python:
        cmd += ["--only-binary=:all:", "--python-version", python, "--platform", "manylinux_2_17_x86_64"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    found = sorted(folder.glob(f"torch_npu-{version}-*.whl"))
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"could not download torch-npu=={version} into {folder} (the tests compare the "
                           f"doubles with it; set {CACHE_ENV} to a folder holding the wheel):\n{proc.stderr[-2000:]}")
    return found[0]


def source(version: str, path: str) -> str:
    with zipfile.ZipFile(wheel(version)) as whl:
        return whl.read(path).decode("utf-8")


def dist_file(version: str, name: str) -> str:
    """A file of the wheel's .dist-info folder (entry_points.txt, METADATA)."""
    with zipfile.ZipFile(wheel(version)) as whl:
        info = next(n for n in whl.namelist() if n.endswith(f".dist-info/{name}"))
        return whl.read(info).decode("utf-8")


def module_tree(version: str, path: str) -> ast.Module:
    return ast.parse(source(version, path))


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

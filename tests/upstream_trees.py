"""Source trees of published verl versions for the diff tests: installed, cached, or downloaded.

The installed verl is used when it is the version asked for. Other versions come from the wheel on
the package index (``pip download verl==X --no-deps``), unpacked once into
``$VERL_ASCEND_SRC_CACHE`` (default ``~/.cache/verl-ascend/src``) so later runs and CI reuse it.
A test that cannot get a tree is skipped with the reason.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("VERL_ASCEND_SRC_CACHE", Path.home() / ".cache" / "verl-ascend" / "src"))


def installed_root() -> Path:
    spec = importlib.util.find_spec("verl")  # locates without importing (no activation)
    return Path(list(spec.submodule_search_locations)[0]).parent


def installed_version() -> str:
    return (installed_root() / "verl" / "version" / "version").read_text().strip()


def verl_tree(version: str) -> Path:
    """Directory holding ``verl/`` of that version (read-only: copy before changing it)."""
    if installed_version() == version:
        return installed_root()
    cached = CACHE / f"verl-{version}"
    if (cached / "verl" / "version" / "version").is_file():
        return cached
    with tempfile.TemporaryDirectory(prefix="va-wheel-") as tmp:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                 f"verl=={version}", "-d", tmp],
                capture_output=True, text=True, timeout=180,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"downloading the verl {version} wheel took over 180 s")
        wheels = list(Path(tmp).glob("verl-*.whl"))
        if proc.returncode != 0 or not wheels:
            pytest.skip(f"cannot download the verl {version} wheel from the package index: {proc.stderr.strip()[-300:]}")
        unpacked = Path(tmp) / "tree"
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [m for m in wheel.namelist() if m.startswith("verl/")]
            wheel.extractall(unpacked, members)
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".verl-{version}-", dir=CACHE))
        shutil.move(str(unpacked / "verl"), staging / "verl")
        try:
            staging.rename(cached)  # atomic: a parallel run either sees the whole tree or none
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another run won the race
    return cached


def copy_tree(version: str, dest: Path) -> Path:
    """A writable copy of verl ``version`` under ``dest`` (returns ``dest``, which holds ``verl/``)."""
    shutil.copytree(verl_tree(version) / "verl", dest / "verl", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def apply(diff: Path, root: Path) -> None:
    """Apply a diff for real to a copied tree (git apply, outside any enclosing repository)."""
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent)}
    proc = subprocess.run(["git", "apply", "-p1", str(diff)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"git apply {diff} failed:\n{proc.stderr}"

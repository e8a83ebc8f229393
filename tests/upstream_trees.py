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


def _published_tree(dist: str, version: str, stamp: str, keep, timeout: int) -> Path:
    """The files of the published ``dist==version`` wheel for which ``keep(name)`` holds, unpacked
    once under CACHE (``stamp``, a path inside, says the tree is complete). Fails the test when impossible."""
    cached = CACHE / f"{dist}-{version}"
    if (cached / stamp).is_file():
        return cached
    with tempfile.TemporaryDirectory(prefix=f"va-{dist}-") as tmp:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                 # only Python sources are kept, the same in every CPython build: asking for 3.11's lets pip take
                 # a local CPU wheel where the machine has one (torch 2.13.0) instead of a CUDA wheel for this Python
                 *(["--python-version", "3.11"] if dist == "torch" else []),
                 f"{dist}=={version}", "-d", tmp],
                capture_output=True, text=True, timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"downloading the {dist} {version} wheel took over {timeout} s")
        wheels = list(Path(tmp).glob(f"{dist}-*.whl"))
        if proc.returncode != 0 or not wheels:  # a download that fails fails the run: no check vanishes
            pytest.fail(f"cannot download the {dist} {version} wheel from the package index: {proc.stderr.strip()[-300:]}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(Path(tmp) / "tree", [m for m in wheel.namelist() if keep(m)])
        wheels[0].unlink()  # a torch wheel is most of a gigabyte
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dist}-{version}-", dir=CACHE))
        shutil.move(str(Path(tmp) / "tree" / dist), staging / dist)
        try:
            staging.rename(cached)  # atomic: a parallel run either sees the whole tree or none
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another run won the race
    return cached


def verl_tree(version: str) -> Path:
    """Directory holding ``verl/`` of that version (read-only: copy before changing it)."""
    if installed_version() == version:
        return installed_root()
    return _published_tree("verl", version, "verl/version/version", lambda name: name.startswith("verl/"), 180)


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


# --- torch: the installed one, or the distributed-checkpoint sources cut from a published wheel ---

TORCH_FILES = ("torch/version.py",)
TORCH_DIRS = ("torch/distributed/",)


def installed_torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    return Path(list(spec.submodule_search_locations)[0]).parent


def installed_torch_release() -> str:
    text = (installed_torch_root() / "torch" / "version.py").read_text()
    return text.split("__version__ = ")[1].split("\n")[0].strip("'\"").split("+")[0]


def torch_tree(version: str) -> Path:
    """Directory holding ``torch/`` of that version: the installed torch, or ``torch/distributed``'s
    Python sources (and ``torch/version.py``) cut from the published wheel and cached. A torch wheel
    is large (2.7.1: 821 MB, 50-70 s here), so it is downloaded once and only those files are kept."""
    if installed_torch_release() == version:
        return installed_torch_root()
    return _published_tree("torch", version, "torch/version.py",
                           lambda name: name in TORCH_FILES or (name.startswith(TORCH_DIRS) and name.endswith(".py")), 600)


def torch_overlay(dest: Path, files) -> Path:
    """``dest/torch``: the installed torch as symlinks, with real copies of ``files`` (paths like
    ``torch/distributed/...py``) and of the directories leading to them, so a diff can be applied
    to the copies and the result imported with ``PYTHONPATH=dest`` (no 1 GB copy)."""
    src = installed_torch_root()
    real_dirs = {Path(*Path(f).parts[:k]) for f in files for k in range(1, len(Path(f).parts))}

    def build(rel: Path):
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(src / rel):
            item = rel / entry.name
            if item in real_dirs:
                build(item)
            elif item.as_posix() in files:
                shutil.copyfile(entry.path, dest / item)
            elif entry.name != "__pycache__":
                (dest / item).symlink_to(entry.path)

    build(Path("torch"))
    return dest

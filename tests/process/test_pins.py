"""The lower bounds in pyproject.toml are the versions the lowest test environment runs."""

import re
from importlib import metadata
from pathlib import Path

from packaging.version import Version
from subproc import last_json, run_python

ROOT = Path(__file__).resolve().parents[2]


def lower_bounds() -> dict:
    text = (ROOT / "pyproject.toml").read_text()
    return {name.lower(): version for name, version in re.findall(r'"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?>=([0-9][^",;]*)', text)}


def pinned_in(requirements: Path) -> dict:
    pins = {}
    for line in requirements.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s#]+)", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_every_lower_bound_is_pinned_in_the_lowest_environment():
    bounds = lower_bounds()
    pins = pinned_in(ROOT / "dev" / "requirements-verl-0.6.1.txt")
    for name, version in bounds.items():
        if name == "hatchling":
            continue
        assert pins.get(name) == version, f"{name}: pyproject says >={version}, lowest env pins {pins.get(name)}"


INSTALLED = """
import json, sys
from importlib import metadata
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps(found))
"""


def test_installed_versions_satisfy_the_bounds():
    # Asked in a fresh interpreter: once `ray` is imported it puts its vendored copies (psutil, ...)
    # on sys.path, and metadata would report those instead of what the environment installed.
    bounds = {name: version for name, version in lower_bounds().items() if name != "hatchling"}
    installed_versions = last_json(run_python(INSTALLED, args=tuple(bounds)))
    lowest_env = metadata.version("verl") == "0.6.1"
    for name, version in bounds.items():
        installed = installed_versions.get(name)
        if installed is None:
            continue  # optional extra not installed in this environment
        if lowest_env:
            assert installed == version, f"lowest environment runs {name} {installed}, not the bound {version}"
        else:
            assert Version(installed) >= Version(version), f"{name} {installed} < {version}"

"""The lower bounds in pyproject.toml are the versions the lowest test environment runs."""

import re
from importlib import metadata
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


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


def test_installed_versions_satisfy_the_bounds():
    for name, version in lower_bounds().items():
        if name == "hatchling":
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # optional extra not installed in this environment
        if metadata.version("verl") == "0.6.1":  # the lowest-versions environment
            assert installed == version, f"lowest environment runs {name} {installed}, not the bound {version}"
        else:

            assert Version(installed) >= Version(version), f"{name} {installed} < {version}"

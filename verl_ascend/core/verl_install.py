"""Facts about the installed verl, read from its files and package metadata without importing it
(importing verl starts torch and Ray; `check` and `doctor` only need to look).

verl 0.9 added a second PPO loop (``verl/trainer/ppo/v1``, built on TransferQueue) and made it the
default (``trainer.use_v1: true`` in ``trainer/config/ppo_trainer.yaml``). That loop imports
``transfer_queue`` (which needs ``zmq`` and ``msgspec``); verl lists them under an extra, so a plain
``pip install verl`` cannot start it.
"""

import importlib.metadata
import importlib.util
import re
from pathlib import Path

# import name -> distribution name, for the v1 loop's own imports
V1_MODULES = {"transfer_queue": "TransferQueue", "zmq": "pyzmq", "msgspec": "msgspec"}


def package_dir():
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def version() -> str:
    from verl_ascend.core import platform

    return platform.installed_version("verl") or "?"


def extra_providing(dist: str):
    """The verl extra whose requirements name ``dist`` (e.g. 'verl-core'), or None."""
    try:
        requires = importlib.metadata.requires("verl") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for req in requires:
        name = re.split(r"[ ;<>=!~\[]", req, maxsplit=1)[0]
        match = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if match and name.lower() == dist.lower():
            return match.group(1)
    return None


def v1_default():
    """True/False: the installed verl's default for trainer.use_v1; None: this verl has one loop."""
    root = package_dir()
    path = root / "trainer" / "config" / "ppo_trainer.yaml" if root else None
    if path is None or not path.is_file():
        return None
    match = re.search(r"^\s+use_v1:\s*(\S+)", path.read_text(), re.M)
    return None if match is None else match.group(1).lower() == "true"


def v1_missing() -> list:
    """Distributions the v1 loop imports that are not installed here."""
    return [dist for mod, dist in V1_MODULES.items() if importlib.util.find_spec(mod) is None]


def v1_install_hint(missing: list) -> str:
    extra = extra_providing("TransferQueue")
    if extra:
        return f'pip install "verl[{extra}]=={version()}" (verl lists them under its {extra} extra)'
    return f"pip install {' '.join(missing)}"

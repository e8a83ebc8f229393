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


# The Megatron bridges verl can build its models through: the name a recipe chooses -> (import name, package).
BRIDGES = {"mbridge": ("mbridge", "mbridge"), "megatron-bridge": ("megatron.bridge", "megatron-bridge")}
BRIDGE_KEY = "actor_rollout_ref.actor.megatron.vanilla_mbridge"


def bridge_switch() -> bool:
    """Whether the installed verl has ``megatron.vanilla_mbridge`` (verl >= 0.8: False selects Megatron-Bridge,
    True mbridge; older verls build through mbridge only and their engine config rejects the key). Read from
    the engine config verl composes (``trainer/config/engine/megatron.yaml``); the reference model inherits
    the actor's value there (an ``oc.select``)."""
    root = package_dir()
    yaml = root / "trainer" / "config" / "engine" / "megatron.yaml" if root else None
    return bool(yaml and yaml.is_file() and re.search(r"^vanilla_mbridge:", yaml.read_text(), re.M))


def bridge_overrides(name: str) -> list:
    """The main_ppo overrides that make the installed verl build through bridge ``name``.

    Raises ValueError when this verl cannot use that bridge (Megatron-Bridge on a verl without the switch)."""
    if name not in BRIDGES:
        raise ValueError(f"no bridge {name!r}: choose {' or '.join(BRIDGES)}")
    if bridge_switch():
        return [f"{BRIDGE_KEY}={name == 'mbridge'}"]
    if name == "megatron-bridge":
        raise ValueError(f"verl {version()} builds Megatron models through mbridge only (its engine config has no "
                         "vanilla_mbridge switch; verl >= 0.8 has it)")
    return []

"""Which trainer loop a composed config runs on the installed verl, and what that loop needs here.

verl 0.9 added a second PPO loop (``verl/trainer/ppo/v1``, built on TransferQueue) and made it the
default through ``trainer.use_v1: true``; older verl has only the Ray PPO trainer. The v1 loop
imports ``transfer_queue`` (and TransferQueue needs ``zmq`` and ``msgspec``), which a plain
``pip install verl`` does not bring: verl lists them under an extra. Both facts are read from the
installed verl (its config and its package metadata), not from a version table.
"""

import importlib.metadata
import importlib.util
import re

from .findings import INFO, WARNING, Finding
from .layout import get

# import name -> distribution name, for the v1 loop's own imports
_V1_MODULES = {"transfer_queue": "TransferQueue", "zmq": "pyzmq", "msgspec": "msgspec"}


def _extra_providing(dist: str):
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


def findings(cfg, verl_version: str) -> tuple:
    """(name of the loop, [Finding])."""
    if "use_v1" not in (cfg.get("trainer") or {}):
        return "Ray PPO trainer (the only one in this verl)", []
    if not get(cfg, "trainer.use_v1", False):
        return "Ray PPO trainer (trainer.use_v1=False)", []
    name = "v1 TransferQueue trainer (trainer.use_v1=True)"
    missing = [dist for mod, dist in _V1_MODULES.items() if importlib.util.find_spec(mod) is None]
    if not missing:
        return name, []
    extra = _extra_providing("TransferQueue")
    fix = (f'pip install "verl[{extra}]=={verl_version}" (verl lists them under its {extra} extra)' if extra
           else f"pip install {' '.join(missing)}")
    fix += ", or run the Ray PPO trainer with trainer.use_v1=False"
    return name, [Finding("trainer", WARNING, ("trainer.use_v1",),
                          f"the recipe runs verl's {name}; it imports {', '.join(missing)}, not installed in this "
                          "environment: where the cluster's environment matches this one, main_ppo fails at start-up",
                          fix)]


def describe(name: str) -> Finding:
    return Finding("trainer", INFO, ("trainer.use_v1",), f"trainer loop: {name}")

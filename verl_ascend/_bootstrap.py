"""Activation: decide whether the plugin is on, then install the post-import hook.

Runs at interpreter start from ``verl_ascend.pth`` (every Python process of the environment:
drivers, Ray workers, torchrun children) and again from verl's entry point. It must stay cheap
(standard library only; patch modules are small and import nothing heavy at module level),
idempotent, and must never raise: a broken plugin may cost the user a patch, never ``import verl``.
"""

import logging
import os

_OFF_VALUES = {"0", "false", "off", "no", "disable", "disabled"}

_state = {"active": False, "sources": [], "disabled_by_env": False}


def enabled_by_env(environ=os.environ) -> bool:
    return environ.get("VERL_ASCEND", "1").strip().lower() not in _OFF_VALUES


def activate(source: str = "manual") -> bool:
    """Install every known patch behind the post-import hook, once per process.

    Returns True when the plugin is active after the call.
    """
    try:
        if source not in _state["sources"]:
            _state["sources"].append(source)
        if _state["active"]:
            return True
        if not enabled_by_env():
            _state["disabled_by_env"] = True
            return False
        from . import registry
        from .patches import all_patches

        registry.install(all_patches())
        from . import support

        support.watch()  # one WARNING when the imported verl is outside the supported range
        _state["active"] = True
        return True
    except Exception:  # never let activation break the host process
        logging.getLogger("verl_ascend").warning("verl-ascend: activation failed", exc_info=True)
        return False


def activation_info() -> dict:
    return {
        "active": _state["active"],
        "sources": list(_state["sources"]),
        "disabled_by_env": _state["disabled_by_env"],
    }


def from_pth() -> None:
    activate(source="pth")

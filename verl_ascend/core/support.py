"""Is the imported verl one whose layout the patches know? Say so once, loudly, if it is not.

The decision is made by feature probes on ``verl.utils.device`` (which every verl imports from
``verl/__init__``) and, for 0.9-style trees, on the platform registry; the version string only goes
into the message (source checkouts report e.g. ``0.8.0.dev``). Tested range: verl 0.6.1 to 0.9.x.
"""

import logging
import sys

from verl_ascend.core import hooks

SUPPORTED = "0.6.1 to 0.9.x"
logger = logging.getLogger("verl_ascend")
_state = {"watching": False, "verdict": None}


def unsupported_reason(verl_module) -> str:
    """'' when the imported verl has the layout the patches expect, else what is missing."""
    device = sys.modules.get("verl.utils.device")
    if device is None:
        return "verl did not import verl.utils.device"
    for name, since in (("get_device_name", ""), ("get_nccl_backend", ""), ("set_expandable_segments", " (verl 0.6.0+)")):
        if not callable(getattr(device, name, None)):
            return f"verl.utils.device has no {name}(){since}"
    manager = sys.modules.get("verl.plugin.platform.platform_manager")
    if manager is not None:  # 0.9 layout: the device patch pins the platform, replaces a wrong one
        for name in ("PlatformRegistry", "get_platform", "set_platform", "_current_platform"):
            if not hasattr(manager, name):
                return f"verl.plugin.platform.platform_manager has no {name}"
        if manager.PlatformRegistry.get("huawei") is None:
            return "verl's platform registry has no 'huawei' platform"
        return ""
    for name in ("is_cuda_available", "is_npu_available"):  # <= 0.8 layout: module-level flags
        if not isinstance(getattr(device, name, None), bool):
            return f"verl.utils.device has no boolean {name}"
    return ""


def _check(verl_module) -> None:
    try:
        reason = unsupported_reason(verl_module)
    except Exception as exc:  # a probe must never break `import verl`
        reason = f"support probe failed: {type(exc).__name__}: {exc}"
    version = getattr(verl_module, "__version__", None) or "(unknown version)"
    _state["verdict"] = {"verl": version, "supported": not reason, "reason": reason}
    if reason:
        logger.warning(
            "verl %s is outside the range verl-ascend supports (%s): %s. Patches that cannot find their "
            "targets say why in `verl-ascend status`; `verl-ascend patches check` shows which source diffs fit.",
            version, SUPPORTED, reason,
        )


def watch() -> None:
    """Check verl once it is imported (now, if it already is); at most one warning per process."""
    if _state["watching"]:
        return
    _state["watching"] = True
    hooks.when_imported("verl", _check)


def verdict():
    return _state["verdict"]

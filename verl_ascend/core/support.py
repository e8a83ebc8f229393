"""Is the imported verl one whose layout the patches know? Say so once, loudly, if it is not.

The decision is made by feature probes on ``verl.utils.device`` (which every verl imports from
``verl/__init__``) and, for 0.9-style trees, on the platform registry; the version string only goes
into the message (source checkouts report e.g. ``0.8.0.dev``). Tested range: verl 0.5.0 to 0.9.x
(0.5.0: the field report's MindSpeed-RL 2.2.0 images, which run a 0.5.0.dev fork). ``doctor``'s
versions.verl and ``status`` show this same verdict (:func:`installed_verdict`).
"""

import logging
import sys

from verl_ascend.core import hooks

SUPPORTED = "0.5.0 to 0.9.x"
logger = logging.getLogger("verl_ascend")
_state = {"watching": False, "verdict": None}


def unsupported_reason(verl_module) -> str:
    """'' when the imported verl has the layout the patches expect, else what is missing."""
    device = sys.modules.get("verl.utils.device")
    if device is None:
        return "verl did not import verl.utils.device"
    # get_visible_devices_keyword (verl 0.5.0+) is one of the queries the device patch guards
    for name, since in (("get_device_name", ""), ("get_nccl_backend", ""), ("get_visible_devices_keyword", " (verl 0.5.0+)")):
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


def _judge(verl_module) -> dict:
    try:
        reason = unsupported_reason(verl_module)
    except Exception as exc:  # a probe must never break `import verl`
        reason = f"support probe failed: {type(exc).__name__}: {exc}"
    version = getattr(verl_module, "__version__", None) or "(unknown version)"
    return {"verl": version, "supported": not reason, "reason": reason}


def _check(verl_module) -> None:
    _state["verdict"] = verdict = _judge(verl_module)
    version, reason = verdict["verl"], verdict["reason"]
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


def installed_verdict():
    """The verdict on the verl this Python imports, importing it if needed (the plugin's WARNING, if
    any, is logged then, as at any `import verl`); None when torch or verl does not import."""
    if _state["verdict"] is not None:
        return _state["verdict"]
    from verl_ascend.core import platform

    if platform.torch_import_problem():
        return None
    try:
        import verl
    except Exception:
        return None
    # the plugin off (VERL_ASCEND=0) or verl imported before it was armed: judge without the log line
    return _state["verdict"] or _judge(verl)

"""Resolve verl's device to the NPU on Ascend hosts.

Why: verl <= 0.8 computes ``is_cuda_available = torch.cuda.is_available()`` at import and lets CUDA
    win over NPU. ``torch_npu.contrib.transfer_to_npu`` (imported by MindSpeed's adaptor, hence by
    every Megatron path on Ascend) makes ``torch.cuda.is_available()`` True, so verl picks
    ``cuda``/``nccl``/``GPU`` on an NPU host (users edit ``device.py`` by hand: docs/field-reports.md#235b-converter-picks-cuda).
    verl 0.9 probes platforms in the order nvidia, huawei, amd and picks nvidia whenever an
    ``nvidia-smi`` binary exists, or silently when ``import torch_npu`` fails (CANN not sourced).
How: on an Ascend host, right after ``verl.utils.device`` is imported: verl 0.9 gets
    ``VERL_PLATFORM=huawei`` unless the user set it (a non-NPU platform detected earlier is
    replaced through verl's ``set_platform``);
    older verl gets ``is_cuda_available=False, is_npu_available=True``. If the host looks like
    Ascend but torch_npu cannot be imported, device queries raise an error naming the CANN fix
    instead of answering ``cuda``. That guard is reached only with torch_npu < 2.5 or
    ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``: from 2.5 on, torch imports torch_npu through its backend
    entry point, so without CANN ``import torch`` itself fails before verl runs; ``verl-ascend
    status``/``doctor`` then report the cause from a fresh interpreter. Off Ascend hosts nothing
    changes.
Upstream: verl 0.9 ``verl.plugin.platform`` fixes the ordering only through ``VERL_PLATFORM``.
Remove when: verl prefers a working torch_npu over CUDA in detection and reports a broken
    torch_npu loudly.
"""

import os
import sys

from verl_ascend.core import platform
from verl_ascend.core.marks import wrap
from verl_ascend.core.registry import Patch

NAME = "device"
TARGET = "verl.utils.device"
_PLATFORM_MANAGER = "verl.plugin.platform.platform_manager"
_LEGACY_QUERIES = (
    "get_device_name",
    "get_torch_device",
    "get_nccl_backend",
    "get_visible_devices_keyword",
    "get_resource_name",
    "get_device_id",
)


def _applies(module):
    if not platform.is_ascend_host():
        return platform.not_ascend_reason()
    return None


def _raising(original):
    def guarded(*args, **kwargs):
        platform.require_torch_npu()
        return original(*args, **kwargs)

    return guarded


def _guard(module) -> str:
    """torch_npu is broken here: make every device query fail with the fix instead of 'cuda'."""
    manager = sys.modules.get(_PLATFORM_MANAGER)
    if manager is not None:
        for owner in (manager, sys.modules.get("verl.plugin.platform"), module):
            if owner is not None and hasattr(owner, "get_platform"):
                wrap(owner, "get_platform", NAME, _raising)
    for query in _LEGACY_QUERIES:
        if hasattr(module, query):
            wrap(module, query, NAME, _raising)
    return f"torch_npu unusable ({platform.torch_npu_error()}); device queries raise with the fix"


def _pin_platform(manager) -> str:
    chosen = os.environ.get("VERL_PLATFORM", "").strip().lower()
    if chosen and chosen != "huawei":
        return f"VERL_PLATFORM={chosen} set by the user is kept"
    os.environ["VERL_PLATFORM"] = "huawei"
    current = getattr(manager, "_current_platform", None)  # read only: was a platform detected already?
    if current is not None and getattr(current, "device_name", None) != "npu":
        # Detected before we ran: replace it through verl's public setter.
        npu_platform = manager.PlatformRegistry.get("huawei")
        manager.set_platform(npu_platform())
        return f"VERL_PLATFORM=huawei; set_platform(huawei) replaced {current.device_name}"
    return "VERL_PLATFORM=huawei"


def _correct_flags(module) -> None:
    # Modules that already did `from verl.utils.device import is_cuda_available` hold copies.
    for name, other in list(sys.modules.items()):
        if other is None or not (name == "verl" or name.startswith("verl.")):
            continue
        if isinstance(getattr(other, "is_cuda_available", None), bool):
            other.is_cuda_available = False
        if isinstance(getattr(other, "is_npu_available", None), bool):
            other.is_npu_available = True
    module.is_cuda_available = False
    module.is_npu_available = True


def _apply(module):
    if platform.torch_npu_error():
        return _guard(module)
    manager = sys.modules.get(_PLATFORM_MANAGER)
    detail = _pin_platform(manager) + "; " if manager is not None else ""
    _correct_flags(module)
    return detail + "is_cuda_available=False, is_npu_available=True"


PATCH = Patch(name=NAME, targets=(TARGET,), applies=_applies, apply=_apply, doc=__doc__)

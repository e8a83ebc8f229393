"""tensordict waits for the NPU even when vllm-ascend has left ``torch.cuda.Event`` a no-op.

Why: ``TensorDict.to("cpu")`` copies tensors non-blocking and then calls ``_sync_all`` so the host
    never reads a half-copied buffer. tensordict 0.10 (the newest verl 0.6-0.9 allow) waits for the
    NPU by itself: without ``torch_npu.contrib.transfer_to_npu`` its device probe answers ``npu``
    (torch_npu renames the privateuse1 backend) and it calls ``torch.npu.synchronize()``; with it,
    the probe answers ``cuda`` and ``torch.cuda.is_initialized``/``synchronize`` *are* the NPU's
    (transfer_to_npu aliases all of ``torch_npu.npu.__all__`` onto ``torch.cuda``). verl replaces
    ``_sync_all`` itself for tensordict < 0.10. The one real gap: tensordict >= 0.12 waits in its
    cuda branch through ``torch.cuda.Event().record(); .synchronize()`` (``_sync_cuda_transfer``),
    and vllm-ascend 0.12 to 0.23 leave ``torch.cuda.Event`` set to a placeholder whose ``record``
    and ``synchronize`` do nothing once an ``NPUModelRunner`` is built in the process (the
    ``finally`` of ``_torch_cuda_wrapper`` in ``vllm_ascend/worker/model_runner_v1.py``). With
    transfer_to_npu imported as well, tensordict's sync then waits for nothing: the host can read
    device-to-host copies before they land. This needs tensordict >= 0.12, outside verl's pin.
How: after ``import verl`` on an Ascend host, only when tensordict syncs through
    ``torch.cuda.Event`` (it has ``tensordict.base._sync_cuda_transfer``) and verl has not replaced
    ``_sync_all``: wrap ``TensorDictBase._sync_all`` so that, when the NPU is initialised in this
    process, it calls ``torch.npu.synchronize()`` once and returns; otherwise tensordict decides as
    before. Elsewhere "not applicable" says why. tensordict < 0.10 is logged as a warning.
Upstream: vllm-project/vllm-ascend PR 11709 (v0.24: the ``finally`` restores the NPU event);
    pytorch/tensordict ``_sync_cuda_transfer`` (0.12).
Remove when: supported vllm-ascend releases all restore ``torch.cuda.Event`` (>= 0.24), or verl's
    tensordict pin stays below 0.12.
"""

import logging
import sys

from verl_ascend.core import platform
from verl_ascend.core.marks import is_wrapped, unwrap, wrap
from verl_ascend.core.registry import Patch

NAME = "tensordict_sync"
TARGET = "verl"
# docs/field-reports.md#235b-reward-falls-after-step-50: rewards fell after ~50 steps with an older tensordict on A2.
KNOWN_BAD_BELOW = (0, 10, 0)
_EVENT_SYNC = "_sync_cuda_transfer"  # tensordict >= 0.12: the cuda branch waits on a torch.cuda.Event
ADVICE = "pip install tensordict==0.10.0 (docs/field-reports.md#235b-reward-falls-after-step-50)"
logger = logging.getLogger("verl_ascend")


def _version_tuple(text: str) -> tuple:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def tensordict_version() -> str:
    return platform.installed_version("tensordict")


def _warn_if_known_bad(version: str) -> str:
    if version and _version_tuple(version) < KNOWN_BAD_BELOW:
        message = f"tensordict {version} is known to corrupt NPU training data on A2; {ADVICE}"
        logger.warning(message)
        return f"; WARNING: {message}"
    return ""


def _base_class():
    try:
        from tensordict.base import TensorDictBase
    except Exception:
        return None
    return TensorDictBase


def _applies(module):
    if not platform.is_ascend_host():
        return platform.not_ascend_reason()
    version = tensordict_version()
    base = _base_class()
    if base is None:
        return "tensordict is not installed"
    current = getattr(base, "_sync_all", None)
    if current is None:
        return f"tensordict {version} has no TensorDictBase._sync_all; nothing to fix"
    if is_wrapped(current, NAME):
        return None
    if (getattr(current, "__module__", "") or "").split(".")[0] == "verl":
        return f"verl replaces _sync_all itself for tensordict {version}" + _warn_if_known_bad(version)
    if not _syncs_through_cuda_event():
        return (f"tensordict {version} synchronizes the NPU itself (torch.npu, or torch.cuda as aliased by "
                "transfer_to_npu); only tensordict >= 0.12 waits through torch.cuda.Event, which "
                "vllm-ascend 0.12-0.23 leave a no-op") + _warn_if_known_bad(version)
    return None


def _syncs_through_cuda_event() -> bool:
    base = sys.modules.get("tensordict.base")
    return callable(getattr(base, _EVENT_SYNC, None))


def _npu_first(original):
    def sync_all(self):
        import torch

        npu = getattr(torch, "npu", None)
        if npu is not None and npu.is_available() and npu.is_initialized():
            npu.synchronize()
            return None
        return original(self)

    return sync_all


def _apply(module):
    version = tensordict_version()
    wrap(_base_class(), "_sync_all", NAME, _npu_first)
    return (f"tensordict {version} waits through torch.cuda.Event: _sync_all synchronizes torch.npu once the NPU "
            "is in use" + _warn_if_known_bad(version))


def _revert() -> None:
    base = _base_class()
    if base is not None:
        unwrap(base, "_sync_all", NAME)


PATCH = Patch(name=NAME, targets=(TARGET,), applies=_applies, apply=_apply, doc=__doc__, revert=_revert)

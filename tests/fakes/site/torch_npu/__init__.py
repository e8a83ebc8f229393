"""TEST DOUBLE of torch_npu (Ascend's PyTorch extension). Never shipped; see tests/fakes/README.md.

Only what verl and verl-ascend touch: ``torch.npu`` with device queries, a recording
``synchronize`` and a stream double, so device selection and sync logic can run on a CPU machine;
``torch.save`` replaced by the double of torch_npu's save (``utils/serialization.py``).
"""

import os
import sys
import types

if os.environ.get("FAKE_TORCH_NPU_BROKEN") == "1":
    # What an Ascend host without `source set_env.sh` shows.
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory (fake torch_npu)")

import torch

__version__ = os.environ.get("FAKE_TORCH_NPU_VERSION", "2.7.1.post0+fake")

_count = int(os.environ.get("FAKE_NPU_COUNT", "8"))
_current = [0]
calls = []  # ("synchronize", device) ... recorded for tests


class _Stream:
    def __init__(self, device=None):
        self.device = device

    def synchronize(self):
        calls.append(("stream.synchronize", self.device))

    def wait_stream(self, other):
        calls.append(("stream.wait_stream", self.device))


def _set_device(index):
    index = int(str(index).split(":")[-1]) if not isinstance(index, int) else index
    if not 0 <= index < max(_count, 1):
        raise RuntimeError(f"fake torch_npu: invalid device {index}")
    _current[0] = index


def _synchronize(device=None):
    calls.append(("synchronize", device))


npu = types.ModuleType("torch.npu")
npu.is_available = lambda: _count > 0
npu.device_count = lambda: _count
npu.current_device = lambda: _current[0]
npu.set_device = _set_device
npu.synchronize = _synchronize
npu.current_stream = lambda device=None: _Stream(device)
npu.Stream = _Stream
npu.manual_seed = lambda seed: None
npu.manual_seed_all = lambda seed: None
npu.empty_cache = lambda: None
# FAKE_NPU_INITIALIZED=0: a process that has not touched the NPU yet (tests may flip `state`).
state = {"initialized": os.environ.get("FAKE_NPU_INITIALIZED", "1") != "0"}
npu.is_initialized = lambda: state["initialized"]
npu.get_device_name = lambda index=0: "Ascend910B2 (fake)"
npu.memory = types.SimpleNamespace(_set_allocator_settings=lambda settings: None)

torch.npu = npu
sys.modules["torch.npu"] = npu
sys.modules["torch_npu.npu"] = npu  # `torch_npu.npu.X` and `from torch_npu.npu import X`

# The real torch_npu replaces torch.save at import with its NPU-aware save (utils/serialization.py).
from .utils import serialization as _serialization  # noqa: E402

_serialization.add_serialization_methods()


class _Mstx:
    """Profiler range markers; verl imports `from torch_npu.npu import mstx` on NPU."""

    def range_start(self, message=None, stream=None):
        calls.append(("mstx.range_start", message))
        return len(calls)

    def range_end(self, range_id):
        calls.append(("mstx.range_end", range_id))

    def mstx_range(self, message=None):
        return lambda func: func


npu.mstx = _Mstx()
sys.modules["torch_npu.npu.mstx"] = npu.mstx


# CPU reference forms of the fused kernels verl imports by name on NPU (models/transformers/npu_patch).
def npu_rms_norm(x, gamma, epsilon=1e-6):
    variance = x.float().pow(2).mean(-1, keepdim=True)
    normed = (x.float() * torch.rsqrt(variance + epsilon)).to(x.dtype)
    return gamma * normed, torch.rsqrt(variance + epsilon)


def npu_rotary_mul(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def npu_swiglu(x, dim=-1):
    a, b = x.chunk(2, dim=dim)
    return torch.nn.functional.silu(a) * b


def __getattr__(name):
    # Other fused kernels are imported by name in verl and transformers; calling one here is a bug in
    # the test, so the stand-in fails loudly instead of computing something plausible.
    if name.startswith("npu_"):
        def missing(*args, **kwargs):
            raise NotImplementedError(f"fake torch_npu has no CPU form of {name}")

        missing.__name__ = name
        return missing
    raise AttributeError(name)

"""TEST DOUBLE of torch_npu (Ascend's PyTorch extension). Never shipped; see tests/fakes/README.md.

What verl and verl-ascend touch, modelled on the real torch_npu 2.13.0 (``tests/real_torch_npu.py``
fetches that wheel; ``tests/process/test_real_torch_npu.py`` compares this double with it):
- ``torch_npu/__init__.py``: sets ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` while it imports and puts the
  caller's value back in ``_autoload()`` (torch's ``torch.backends`` entry point, declared by the
  dist-info ``tests/subproc.py`` writes), so a failed import leaves the switch at 0;
- ``_init/registry/backend.py::register_privateuse1_backend``: renames the privateuse1 backend to
  ``npu`` and registers ``torch.npu``;
- ``_init/registry/registry_manager.py::_cann_package_check``: prints a warning to stdout when
  ``ASCEND_HOME_PATH`` is unset;
- ``torch_npu.npu``: offers every name of the real ``__all__`` (``_npu_names.py``); device queries,
  a recording ``synchronize``, streams and events work, the other names raise when called;
- the save path (``utils/serialization.py``);
- ``torch_npu.npu.memory._set_allocator_settings`` (recorded in ``calls``), absent with
  ``FAKE_TORCH_NPU_ALLOCATOR_SETTINGS=0`` as in the releases before it.
"""

import os
import sys
import types

# torch_npu/__init__.py: autoload off while torch_npu imports torch, restored by _autoload() at the end.
_ORG_AUTOLOAD = os.getenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

if os.environ.get("FAKE_TORCH_NPU_BROKEN") == "1":
    # What an Ascend host without `source set_env.sh` shows: the dynamic loader's message for
    # torch_npu/_C (2.13 reaches _C through utils -> npu before its own CANN hint can run).
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")

import torch  # noqa: E402  (after the broken-CANN simulation above, as the real import order)

from ._npu_names import NPU_ALL  # noqa: E402

__version__ = os.environ.get("FAKE_TORCH_NPU_VERSION", "2.13.0")

if "ASCEND_HOME_PATH" not in os.environ:  # registry_manager._cann_package_check prints to stdout
    print("Warning: ASCEND_HOME_PATH environment variable is not set.")

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
npu.memory = types.SimpleNamespace()
_ALLOCATOR_SETTINGS = os.environ.get("FAKE_TORCH_NPU_ALLOCATOR_SETTINGS", "1")


def _set_allocator_settings(settings):
    """torch_npu/npu/memory.py::_set_allocator_settings (2.6.0.post5, 2.7.1.post2, 2.8.0.post2, 2.9.0 and
    later): hands the string to the caching allocator. Recorded; FAKE_TORCH_NPU_ALLOCATOR_SETTINGS=raise
    models an allocator that refuses it."""
    calls.append(("_set_allocator_settings", settings))
    if _ALLOCATOR_SETTINGS == "raise":
        raise RuntimeError(f"fake torch_npu: allocator refused {settings!r}")


if _ALLOCATOR_SETTINGS != "0":  # =0: a release without the call (2.5.1.post1, 2.7.1, 2.8.0)
    npu.memory._set_allocator_settings = _set_allocator_settings



class _Event:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.recorded = False

    def record(self, stream=None):
        self.recorded = True
        calls.append(("event.record", None))

    def synchronize(self):
        calls.append(("event.synchronize", None))

    def wait(self, stream=None):
        calls.append(("event.wait", None))

    def query(self):
        return True


npu.Event = _Event


def _not_modelled(name):
    def missing(*args, **kwargs):
        raise NotImplementedError(f"fake torch_npu has no form of torch.npu.{name}")

    missing.__name__ = name
    return missing


for _name in NPU_ALL:  # the real module's public names, so transfer_to_npu aliases the same set
    if not hasattr(npu, _name):
        setattr(npu, _name, _not_modelled(_name))
npu.__all__ = list(NPU_ALL)

sys.modules["torch_npu.npu"] = npu  # `torch_npu.npu.X` and `from torch_npu.npu import X`
# _init/registry/backend.py::register_privateuse1_backend
torch.utils.rename_privateuse1_backend("npu")
torch._register_device_module("npu", npu)
# The real import also registers torch_npu's PrivateUse1 hooks from C++ (torch_npu/csrc/core/npu/NPUHooksInterface),
# after which torch names ``npu`` as the machine's accelerator (``dist.barrier``, ``Backend`` defaults and
# ``get_device_module()`` ask it); without hooks torch raises "Please register PrivateUse1HooksInterface".
# Python cannot register them, so the double answers that one question as the compiled part makes torch answer.
torch._C._get_accelerator = lambda check=False: torch.device("npu")

# The real torch_npu replaces torch.save at import with its NPU-aware save (utils/serialization.py).
from .utils import serialization as _serialization  # noqa: E402

_serialization._add_serialization_methods()


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


def _autoload():
    # torch_npu/__init__.py::_autoload: torch's backend entry point; child processes inherit the switch.
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = _ORG_AUTOLOAD


_autoload()  # as the real module does when `import torch_npu` comes first

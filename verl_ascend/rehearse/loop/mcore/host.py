"""CUDA device names and calls at megatron-core's and mbridge's named call sites -> the host.

megatron-core allocates its small bookkeeping tensors (TP gather buffers, grad buffers, the
pipeline's shape messages, the grad-norm scalar, the checkpoint status flag) with
``device=torch.cuda.current_device()`` or ``device="cuda"``, and waits with
``torch.cuda.synchronize()``. On torch's CPU build each of those raises. Instead of rewriting torch
for the whole process, every module on :data:`SITES` gets its own ``torch``: a stand-in that is the
real torch for every name except the tensor factories (a CUDA ``device=`` becomes ``cpu``) and
``torch.cuda`` (``current_device()`` names the CPU, ``synchronize()`` has nothing to wait for, and
its streams and events are the host's single stream: ``Stream()`` and ``current_stream()`` are one
object, waits and syncs return at once, because on a CPU the work is done when the call returns).
Code elsewhere in the process, verl's and torch's own included, still sees the real torch.

Two methods cannot be reached that way and are replaced on the classes: ``nn.Module.cuda`` and
``Tensor.cuda`` return the object unchanged. On a torch without CUDA both can only raise, so no
working caller changes behaviour.

``Tensor.type()`` is compared with ``'torch.cuda.FloatTensor'`` (and the half/bf16 names) in
megatron's optimizer set-up and grad clipping; :func:`cuda_type_names` makes a host tensor's type
name compare equal to its CUDA name, only while one of :data:`TYPE_CHECKS` runs.
"""

import contextlib
import functools
import threading
import types

from verl_ascend.core.marks import wrap

# Module -> why it is on the list (the call sites a CPU rehearsal reaches, megatron-core 0.13-0.16, mbridge 0.15).
SITES = {
    "megatron.core.tensor_parallel.layers": "weight allocation, async TP all-gather buffer",
    "megatron.core.tensor_parallel.mappings": "TP gather / reduce-scatter output buffers",
    "megatron.core.models.common.embeddings.rotary_pos_embedding": "RoPE inverse frequencies",
    "megatron.core.models.common.language_module.language_module": "tied embeddings across pipeline stages",
    "megatron.core.distributed.param_and_grad_buffer": "DDP param and grad buffers",
    "megatron.core.utils": "GlobalMemoryBuffer, local multi-tensor l2 norm",
    "megatron.core.pipeline_parallel.p2p_communication": "pipeline shape messages and receive buffers",
    "megatron.core.pipeline_parallel.schedules": "token counter of the forward/backward schedules",
    "megatron.core.optimizer.optimizer": "the optimizer's scale tensor",
    "megatron.core.optimizer.distrib_optimizer": "the distributed optimizer's load buffers",
    "megatron.core.optimizer.clip_grads": "grad-norm scalar",
    "megatron.core.dist_checkpointing.strategies.state_dict_saver": "the save's failure flag",
    "megatron.core.dist_checkpointing.strategies.filesystem_async": "synchronize before writing",
    "mbridge.core.util": "get_model moves the model to the current CUDA device",
    # MoE (a Qwen3-MoE recipe): the router's weights and aux-loss scalars, the experts' weights, the alltoall
    # dispatcher's device-to-host side stream (MoEAlltoAllTokenDispatcher.__init__ builds torch.cuda.Stream()),
    # the shared experts' overlap stream, the MoE metrics tracker
    "megatron.core.transformer.moe.router": "router weights moved to the current device, aux-loss scalars",
    "megatron.core.transformer.moe.experts": "expert weights allocated on the current device",
    "megatron.core.transformer.moe.token_dispatcher": "the alltoall dispatcher's device-to-host stream",
    "megatron.core.transformer.moe.moe_utils": "the dispatcher's host copies (record_stream), MoE metrics buffers",
    "megatron.core.transformer.moe.shared_experts": "the shared experts' overlap stream",
}
FACTORIES = ("zeros", "ones", "empty", "full", "tensor", "as_tensor", "arange", "rand", "randn", "randint",
             "randperm", "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "empty_strided")
# (module, qualified name) of the functions that compare Tensor.type() with 'torch.cuda.*' names.
TYPE_CHECKS = (
    ("megatron.core.optimizer.distrib_optimizer", "DistributedOptimizer._build_model_and_main_param_groups"),
    ("megatron.core.optimizer.distrib_optimizer", "DistributedOptimizer.__init__"),
    ("megatron.core.optimizer.optimizer", "Float16OptimizerWithFloat16Params.__init__"),
    ("megatron.core.optimizer.clip_grads", "clip_grad_by_total_norm_fp32"),
)


def is_cuda(device) -> bool:
    import torch

    if isinstance(device, str):
        return device.split(":", 1)[0] == "cuda"
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return False


def _host_factory(fn):
    @functools.wraps(fn)
    def factory(*args, **kwargs):
        if is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False  # pinning needs an accelerator
        return fn(*args, **kwargs)

    return factory


class _Forwarding(types.ModuleType):
    """A module whose missing names are the wrapped module's."""

    def __init__(self, name, real):
        super().__init__(name)
        object.__setattr__(self, "_real", real)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_real"), name)


_proxy = {}


class _HostEvent:
    """A CUDA event on the host: recorded work is already done."""

    def record(self, stream=None):
        return None

    def wait(self, stream=None):
        return None

    def synchronize(self):
        return None

    def query(self):
        return True


class _HostStream(_HostEvent):
    """The host's one stream (megatron compares the current stream with its side stream: they are equal, so it
    never calls ``record_stream`` on a host tensor)."""

    def wait_stream(self, stream):
        return None

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        return event or _HostEvent()


_HOST_STREAM = _HostStream()


def host_torch():
    """The ``torch`` the listed modules see (one per process)."""
    if "torch" not in _proxy:
        import torch

        cuda = _Forwarding("torch.cuda[host]", torch.cuda)
        cuda.current_device = lambda: "cpu"
        cuda.synchronize = lambda device=None: None
        cuda.Stream = lambda *args, **kwargs: _HOST_STREAM
        cuda.current_stream = lambda device=None: _HOST_STREAM
        cuda.default_stream = lambda device=None: _HOST_STREAM
        cuda.stream = lambda stream=None: contextlib.nullcontext()
        cuda.Event = lambda *args, **kwargs: _HostEvent()
        proxy = _Forwarding("torch[host]", torch)
        proxy.cuda = cuda
        for name in FACTORIES:
            if hasattr(torch, name):
                setattr(proxy, name, _host_factory(getattr(torch, name)))
        _proxy["torch"] = proxy
    return _proxy["torch"]


def give_host_torch(module) -> bool:
    """Point ``module``'s global ``torch`` at :func:`host_torch` (False when it has none)."""
    if not isinstance(getattr(module, "torch", None), types.ModuleType):
        return False
    module.torch = host_torch()
    return True


def no_op_cuda_methods() -> None:
    """``nn.Module.cuda`` / ``Tensor.cuda`` return self (on a torch without CUDA they can only raise)."""
    import torch

    wrap(torch.nn.Module, "cuda", "rehearse_mcore_cuda", lambda original: lambda self, device=None: self)
    wrap(torch.Tensor, "cuda", "rehearse_mcore_cuda",
         lambda original: lambda self, device=None, non_blocking=False, **kw: self)


# ---- Tensor.type() == 'torch.cuda.XTensor' inside the named checks ---------------------------------

_scope = threading.local()


class _CudaComparableName(str):
    """``'torch.BFloat16Tensor'`` that also equals ``'torch.cuda.BFloat16Tensor'``."""

    def __eq__(self, other):
        if isinstance(other, str) and other.startswith("torch.cuda."):
            return str.__eq__(self, "torch." + other[len("torch.cuda."):])
        return str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


def _install_type_alias() -> None:
    import torch

    def make(original):
        def type_(self, dtype=None, non_blocking=False, **kwargs):
            name = original(self, dtype, non_blocking, **kwargs) if (dtype is not None or kwargs) else original(self)
            if dtype is None and not kwargs and getattr(_scope, "depth", 0) and self.device.type == "cpu":
                return _CudaComparableName(name)
            return name

        return type_

    wrap(torch.Tensor, "type", "rehearse_mcore_optimizer", make)


@contextlib.contextmanager
def cuda_type_names():
    _scope.depth = getattr(_scope, "depth", 0) + 1
    try:
        yield
    finally:
        _scope.depth -= 1


def _scoped(func):
    def scoped(*args, **kwargs):
        with cuda_type_names():
            return func(*args, **kwargs)

    return scoped


def _scope_one(owner, attr) -> None:
    """Wrap ``owner.attr`` in the type-name scope (marks.wrap keeps a static/class method what it is)."""
    wrap(owner, attr, "rehearse_mcore_optimizer", _scoped)


def scope_type_checks(module) -> list:
    """Wrap this module's functions of :data:`TYPE_CHECKS`; returns the names wrapped."""
    _install_type_alias()
    done = []
    for module_name, qualname in TYPE_CHECKS:
        if module_name != module.__name__:
            continue
        owner = module
        *path, attr = qualname.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        if owner is None or not callable(getattr(owner, attr, None)):
            continue
        _scope_one(owner, attr)
        done.append(qualname)
    return done

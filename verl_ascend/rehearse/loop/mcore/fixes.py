"""The rehearsal's Megatron fixes other than device names (see :mod:`verl_ascend.rehearse.loop.mcore`).

Each function takes the module it adapts, changes as little of it as it can and returns the
detail line ``verl-ascend status`` shows.
"""

import functools
import re

from verl_ascend.core.marks import wrap

# ---- megatron.core.tensor_parallel.random: the "CUDA" RNG tracker on the host generator -------------


def host_rng_tracker(random) -> str:
    """megatron keeps one CUDA generator state per parallel region (``model-parallel-rng`` & co.) and
    forks into it around dropout and weight init. On a CPU-only host the device generator *is* the CPU
    generator: states are read and written with ``torch.get/set_rng_state``, so fork swaps states
    exactly as on CUDA. ``_set_cuda_rng_state`` must change too: the original only queues a lazy CUDA
    call, and the fork would then silently do nothing."""
    import torch

    def _get_cuda_rng_state(device="cuda", clone=False, graph_safe=False):
        return torch.get_rng_state()  # already a copy

    def _set_cuda_rng_state(new_state, device=-1, graph_safe=False):
        torch.set_rng_state(new_state)

    def make_add(original):
        def add(self, name, seed):
            # the original seeds a CUDA generator; same checks, same state bookkeeping, on the host
            if seed in self.seeds_:
                raise Exception(f"seed {seed} already exists")
            if name in self.states_:
                raise Exception(f"cuda rng state {name} already exists")
            self._is_initialized = True
            self.seeds_.add(seed)
            saved = torch.get_rng_state()
            torch.manual_seed(seed)
            self.states_[name] = torch.get_rng_state()
            torch.set_rng_state(saved)

        return add

    random._get_cuda_rng_state = _get_cuda_rng_state
    random._set_cuda_rng_state = _set_cuda_rng_state
    wrap(random.CudaRNGStatesTracker, "add", "rehearse_mcore_rng", make_add)
    return "CudaRNGStatesTracker keeps host generator states (add, fork)"


# ---- mbridge: the local layer spec instead of Transformer Engine's ----------------------------------


def local_layer_spec(llm_bridge) -> str:
    """mbridge builds every model with ``use_transformer_engine=True``; TE does not exist on CPU (nor
    on Ascend, where MindSpeed replaces it). The converter's local spec picks megatron's own modules
    (unfused ``DotProductAttention``, torch RMSNorm): other kernels, the same math, and the same
    dist-checkpoint keys (the local spec maps its norm names to TE's)."""
    from verl_ascend.convert.model import _local_layer_spec

    def make(original):
        def _get_transformer_layer_spec(self, vp_stage=None):
            return _local_layer_spec(self, vp_stage)

        return _get_transformer_layer_spec

    wrap(llm_bridge.LLMBridge, "_get_transformer_layer_spec", "rehearse_mcore_spec", make)
    return "LLMBridge builds megatron's local layer spec (no Transformer Engine)"


def local_norm_names(bridge) -> str:
    """mbridge's HF name tables know only TE's fused norm names (``linear_qkv.layer_norm_weight``);
    the local spec's modules are ``input_layernorm`` / ``pre_mlp_layernorm``. An unknown name is retried
    under its TE name, the tensor it stands for (HF load, export to the rollout, HF save)."""

    def make(original):
        def _weight_name_mapping_mcore_to_hf(self, name):
            try:
                return original(self, name)
            except NotImplementedError:
                alt = name.replace(".input_layernorm.", ".self_attention.linear_qkv.layer_norm_")
                alt = alt.replace(".pre_mlp_layernorm.", ".mlp.linear_fc1.layer_norm_")
                if alt == name:
                    raise
                return original(self, alt)

        return _weight_name_mapping_mcore_to_hf

    wrap(bridge.Bridge, "_weight_name_mapping_mcore_to_hf", "rehearse_mcore_spec", make)
    wrap(bridge.Bridge, "_weight_name_mapping_mcore_local_to_global", "rehearse_mcore_spec", _expert_names)
    wrap(bridge.Bridge, "load_weights", "rehearse_mcore_spec", _load_with_expert_names)
    return "Bridge maps the local spec's norm names through TE's, and SequentialMLP's expert names through TEGroupedMLP's"


_SEQUENTIAL_EXPERT = re.compile(r"\.mlp\.experts\.local_experts\.(\d+)\.(linear_fc[12])\.weight$")


class _ExpertNamedModel:
    """A model chunk whose ``state_dict()`` names SequentialMLP's experts as TEGroupedMLP does (same tensors);
    every other attribute is the chunk's."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        return getattr(self._model, name)

    def state_dict(self, *args, **kwargs):
        out = {}
        for name, tensor in self._model.state_dict(*args, **kwargs).items():
            match = _SEQUENTIAL_EXPERT.search(name)
            out[f"{name[:match.start()]}.mlp.experts.{match.group(2)}.weight{match.group(1)}" if match else name] = tensor
        return out


def _load_with_expert_names(original):
    """mbridge's HF ``load_weights`` tells experts by TEGroupedMLP's names: SequentialMLP's experts were read on
    TP rank 0 only and scattered over TP as if TP-split (a TP2 EP2 MoE rehearsal loading HF weights:
    ``ProcessGroupGloo::scatter: invalid tensor size ... expected (64, 64), got (32, 64)``), though each EP rank
    holds other experts, whole (ETP1). Handed chunks whose state dict names the same tensors TEGroupedMLP's way,
    it reads each rank's own experts over the expert-TP group, as it does for TE's spec."""

    def load_weights(self, models, *args, **kwargs):
        has_sequential = any(_SEQUENTIAL_EXPERT.search(name) for model in models for name in model.state_dict())
        if not has_sequential:
            return original(self, models, *args, **kwargs)
        from mbridge.core.util import unwrap_model

        return original(self, [_ExpertNamedModel(unwrap_model(model)) for model in models], *args, **kwargs)

    return load_weights


def _expert_names(original):
    """The local spec's MoE experts are a ``SequentialMLP`` (``mlp.experts.local_experts.<i>.linear_fc1.weight``);
    mbridge knows TEGroupedMLP's names only (``mlp.experts.linear_fc1.weight<i>``), and its weight export finds
    the experts to all-gather over expert parallel by that name: the SequentialMLP name raised ``Unsupported
    parameter name`` at the first weight sync to the rollout. The two hold the same tensor per expert (megatron's
    experts.py says their checkpoints are interchangeable), so the local-to-global name map gives TEGroupedMLP's
    name, with the global expert number where the caller asks for it (``consider_ep``), as it does for TE's."""

    def _weight_name_mapping_mcore_local_to_global(self, model, consider_ep=True):
        names = original(self, model, consider_ep=consider_ep)
        ep_size, ep_rank = getattr(self.mpu, "ep_size", 1) or 1, getattr(self.mpu, "ep_rank", 0) or 0
        per_rank = (self.config.num_moe_experts or 0) // ep_size
        for local, name in names.items():
            match = _SEQUENTIAL_EXPERT.search(name)
            if match:
                expert = int(match.group(1)) + (per_rank * ep_rank if consider_ep and ep_size > 1 else 0)
                names[local] = f"{name[:match.start()]}.mlp.experts.{match.group(2)}.weight{expert}"
        return names

    return _weight_name_mapping_mcore_local_to_global


# ---- megatron local attention: verl's [b, s] padding mask ---------------------------------------------


def causal_padding_mask(dot_product_attention) -> str:
    """verl's padded (bshd) Megatron forward hands attention the ``[b, s]`` validity mask (True = a
    token); TE's causal kernel ignores it. Megatron's local attention needs ``[b, 1, sq, sk]`` with
    True = masked: causal plus padded keys, which is what TE computes for the real tokens."""
    import torch

    def make(original):
        def forward(self, query, key, value, attention_mask, *args, **kwargs):
            if attention_mask is not None and attention_mask.dim() == 2:
                sq, sk = query.size(0), key.size(0)
                causal = torch.ones(sq, sk, dtype=torch.bool, device=query.device).triu(1)
                attention_mask = causal[None, None] | ~attention_mask.bool()[:, None, None, :sk]
            return original(self, query, key, value, attention_mask, *args, **kwargs)

        return forward

    wrap(dot_product_attention.DotProductAttention, "forward", "rehearse_mcore_attention", make)
    return "DotProductAttention turns a [b, s] padding mask into the causal [b, 1, sq, sk] mask"


# ---- megatron DistributedOptimizer on torch Adam: the load template ----------------------------------


def optimizer_load_template(distrib_optimizer) -> str:
    """Without Apex/TE megatron runs torch's Adam and reads the iteration from Adam's per-param
    ``step`` in ``state_dict()``. verl builds the load template from a fresh optimizer, which has no
    state yet: ``assert len(steps) == 1`` fails on resume. While ``state_dict()`` runs on an optimizer
    with no state, each param gets ``step = 0`` (removed right after): the checkpoint's values replace
    the template's, and torch's ``load_state_dict`` rebuilds the state itself."""
    if getattr(distrib_optimizer, "HAVE_APEX_OR_TE", True):
        return "Apex/TE optimizer present: nothing to do"
    import torch

    def make(original):
        def state_dict(self):
            inner = self.optimizer
            if len(getattr(inner, "state", {}) or {}):
                return original(self)
            params = [p for group in inner.param_groups for p in group["params"]]
            for param in params:
                inner.state[param]["step"] = torch.tensor(0.0)
            try:
                return original(self)
            finally:
                for param in params:
                    inner.state.pop(param, None)

        return state_dict

    wrap(distrib_optimizer.DistributedOptimizer, "state_dict", "rehearse_mcore_optimizer", make)
    return "DistributedOptimizer.state_dict() builds the resume template on a fresh torch Adam"


# ---- megatron torch norm under sequence parallelism ----------------------------------------------------


def norm_with_sequence_parallel(torch_norm) -> str:
    """The local spec's norm (``WrappedTorchNorm``) refuses ``sequence_parallel``, verl's default at
    TP > 1. The norm itself computes the same per token; what SP needs from it is that its weight
    grads are all-reduced over TP, which megatron does for every param marked ``sequence_parallel``
    (TE's and Apex's norms mark theirs). So it is built with the flag hidden, then marked."""
    cls = torch_norm.WrappedTorchNorm

    def make(original):
        @functools.wraps(original)
        def __new__(klass, config, *args, **kwargs):
            if not getattr(config, "sequence_parallel", False):
                return original(klass, config, *args, **kwargs)
            config.sequence_parallel = False
            try:
                norm = original(klass, config, *args, **kwargs)
            finally:
                config.sequence_parallel = True
            for param in norm.parameters():
                param.sequence_parallel = True
            return norm

        return __new__


    wrap(cls, "__new__", "rehearse_mcore_norm", make)  # __new__ is a staticmethod in the class dict: it stays one
    return "WrappedTorchNorm accepts sequence_parallel (its params marked for the TP grad all-reduce)"


# ---- megatron MoE router without Transformer Engine ---------------------------------------------------


def moe_without_te(module) -> str:
    """The two MoE fixes, by target: moe_utils (the router GEMM, the host copies), token_dispatcher (its own
    binding of the host-copy helper)."""
    if module.__name__.endswith("token_dispatcher"):
        from megatron.core.transformer.moe import moe_utils

        host_split_sizes(moe_utils)  # whichever module's hook runs first: wrap does it once
        module.maybe_move_tensor_to_cpu = moe_utils.maybe_move_tensor_to_cpu
        return "the alltoall dispatcher's split sizes reach all_to_all_single as numpy, as from a device"
    return f"{router_gemm_without_te(module)}; {host_split_sizes(module)}"


def host_split_sizes(moe_utils) -> str:
    """The alltoall dispatcher copies its split sizes to the host with ``maybe_move_tensor_to_cpu(...,
    as_numpy=True)``: a CUDA tensor comes back as a numpy array, which ``all_to_all_single`` takes; a host
    tensor comes back unchanged, a torch tensor, which it refuses (``TypeError: all_to_all_single():
    incompatible function arguments ... tensor([450, 443])``, a 235B rehearsal's first ``compute_log_prob``).
    On the host the copy is the tensor itself: as_numpy gives its numpy view, as the device path does."""

    def make(original):
        def maybe_move_tensor_to_cpu(tensor, as_numpy=False, record_stream=False):
            import torch

            if as_numpy and torch.is_tensor(tensor) and tensor.device.type == "cpu":
                return tensor.numpy()
            return original(tensor, as_numpy=as_numpy, record_stream=record_stream)

        return maybe_move_tensor_to_cpu

    wrap(moe_utils, "maybe_move_tensor_to_cpu", "rehearse_mcore_moe", make)
    return "maybe_move_tensor_to_cpu(as_numpy=True) of a host tensor gives numpy, as from a device"


def router_gemm_without_te(moe_utils) -> str:
    """megatron-core 0.16.1 imports ``te_general_gemm`` from Transformer Engine in ``moe_utils.py`` and, when
    TE is absent, defines no name at all; ``RouterGatingLinearFunction`` then tests ``te_general_gemm is not
    None`` and raises ``NameError: name 'te_general_gemm' is not defined`` at the first MoE forward (seen in
    a 235B rehearsal's first ``compute_log_prob``). Every other TE helper of that module is guarded by
    ``HAVE_TE``. Defining it as None, what the check expects without TE, takes the function's own torch
    ``mm`` path: same router logits."""
    if hasattr(moe_utils, "te_general_gemm"):
        return "te_general_gemm defined (Transformer Engine present): nothing to do"
    moe_utils.te_general_gemm = None
    return "te_general_gemm = None without Transformer Engine: the router's gating GEMM takes its torch path"

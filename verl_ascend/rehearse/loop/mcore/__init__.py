"""Rehearsal-only fixes that let verl's Megatron engine train on a CPU-only host, over gloo.

Why: a shipped recipe runs ``ppo_megatron_trainer``: verl's ``MegatronEngineWithLMHead`` (verl's
``MindspeedEngine`` where MindSpeed is importable), megatron-core, mbridge. megatron-core assumes
CUDA in a handful of places that have nothing to do with the training math (device names of small
buffers, the CUDA RNG tracker, Transformer Engine as the layer spec, ``'torch.cuda.*'`` type
names), and two of its CPU fallbacks have bugs a CPU run exposes (the torch-Adam resume template;
the torch norm refusing sequence parallelism). Each was found by running verl 0.9.1's Megatron path
inside ``main_ppo`` on CPU with the fix off; the error each one prevents is in its function's
docstring and in docs/rehearse.md.
How: seven records, shown by ``verl-ascend status`` like the patches, that act only in a process
with ``VERL_ASCEND_REHEARSE=1`` on a torch without CUDA; elsewhere each says why not and changes
nothing. Each adapts the named functions of the module it targets (a narrow patch of those call
sites, never a process-wide rewrite of torch):
    rehearse_mcore_cuda       megatron/mbridge call sites   CUDA device names/calls -> host (host.py)
    rehearse_mcore_rng        tensor_parallel/random.py     RNG tracker on the host generator
    rehearse_mcore_spec       mbridge core/llm_bridge.py,   local layer spec (a kernel choice), its norm
                              core/bridge.py                names and its SequentialMLP expert names in
                                                            mbridge's HF name tables
    rehearse_mcore_attention  transformer/dot_product_attention.py  verl's [b, s] mask -> causal mask
    rehearse_mcore_optimizer  optimizer/distrib_optimizer.py, optimizer.py, clip_grads.py
                                                            resume template on torch Adam; type names
    rehearse_mcore_norm       transformer/torch_norm.py     sequence parallel on the torch norm
    rehearse_mcore_moe        transformer/moe/moe_utils.py, the router GEMM's missing no-TE name; the
                              token_dispatcher.py           alltoall split sizes as numpy from the host
What the rehearsal sets instead of patching (a config key exists): never the bridge (the recipe's
``vanilla_mbridge`` choice is run as it is, or the rehearsal exits 2 naming the missing package:
``plan/engine.check_bridge``), ``use_remove_padding=False`` (local attention has no packed-sequence path),
``override_transformer_config.masked_softmax_fusion=False`` (its CUDA kernel is picked for some
shapes only, so a 1-step run could pass by luck), for MoE models ``persist_layer_norm``,
``moe_grouped_gemm``, ``bias_activation_fusion``, ``bias_dropout_fusion`` = False (mbridge turns on
kernels a CPU lacks; plan/overrides.MOE_KERNELS), ``TORCHDYNAMO_DISABLE=1`` (inductor compiles
verl's entropy helper for ~40 CPU-s per process).
Upstream: none; megatron-core has no CPU training path. The three fallback bugs are megatron-core's
``moe_utils.te_general_gemm`` left undefined without TE (any TE-less MoE run of 0.16.1 hits it),
``DistributedOptimizer.state_dict`` (``assert len(steps) == 1`` on a fresh torch Adam) and
``WrappedTorchNorm.__new__`` (sequence parallel refused although only the grad reduction differs).
Remove when: megatron-core runs on CPU (or the rehearsal stops running Megatron).
"""

from verl_ascend.core.registry import Patch
from verl_ascend.rehearse.loop.runtime import NOT_REHEARSAL, in_rehearsal

from . import fixes, host


def _gate(probe):
    def applies(module):
        if not in_rehearsal():
            return NOT_REHEARSAL
        import torch

        if torch.cuda.is_available():
            return "torch has CUDA here: megatron-core runs as it is"
        return probe(module)

    return applies


def _has(*attrs):
    def probe(module):
        for attr in attrs:
            owner = module
            for part in attr.split("."):
                owner = getattr(owner, part, None)
            if owner is None:
                return f"{module.__name__} has no {attr} (another megatron-core/mbridge than this fix knows)"
        return None

    return probe


def _cuda_apply(module):
    host.no_op_cuda_methods()
    if not host.give_host_torch(module):
        return f"{module.__name__} has no module-level torch: nothing to redirect"
    return f"torch.cuda device names and calls -> host ({host.SITES[module.__name__]})"


def _spec_apply(module):
    if module.__name__.endswith("llm_bridge"):
        return fixes.local_layer_spec(module)
    return fixes.local_norm_names(module)


def _optimizer_apply(module):
    parts = []
    if hasattr(module, "DistributedOptimizer"):
        parts.append(fixes.optimizer_load_template(module))
    scoped = host.scope_type_checks(module)
    if scoped:
        parts.append(f"Tensor.type() matches 'torch.cuda.*' names inside {', '.join(scoped)}")
    return "; ".join(parts)


_MOE_MODULES = ("megatron.core.transformer.moe.moe_utils", "megatron.core.transformer.moe.token_dispatcher")
_OPTIMIZER_MODULES = ("megatron.core.optimizer.distrib_optimizer", "megatron.core.optimizer.optimizer",
                      "megatron.core.optimizer.clip_grads")

PATCHES = (
    Patch(name="rehearse_mcore_cuda", targets=tuple(host.SITES), applies=_gate(lambda m: None), apply=_cuda_apply,
          doc=__doc__, summary="rehearsal only: megatron-core/mbridge CUDA device names and calls -> host"),
    Patch(name="rehearse_mcore_rng", targets=("megatron.core.tensor_parallel.random",),
          applies=_gate(_has("CudaRNGStatesTracker.add", "_get_cuda_rng_state", "_set_cuda_rng_state")),
          apply=fixes.host_rng_tracker, doc=__doc__, summary="rehearsal only: megatron's CUDA RNG tracker on the host"),
    Patch(name="rehearse_mcore_spec", targets=("mbridge.core.llm_bridge", "mbridge.core.bridge"),
          applies=_gate(lambda m: _has("LLMBridge._get_transformer_layer_spec")(m) if m.__name__.endswith("llm_bridge")
                        else _has("Bridge._weight_name_mapping_mcore_to_hf",
                                  "Bridge._weight_name_mapping_mcore_local_to_global", "Bridge.load_weights")(m)),
          apply=_spec_apply, doc=__doc__, summary="rehearsal only: megatron's local layer spec instead of TE"),
    Patch(name="rehearse_mcore_attention", targets=("megatron.core.transformer.dot_product_attention",),
          applies=_gate(_has("DotProductAttention.forward")), apply=fixes.causal_padding_mask, doc=__doc__,
          summary="rehearsal only: verl's padding mask for megatron's local attention"),
    Patch(name="rehearse_mcore_optimizer", targets=_OPTIMIZER_MODULES, applies=_gate(lambda m: None),
          apply=_optimizer_apply, doc=__doc__,
          summary="rehearsal only: megatron's optimizer on torch Adam (resume template, type names)"),
    Patch(name="rehearse_mcore_moe", targets=_MOE_MODULES,
          applies=_gate(lambda m: _has("RouterGatingLinearFunction", "maybe_move_tensor_to_cpu")(m)
                        if m.__name__.endswith("moe_utils") else _has("maybe_move_tensor_to_cpu")(m)),
          apply=fixes.moe_without_te, doc=__doc__,
          summary="rehearsal only: megatron's MoE router GEMM without Transformer Engine"),
    Patch(name="rehearse_mcore_norm", targets=("megatron.core.transformer.torch_norm",),
          applies=_gate(_has("WrappedTorchNorm")), apply=fixes.norm_with_sequence_parallel, doc=__doc__,
          summary="rehearsal only: megatron's torch norm under sequence parallelism"),
)

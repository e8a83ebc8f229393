"""The Megatron side: build this rank's GPT model with mbridge, and name each local tensor.

mbridge owns the model knowledge (TransformerConfig from the HF config, HF <-> Megatron tensor
names, the QKV / gate-up layouts and their TP splits). We add what a CPU or Ascend conversion
needs and mbridge does not do: the local (non Transformer-Engine) layer spec, CPU initialisation,
and a checkpoint layout identical to the one the TE spec writes, so verl loads it unchanged.
"""

import re
import types

import torch

from .hf_source import HFCheckpoint

DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
          "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}

_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")
_LOCAL_EXPERT = re.compile(r"\.mlp\.experts\.local_experts\.(\d+)\.(linear_fc[12])\.weight$")


def make_bridge(ckpt: HFCheckpoint, dtype: torch.dtype):
    from mbridge import AutoBridge
    from transformers import AutoConfig

    hf_config = AutoConfig.from_pretrained(ckpt.path)
    if not hasattr(hf_config, "rope_theta"):  # transformers 5 keeps it in rope_parameters only
        hf_config.rope_theta = (getattr(hf_config, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    bridge = AutoBridge.from_config(hf_config, dtype=dtype)
    # mbridge records tied embeddings by editing its class-level name table, which Qwen3 and
    # Qwen3-MoE share with Qwen2: after one tied model, every later bridge in the process would map
    # output_layer to the embeddings. Give this bridge its own, correct table.
    tied = bool(getattr(hf_config, "tie_word_embeddings", False))
    bridge._DIRECT_MAPPING = {**bridge._DIRECT_MAPPING,
                              "output_layer.weight": "model.embed_tokens.weight" if tied else "lm_head.weight"}
    bridge.set_extra_args(
        use_cpu_initialization=True,
        # SequentialMLP: its checkpoint layout is interchangeable with TEGroupedMLP's (megatron says
        # so in experts.py), and unlike GroupedMLP it needs no grouped_gemm kernels on CPU/NPU.
        moe_grouped_gemm=False,
        # The alltoall dispatcher needs CUDA-only permute kernels; allgather runs anywhere. The
        # dispatcher is not stored in the checkpoint, so training may use any.
        moe_token_dispatcher_type="allgather", variable_seq_lengths=False,
        # Fused kernels exist only with CUDA/apex; they do not change the weights.
        persist_layer_norm=False, bias_activation_fusion=False, bias_dropout_fusion=False,
        masked_softmax_fusion=False, gradient_accumulation_fusion=False,
        sequence_parallel=False,
    )
    if ckpt.model_type == "qwen3_moe" and not getattr(hf_config, "norm_topk_prob", True):
        # mbridge assumes norm_topk_prob=true (top-k softmax). Without it HF takes the top-k of a
        # softmax over all experts, which is megatron's pre-softmax routing. Weights are the same
        # either way; this keeps --verify's forward pass faithful to the HF model.
        bridge.set_extra_args(moe_router_pre_softmax=True)
    bridge._get_transformer_layer_spec = types.MethodType(_local_layer_spec, bridge)
    return bridge


def _local_layer_spec(bridge, vp_stage=None):
    """mbridge asks for the TE spec; TE does not exist on CPU or Ascend, so use megatron's own modules.

    The local spec maps ``pre_mlp_layernorm`` to ``mlp.linear_fc1.layer_norm_*`` in the checkpoint,
    which is right for dense layers (TE fuses that norm into fc1) but wrong for MoE layers, where TE
    keeps a separate ``pre_mlp_layernorm``. Dropping that entry for MoE layers makes the checkpoint
    keys the ones the TE spec writes and verl reads.
    """
    import copy
    import inspect

    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

    # a virtual pipeline stage (the rehearsal's VPP; the converter builds none) reaches the spec, as in mbridge's
    bridge.has_vp_stage = "vp_stage" in inspect.signature(get_gpt_decoder_block_spec).parameters
    extra = {"vp_stage": vp_stage} if bridge.has_vp_stage else {}
    spec = get_gpt_decoder_block_spec(bridge.config, use_transformer_engine=False, normalization="RMSNorm", **extra)
    fixed = []
    for layer_spec in spec.layer_specs:
        keys_map = getattr(layer_spec.submodules, "sharded_state_dict_keys_map", None) or {}
        if _is_moe_spec(layer_spec) and "pre_mlp_layernorm." in keys_map:
            layer_spec = copy.deepcopy(layer_spec)
            layer_spec.submodules.sharded_state_dict_keys_map = {
                k: v for k, v in keys_map.items() if k != "pre_mlp_layernorm."}
        fixed.append(layer_spec)
    spec.layer_specs = fixed
    return spec


def _is_moe_spec(layer_spec) -> bool:
    from megatron.core.transformer.moe.moe_layer import MoELayer

    mlp = layer_spec.submodules.mlp
    return getattr(mlp, "module", None) is MoELayer


def build_model(bridge):
    """This rank's model chunk (no virtual pipeline), parameters in host memory, weights random."""
    from megatron.core import parallel_state as mpu
    from megatron.core import tensor_parallel

    provider = bridge._model_provider([])
    model = provider(pre_process=mpu.is_pipeline_first_stage(), post_process=mpu.is_pipeline_last_stage())
    for param in model.parameters():
        tensor_parallel.set_defaults_if_not_set_tensor_model_parallel_attributes(param)
    model.requires_grad_(False)
    # Megatron's torch norms are created in float32; training wraps the model in Float16Module,
    # which casts every tensor to the training dtype. Store what training holds.
    return model.to(bridge.dtype)


def build_empty_model(bridge):
    """Like build_model, but skips the random initialisation (all weights are overwritten anyway):
    built on the meta device, then given uninitialised host memory."""
    with torch.device("meta"):
        model = build_model(bridge)
    # to_empty replaces meta parameters by new ones, dropping megatron's attributes on them
    # (tensor_model_parallel, partition_dim, ...); put them back.
    attrs = {name: dict(p.__dict__) for name, p in model.named_parameters()}
    model.to_empty(device="cpu")
    for name, p in model.named_parameters():
        p.__dict__.update(attrs[name])
    return model


def tensor_names(model, bridge) -> list:
    """[(local state-dict name, mbridge global name)] for every tensor the checkpoint holds.

    The mbridge name is the one mbridge's HF mapping expects: TE module names, global layer
    numbers (pipeline offset applied) and global expert numbers (``linear_fc1.weight<E>``).
    """
    from megatron.core import parallel_state as mpu

    offsets = {i: layer.layer_number - 1 for i, layer in enumerate(model.decoder.layers)}
    moe_layers = {i for i, layer in enumerate(model.decoder.layers) if hasattr(layer.mlp, "router")}
    num_local = None
    if bridge.config.num_moe_experts:
        num_local = bridge.config.num_moe_experts // mpu.get_expert_model_parallel_world_size()
    first_expert = (num_local or 0) * mpu.get_expert_model_parallel_rank()
    out = []
    for local in model.state_dict():
        if local.endswith("_extra_state"):
            continue
        name = local
        match = _LAYER.match(local)
        if match:
            idx = int(match.group(1))
            rest = local[match.end():]
            if rest.startswith("input_layernorm."):
                rest = rest.replace("input_layernorm.", "self_attention.linear_qkv.layer_norm_", 1)
            elif rest.startswith("pre_mlp_layernorm.") and idx not in moe_layers:
                rest = rest.replace("pre_mlp_layernorm.", "mlp.linear_fc1.layer_norm_", 1)
            name = f"decoder.layers.{offsets[idx]}.{rest}"
            expert = _LOCAL_EXPERT.search(name)
            if expert:
                global_id = first_expert + int(expert.group(1))
                name = name[: expert.start()] + f".mlp.experts.{expert.group(2)}.weight{global_id}"
        out.append((local, name))
    return out


def is_expert(name: str) -> bool:
    return ".mlp.experts.linear_fc" in name

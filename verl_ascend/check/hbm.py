"""HBM estimate per rank (an A2/A5 card, an A3 die; see :mod:`.profiles`), for the training phase
and the rollout phase.

A planning estimate, not a measurement: bf16 weights (2 B/param), fp32 main gradients (4 B/param,
Megatron's default for bf16), Adam with fp32 master weights and moments (12 B/param) sharded by the
distributed optimizer over data-parallel ranks, activations after Korthikanti et al. (34·s·h bytes
per layer and token, divided by TP under sequence parallel; a checkpoint of s·h·2 B per layer with
full recompute), fp32 logits for the log-prob, and a fixed runtime reserve for HCCL buffers and the
CANN workspace. Rollout: vLLM(-ascend) takes gpu_memory_utilization of the card for its weights and
KV cache, next to whatever training state is not offloaded.
"""

import math

from verl_ascend.core.findings import ERROR, INFO, WARNING, finding
from verl_ascend.recipe.layout import ARR, get, get_float, get_int, rollout_layout, train_layout

GB = 1e9
RUNTIME_RESERVE_GB = 3.0  # HCCL buffers, CANN workspace, allocator fragmentation headroom
ENGINE_WORKSPACE_GB = 1.0  # vLLM activations / graph workspace inside its budget


def _params_per_card(facts, tp, pp, ep, etp):
    return facts.dense_params() / (tp * pp) + (facts.expert_params() / (ep * etp * pp) if facts.is_moe else 0)


def _training(ctx, lay):
    cfg, facts, world = ctx.cfg, ctx.facts, ctx.world
    dense = facts.dense_params() / (lay.tp * lay.pp)
    expert = facts.expert_params() / (lay.ep * lay.etp * lay.pp) if facts.is_moe else 0.0
    dense_dp = max(1, world // (lay.tp * lay.pp))  # the distributed optimizer shards over DP x CP
    expert_dp = max(1, world // (lay.ep * lay.etp * lay.pp))
    weights = 2 * (dense + expert)
    grads = 4 * (dense + expert)
    optimizer = 12 * (dense / dense_dp + expert / expert_dp)
    seq = get_int(cfg, "data.max_prompt_length", 0) + get_int(cfg, "data.max_response_length", 0)
    if get(cfg, f"{ARR}.actor.use_dynamic_bsz", False):
        tokens = get_int(cfg, f"{ARR}.actor.ppo_max_token_len_per_gpu", seq)
    else:
        tokens = (get_int(cfg, f"{ARR}.actor.ppo_micro_batch_size_per_gpu", 1) or 1) * seq
    tokens = tokens / lay.cp
    layers = math.ceil(facts.num_layers / lay.pp) if lay.first_stage_layers is None else max(
        lay.first_stage_layers, lay.last_stage_layers or 0, math.ceil(facts.num_layers / lay.pp))
    otc = get(cfg, f"{ARR}.actor.megatron.override_transformer_config", {}) or {}
    full_layer = 34 * tokens * facts.hidden_size / lay.tp
    if otc.get("recompute_granularity") == "full":
        per_micro = layers * 2 * tokens * facts.hidden_size / lay.tp + full_layer
    else:
        per_micro = layers * full_layer
    in_flight = min(lay.pp, 8) if lay.pp > 1 else 1  # 1F1B keeps up to PP micro-batches on stage 0
    logits = 4 * tokens * facts.vocab_size / lay.tp
    activations = per_micro * in_flight + logits
    ref_weights = 0.0
    if ctx.use_ref and not get(cfg, f"{ARR}.ref.megatron.param_offload", False):
        ref = train_layout(cfg, "ref")
        ref_weights = 2 * _params_per_card(facts, ref.tp, ref.pp, ref.ep, ref.etp)
    parts = {"weights": weights, "grads": grads, "optimizer": optimizer, "activations": activations,
             "ref weights": ref_weights, "runtime": RUNTIME_RESERVE_GB * GB}
    return parts, {"weights": weights, "grads": grads, "optimizer": optimizer}


def _fmt(parts) -> str:
    return ", ".join(f"{k} {v / GB:.1f}" for k, v in parts.items() if v) + " GB"


def estimate(ctx) -> list:
    facts, cfg = ctx.facts, ctx.cfg
    if not facts:
        return []
    out = []
    rank_gb, per = ctx.profile.rank_gb, f"per {ctx.profile.rank_word}"
    lay = train_layout(cfg, "actor")
    if lay.is_megatron and lay.dp(ctx.world):  # an invalid layout is the parallel rule's finding
        parts, state = _training(ctx, lay)
        total = sum(parts.values()) / GB
        keys = (f"{ARR}.actor.ppo_micro_batch_size_per_gpu", lay.key("tensor_model_parallel_size"),
                lay.key("pipeline_model_parallel_size")) + ((lay.key("expert_model_parallel_size"),) if facts.is_moe else ())
        msg = f"training phase ~{total:.1f} of {rank_gb:.0f} GB {per} ({_fmt(parts)})"
        fix = ("raise TP/PP/EP, lower ppo_micro_batch_size_per_gpu, or enable full recompute "
               f"(+{lay.otc_key('recompute_granularity')}=full with recompute_method=uniform)")
        if total > rank_gb:
            out.append(finding("hbm", ERROR, keys, msg + ": does not fit", fix))
        elif total > 0.9 * rank_gb:
            out.append(finding("hbm", WARNING, keys, msg + ": under 10% headroom", fix))
        else:
            out.append(finding("hbm", INFO, (), msg))
        m = f"{ARR}.actor.megatron"
        param_off = bool(get(cfg, f"{m}.param_offload", False))
        # verl >= 0.8 has no grad_offload key: gradients move with the parameters
        grad_off = bool(get(cfg, f"{m}.grad_offload", param_off))
        resident = {"actor weights": 0 if param_off else state["weights"],
                    "actor grads": 0 if grad_off else state["grads"],
                    "optimizer": 0 if get(cfg, f"{m}.optimizer_offload", False) else state["optimizer"],
                    "ref weights": parts["ref weights"]}
    else:
        resident = {}
    ro = rollout_layout(cfg)
    util = get_float(cfg, f"{ARR}.rollout.gpu_memory_utilization", 0.5)
    engine = util * rank_gb * GB
    rollout_parts = dict(resident, **{"vLLM (gpu_memory_utilization)": engine, "runtime": RUNTIME_RESERVE_GB * GB})
    total = sum(rollout_parts.values()) / GB
    rkeys = (f"{ARR}.rollout.gpu_memory_utilization", f"{ARR}.actor.megatron.param_offload",
             f"{ARR}.actor.megatron.optimizer_offload")
    msg = f"rollout phase ~{total:.1f} of {rank_gb:.0f} GB {per} ({_fmt(rollout_parts)})"
    if total > rank_gb:
        out.append(finding("hbm", ERROR, rkeys, msg + ": training state left on the card plus vLLM's share do not fit",
                           "set actor_rollout_ref.actor.megatron.param_offload=True and optimizer_offload=True "
                           "(ref.megatron.param_offload=True), or lower gpu_memory_utilization"))
    else:
        out.append(finding("hbm", INFO, (), msg))
    expert_split = ro.ep if (facts.is_moe and ro.ep > 1) else ro.tp
    weights = 2 * (facts.dense_params() / ro.tp + (facts.expert_params() / expert_split if facts.is_moe else 0))
    kv_budget = engine - weights - ENGINE_WORKSPACE_GB * GB
    seq = get_int(cfg, "data.max_prompt_length", 0) + get_int(cfg, "data.max_response_length", 0)
    kv_keys = (f"{ARR}.rollout.gpu_memory_utilization", f"{ARR}.rollout.tensor_model_parallel_size",
               f"{ARR}.rollout.expert_parallel_size")
    if kv_budget <= 0:
        out.append(finding("hbm", ERROR, kv_keys,
                           f"rollout weights need {weights / GB:.1f} GB {per} (TP {ro.tp}"
                           + (f", EP {ro.ep}" if facts.is_moe else "") + f") but gpu_memory_utilization {util} gives "
                           f"vLLM {engine / GB:.1f} GB: no room for a KV cache",
                           "raise rollout TP (or rollout DP/EP for MoE) or gpu_memory_utilization"))
        return out
    kv_heads_per_card = max(1, math.ceil(facts.num_kv_heads / ro.tp))
    per_token = 2 * facts.num_layers * kv_heads_per_card * facts.head_dim * 2
    tokens = int(kv_budget / per_token)
    concurrent = tokens * ro.dp // max(seq, 1)
    msg = (f"rollout KV cache ~{kv_budget / GB:.1f} GB {per} after {weights / GB:.1f} GB of weights: "
           f"~{tokens} tokens, ~{concurrent} sequences of {seq} tokens per replica at once")
    if concurrent < 1:
        out.append(finding("hbm", ERROR, kv_keys + ("data.max_prompt_length", "data.max_response_length"),
                           msg + ": not even one sequence fits", "raise gpu_memory_utilization or rollout TP"))
    elif concurrent < 4:
        out.append(finding("hbm", WARNING, kv_keys, msg + ": generation will run nearly serially",
                           "raise gpu_memory_utilization or rollout TP"))
    else:
        out.append(finding("hbm", INFO, (), msg))
    return out

"""The `alloc` rule: an NPU allocator setting vllm-ascend's sleep mode refuses.

vllm-ascend's sleep mode (verl's default for a colocated vLLM rollout: ``rollout.enable_sleep_mode`` on verl
0.9, ``rollout.free_cache_engine`` before it) allocates the rollout's weights and KV cache from a memory pool
(CaMemAllocator) that asserts when ``PYTORCH_NPU_ALLOC_CONF`` holds ``expandable_segments:True``; vllm-ascend
only turns the setting on itself when sleep mode is off (vllm-ascend PR 5855), and the change that would let
the two coexist (PR 9242) is not merged. The variable reaches the rollout from the launch script's
environment or from Ray's runtime env in the config.
"""

from verl_ascend.core.findings import ERROR, finding
from verl_ascend.recipe.layout import ARR, RUNTIME_ENV_VARS, get

VAR = "PYTORCH_NPU_ALLOC_CONF"
RUNTIME_ENV = f"{RUNTIME_ENV_VARS}.{VAR}"
SLEEP = f"{ARR}.rollout.enable_sleep_mode"
FREE = f"{ARR}.rollout.free_cache_engine"
SOURCES = ("https://github.com/vllm-project/vllm-ascend/pull/9242", "https://github.com/vllm-project/vllm-ascend/pull/5855",
           "https://github.com/verl-project/verl/pull/6346")


def expandable(conf) -> bool:
    """``expandable_segments:True`` among the comma-separated options (the last mention wins, as torch reads it)."""
    value = None
    for part in str(conf or "").split(","):
        key, _, val = part.partition(":")
        if key.strip() == "expandable_segments":
            value = val.strip().lower() == "true"
    return bool(value)


def sleep_mode(cfg):
    """(on, key that decides): verl 0.9 has enable_sleep_mode (default on); older verl passes free_cache_engine."""
    if get(cfg, SLEEP) is not None:
        return bool(get(cfg, SLEEP)), SLEEP
    return bool(get(cfg, FREE, True)), FREE


def findings(ctx) -> list:
    if str(get(ctx.cfg, f"{ARR}.rollout.name", "")) != "vllm":
        return []
    where = [(key, conf) for key, conf in ctx.exported(VAR).items() if expandable(conf)]
    on, key = sleep_mode(ctx.cfg)
    if not where or not on:
        return []
    named, conf = where[0]
    return [finding("alloc", ERROR, (named, key),
                    f"{named}={conf} with vLLM sleep mode on ({key}, verl's default for a colocated rollout): "
                    "vllm-ascend's sleep-mode memory pool asserts 'Expandable segments are not compatible with memory "
                    "pool' when the rollout engine starts (vllm-ascend PR 9242, which would allow both, is not merged)",
                    f"drop expandable_segments:True from {VAR} (or set expandable_segments:False) where the rollout "
                    "runs; against fragmentation there lower actor_rollout_ref.rollout.gpu_memory_utilization or the "
                    f"micro batch sizes. Keep expandable segments only with sleep mode off ({key}=False), which "
                    "leaves the rollout's weights and KV cache in HBM during training (see the hbm rule). The "
                    "alternative that keeps both: verl >= 0.8 with torch_npu >= 2.9 turns expandable segments on in "
                    "the training workers by itself and off around the rollout's wake-up (verl PR 6346), so the "
                    "variable is not needed for training there; on verl 0.6.1-0.7.x verl-ascend's expandable_segments "
                    "patch makes verl's same toggle act on NPU where torch_npu has the allocator call (see "
                    "verl-ascend status)", sources=SOURCES)]

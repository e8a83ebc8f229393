"""The ``hf`` rollout: transformers ``generate`` in a Ray server, for a rehearsal on CPU.

verl 0.9's rollouts are token-in/token-out servers (vLLM, SGLang, TensorRT-LLM) that verl's agent
loop calls through ``server.generate.remote(...)`` and that the actor feeds new weights after
every update. None of them runs on a CPU-only host with torch's CPU build, so a rehearsal swaps in
this one. It plugs into verl through its two registries and nothing else:

- :class:`HFReplica` (``RolloutReplicaRegistry``, name ``hf``): one :class:`HFServer` Ray actor
  per replica, the model loaded from the run's model path.
- :class:`HFServerAdapter` (``get_rollout_class("hf", "async")``): lives in the actor worker;
  ``update_weights`` drains verl's per-tensor generator on every rank (each full tensor is a
  collective) and the first rank of the replica sends the state dict to its server, so every
  generation after step 0 samples from the weights the actor just trained.

Sampling honours temperature / top-p / top-k and the response length; log-probs, when asked,
are the chosen tokens' log-softmax at the sampling temperature (what verl's actor recomputes,
so ``training/rollout_probs_diff_*`` stays near zero when the weights did arrive).
"""

import asyncio
import logging
import re
import threading

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

logger = logging.getLogger("verl_ascend")
NAME = "hf"


def server_name(replica_rank: int, suffix: str = "") -> str:
    return f"verl_ascend_hf_server_{replica_rank}{suffix}"


class HFServer:
    """One generation server (a Ray actor): a transformers causal LM on the host CPU."""

    def __init__(self, model_path: str, response_length: int, trust_remote_code: bool = False):
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(1)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=torch.float32, attn_implementation="sdpa", trust_remote_code=trust_remote_code
        ).eval()
        self.response_length = int(response_length)
        self.global_steps = None
        self.updates = 0
        self._lock = threading.Lock()

    def ready(self) -> bool:
        return True

    def update_weights(self, state: dict, global_steps=None) -> int:
        with self._lock:
            state = fuse_experts(state, self.model.state_dict())
            result = self.model.load_state_dict(state, strict=False)
            if result.unexpected_keys:
                raise RuntimeError(f"hf rollout: weights the model does not have: {result.unexpected_keys[:5]}")
            self.global_steps = global_steps
            self.updates += 1
        return len(state)

    def _generate(self, prompt_ids, sampling_params: dict) -> TokenOutput:
        params = dict(sampling_params or {})
        temperature = float(params.get("temperature", 1.0) or 0.0)
        top_p = float(params.get("top_p", 1.0) or 1.0)
        top_k = int(params.get("top_k", -1) or -1)
        max_tokens = int(params.get("max_tokens", params.get("max_new_tokens", self.response_length)))
        max_tokens = max(1, min(max_tokens, self.response_length))
        do_sample = temperature > 0
        kwargs = dict(max_new_tokens=max_tokens, do_sample=do_sample, output_logits=True,
                      return_dict_in_generate=True, pad_token_id=self.model.config.eos_token_id)
        if do_sample:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=top_k if top_k > 0 else 0)
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
        with self._lock, torch.no_grad():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        tokens = out.sequences[0, ids.shape[1]:].tolist()
        log_probs = None
        if params.get("logprobs"):
            scale = temperature if do_sample else 1.0
            log_probs = [torch.log_softmax(step[0].float() / scale, dim=-1)[tok].item()
                         for step, tok in zip(out.logits, tokens)]
        return TokenOutput(token_ids=tokens, log_probs=log_probs, stop_reason="completed",
                           extra_fields={"global_steps": self.global_steps})

    async def generate(self, prompt_ids, sampling_params, request_id=None, **_ignored) -> TokenOutput:
        return await asyncio.to_thread(self._generate, prompt_ids, sampling_params)

    # verl's replica and checkpoint manager call these around every weight sync; an HF model
    # keeps its weights and has no KV cache between requests, so there is nothing to do.
    async def wake_up(self): return None  # noqa: E704
    async def sleep(self): return None  # noqa: E704
    async def clear_kv_cache(self): return None  # noqa: E704
    async def release_kv_cache(self): return None  # noqa: E704
    async def resume_kv_cache(self): return None  # noqa: E704
    async def abort_all_requests(self, reject_request: bool = False): return None  # noqa: E704
    async def resume_generation(self): return None  # noqa: E704
    async def start_profile(self, **kwargs): return None  # noqa: E704
    async def stop_profile(self): return None  # noqa: E704


class HFReplica(RolloutReplica):
    """A replica = one :class:`HFServer` (CPU only: no GPU resource, no placement group)."""

    async def launch_servers(self):
        model_path = getattr(self.model_config, "local_path", None) or self.model_config.path
        trust = bool(getattr(self.model_config, "trust_remote_code", False))
        actor = ray.remote(HFServer).options(
            name=server_name(self.replica_rank, self.name_suffix), num_cpus=0,
            max_concurrency=self.max_concurrency,
        ).remote(model_path, self.config.response_length, trust)
        await actor.ready.remote()
        self.servers = [actor]
        self._server_handle = actor
        self._server_address = f"hf-rollout-{self.replica_rank}{self.name_suffix}"

    def rollout_worker_use_gpu(self) -> bool:
        return False


_EXPERT = re.compile(r"^(.*\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


def fuse_experts(state: dict, model_state: dict) -> dict:
    """Per-expert HF names (``...experts.<i>.gate_proj.weight``, what mbridge exports and the checkpoint holds)
    -> the fused tensors of a model that keeps its experts stacked (transformers 5: ``experts.gate_up_proj``
    [E, 2I, H] with gate before up, ``experts.down_proj`` [E, H, I]; ``from_pretrained`` does this conversion,
    ``load_state_dict`` does not). A model with per-expert modules gets the state unchanged."""
    groups, out = {}, {}
    for name, tensor in state.items():
        match = _EXPERT.match(name)
        if match and f"{match.group(1)}.gate_up_proj" in model_state:
            groups.setdefault(match.group(1), {}).setdefault(match.group(3), {})[int(match.group(2))] = tensor
        else:
            out[name] = tensor
    for prefix, parts in groups.items():
        experts = model_state[f"{prefix}.gate_up_proj"].shape[0]
        for part in ("gate_proj", "up_proj", "down_proj"):
            missing = sorted(set(range(experts)) - set(parts.get(part, {})))
            if missing:
                raise RuntimeError(f"hf rollout: the weight sync lacks {prefix}.{missing[:4]}.{part}")
        out[f"{prefix}.gate_up_proj"] = torch.stack(
            [torch.cat([parts["gate_proj"][e], parts["up_proj"][e]], dim=0) for e in range(experts)])
        out[f"{prefix}.down_proj"] = torch.stack([parts["down_proj"][e] for e in range(experts)])
        for key in (f"{prefix}.gate_up_proj", f"{prefix}.down_proj"):
            if tuple(out[key].shape) != tuple(model_state[key].shape):
                raise RuntimeError(f"hf rollout: {key} fused to {tuple(out[key].shape)}, the model holds "
                                   f"{tuple(model_state[key].shape)}")
    return out


class HFServerAdapter(BaseRollout):
    """The actor side: hands the trained weights to this rank's replica server."""

    def __init__(self, config, model_config, device_mesh, *args, **kwargs):
        super().__init__(config, model_config, device_mesh, *args, **kwargs)
        per_replica = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                       * self.config.pipeline_model_parallel_size)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.replica_rank, self.leader = rank // per_replica, rank % per_replica == 0
        self._server = None
        from .report import say_patches_once

        say_patches_once(f"actor rank {rank}")

    async def resume(self, tags):
        return None

    async def release(self):
        return None

    async def update_weights(self, weights, wire_format: str = "named_tensors", **kwargs):
        if wire_format != "named_tensors":
            raise NotImplementedError(f"hf rollout takes full named tensors, not wire_format={wire_format!r}")
        state = {}
        for name, tensor in weights:  # every rank drains: each full tensor is a collective
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", torch.float32).clone()
        if not self.leader:
            return
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        count = await self._server.update_weights.remote(state, kwargs.get("global_steps"))
        logger.info("hf rollout: %d tensors sent to replica %d (step %s)", count, self.replica_rank,
                    kwargs.get("global_steps"))

"""The model numbers the rules need: layers, heads, KV heads, experts, sizes, parameter counts.

Read from ``config.json`` under the HF model path when it is there (the cluster's path often is not
on the checking machine); otherwise from the built-in facts of the models the shipped recipes use,
matched by the path's last component. Values are the published HF configs.
"""

import dataclasses
import json
from pathlib import Path
from typing import Optional


@dataclasses.dataclass
class ModelFacts:
    name: str
    source: str  # "config.json at ..." or "built-in facts"
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def attention_params_per_layer(self) -> int:
        q = self.num_heads * self.head_dim
        kv = self.num_kv_heads * self.head_dim
        return self.hidden_size * (q + 2 * kv) + q * self.hidden_size

    def expert_params(self) -> int:
        """Parameters in routed experts (split by expert parallel); 0 for dense models."""
        return self.num_layers * self.num_experts * 3 * self.hidden_size * self.moe_intermediate_size

    def dense_params(self) -> int:
        """Everything else: embeddings, attention, dense MLPs, norms, routers."""
        embed = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        mlp = 0 if self.is_moe else 3 * self.hidden_size * self.intermediate_size
        router = self.hidden_size * self.num_experts
        return embed + self.num_layers * (self.attention_params_per_layer() + mlp + router + 2 * self.hidden_size)

    def total_params(self) -> int:
        return self.dense_params() + self.expert_params()

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes


_BUILTIN = {
    "qwen2.5-7b": dict(num_layers=28, hidden_size=3584, num_heads=28, num_kv_heads=4, head_dim=128,
                       intermediate_size=18944, vocab_size=152064, max_position_embeddings=32768),
    "qwen2.5-32b": dict(num_layers=64, hidden_size=5120, num_heads=40, num_kv_heads=8, head_dim=128,
                        intermediate_size=27648, vocab_size=152064, max_position_embeddings=32768),
    "qwen3-235b-a22b": dict(num_layers=94, hidden_size=4096, num_heads=64, num_kv_heads=4, head_dim=128,
                            intermediate_size=12288, vocab_size=151936, max_position_embeddings=40960,
                            num_experts=128, experts_per_token=8, moe_intermediate_size=1536),
}


def from_hf_config(data: dict, name: str, source: str) -> ModelFacts:
    text = data.get("text_config", data)  # multimodal configs nest the language model
    heads = text["num_attention_heads"]
    return ModelFacts(
        name=name, source=source,
        num_layers=text["num_hidden_layers"], hidden_size=text["hidden_size"], num_heads=heads,
        num_kv_heads=text.get("num_key_value_heads") or heads,
        head_dim=text.get("head_dim") or text["hidden_size"] // heads,
        intermediate_size=text.get("intermediate_size", 0), vocab_size=text["vocab_size"],
        max_position_embeddings=text.get("max_position_embeddings", 0),
        tie_word_embeddings=bool(text.get("tie_word_embeddings", data.get("tie_word_embeddings", False))),
        num_experts=text.get("num_experts") or text.get("n_routed_experts") or text.get("num_local_experts") or 0,
        experts_per_token=text.get("num_experts_per_tok", 0),
        moe_intermediate_size=text.get("moe_intermediate_size", 0),
    )


def lookup(model_path: Optional[str]) -> tuple:
    """(ModelFacts or None, why not). The HF config wins over built-in facts."""
    if not model_path:
        return None, "actor_rollout_ref.model.path is not set"
    path = Path(str(model_path)).expanduser()
    config = path / "config.json"
    if config.is_file():
        try:
            return from_hf_config(json.loads(config.read_text()), path.name, f"config.json at {config}"), ""
        except (ValueError, KeyError) as exc:
            return None, f"{config} is not a usable HF config ({type(exc).__name__}: {exc})"
    key = path.name.lower()
    for stem, facts in sorted(_BUILTIN.items(), key=lambda kv: -len(kv[0])):
        if key.startswith(stem) and not key[len(stem):len(stem) + 1].isdigit():
            return ModelFacts(name=path.name, source="built-in facts (no config.json at the model path here)", **facts), ""
    known = ", ".join(sorted(_BUILTIN))
    return None, (f"no config.json at {path} on this machine and no built-in facts for '{path.name}' "
                  f"(built in: {known})")

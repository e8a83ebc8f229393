"""A tiny random model of the recipe's architecture family, and a tokenizer built offline.

The model keeps what makes the family (model type, GQA, MoE routing, tied embeddings) and shrinks
everything that costs time: 2 layers (more where the pipeline layout needs them), hidden 64, a few hundred vocabulary entries. Its config comes
from the recipe's ``config.json`` when the model path exists here, else from the built-in facts
``verl-ascend check`` uses. The tokenizer is a byte-level BPE trained in well under a second on
the run's own prompts (no download), with a Qwen-style chat template, so verl's data pipeline,
chat templating and reward parsing run the way they do on the cluster.
"""

import json
import os
from pathlib import Path

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Family -> (model_type, architecture) for the built-in facts, matched on the path's name.
FAMILIES = (("qwen3", True, "qwen3_moe", "Qwen3MoeForCausalLM"), ("qwen3", False, "qwen3", "Qwen3ForCausalLM"),
            ("qwen2", False, "qwen2", "Qwen2ForCausalLM"), ("llama", False, "llama", "LlamaForCausalLM"))
TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, head_dim=16, intermediate_size=128,
            max_position_embeddings=2048)
TINY_MOE = dict(moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[])


def tiny_experts(real: dict) -> dict:
    """The recipe model's top-k (2 when unknown) over twice as many experts (so routing still chooses), a
    multiple of 4 (expert parallel up to 4 ranks divides them)."""
    top_k = int(real.get("num_experts_per_tok") or 2)
    return dict(num_experts=max(4, (2 * top_k + 3) // 4 * 4), num_experts_per_tok=top_k)


class AssetError(Exception):
    """The recipe's model cannot be turned into a tiny one (message names what and the fix)."""


def source_config(model_path: str) -> tuple:
    """(HF config dict, where it came from) of the recipe's model: its config.json, else built-in facts."""
    path = Path(str(model_path)).expanduser()
    config = path / "config.json"
    if config.is_file():
        data = json.loads(config.read_text())
        return data.get("text_config", data) | {k: v for k, v in data.items() if k in ("model_type", "architectures")}, \
            f"config.json at {config}"
    from verl_ascend.recipe.model_facts import lookup

    facts, why = lookup(str(model_path))
    if facts is None:
        raise AssetError(f"cannot tell the architecture of {model_path}: {why}. Fix: run rehearse where the model "
                         "path holds its config.json, or name a local folder holding the model's config.json "
                         "(--env MODEL_PATH=DIR where the recipe reads MODEL_PATH, else "
                         "--override actor_rollout_ref.model.path=DIR)")
    name = path.name.lower()
    for stem, moe, model_type, arch in FAMILIES:
        if name.startswith(stem) and moe == facts.is_moe:
            return dict(model_type=model_type, architectures=[arch], num_key_value_heads=facts.num_kv_heads,
                        num_attention_heads=facts.num_heads, tie_word_embeddings=facts.tie_word_embeddings,
                        num_experts=facts.num_experts, num_hidden_layers=facts.num_layers,
                        num_experts_per_tok=facts.experts_per_token or None), facts.source
    raise AssetError(f"no tiny-model recipe for {path.name}. Fix: point the model path at a local folder with config.json")


def is_moe(real: dict) -> bool:
    return bool(real.get("num_experts") or real.get("num_local_experts") or real.get("n_routed_experts"))


def tiny_config(real: dict, vocab_size: int, special_ids: dict, layers: int = TINY["num_hidden_layers"]) -> dict:
    """The real config with every size made tiny (``layers`` layers); architecture-defining switches kept."""
    heads, kv = real.get("num_attention_heads") or 4, real.get("num_key_value_heads") or real.get("num_attention_heads") or 4
    config = {k: v for k, v in real.items() if not k.startswith("_") and k not in ("quantization_config", "rope_scaling",
                                                                                   "auto_map", "torch_dtype", "dtype")}
    config.update(TINY, num_hidden_layers=layers)
    config["num_key_value_heads"] = 2 if kv < heads else TINY["num_attention_heads"]  # GQA stays GQA
    if is_moe(real):
        config.update(TINY_MOE, **tiny_experts(real))
    config.update(vocab_size=vocab_size, torch_dtype="float32", use_cache=True, use_sliding_window=False,
                  bos_token_id=special_ids["<|endoftext|>"], eos_token_id=special_ids["<|im_end|>"],
                  pad_token_id=special_ids["<|endoftext|>"])
    config.pop("layer_types", None)  # sized for the real depth
    return config


def build_tokenizer(texts, out_dir: Path, vocab_size: int = 400):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))
    return fast


def build(model_path: str, texts, out_dir: Path, seed: int = 0, layers: int = TINY["num_hidden_layers"]) -> dict:
    """Write tokenizer + tiny random model of ``layers`` layers to ``out_dir``; returns what was built.

    ``layers``: 2 unless the recipe's pipeline layout needs more (:mod:`.layout` picks the fewest)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    real, where = source_config(model_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(texts, out_dir)
    vocab = ((len(tok) + 63) // 64) * 64  # a round embedding size, as real models pad theirs
    config_dict = tiny_config(real, vocab, {s: tok.convert_tokens_to_ids(s) for s in SPECIALS}, layers)
    model_type = config_dict.get("model_type")
    try:
        config = AutoConfig.for_model(model_type, **{k: v for k, v in config_dict.items() if k != "model_type"})
    except (ValueError, KeyError) as exc:
        raise AssetError(f"transformers cannot build model_type={model_type!r} ({exc}). Fix: upgrade transformers "
                         "or point the model path at a supported architecture") from None
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(str(out_dir), safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    return {"source": where, "model_type": model_type, "architecture": type(model).__name__, "params": params,
            "layers": config.num_hidden_layers, "hidden": config.hidden_size, "vocab": vocab, "path": str(out_dir),
            "moe": bool(config_dict.get("num_experts")), "experts": int(config_dict.get("num_experts") or 0),
            "top_k": config_dict.get("num_experts_per_tok"), "real_layers": real.get("num_hidden_layers")}


def prompt_texts(parquet_files, limit: int = 200) -> list:
    """The strings the tokenizer is trained on: the run's own prompt messages (plus the template's words)."""
    import pyarrow.parquet as pq

    texts = ["system user assistant\n", "#### 0 1 2 3 4 5 6 7 8 9"]
    for path in parquet_files:
        table = pq.read_table(path)
        if "prompt" not in table.column_names:
            continue
        for messages in table.column("prompt").to_pylist()[:limit]:
            for message in messages or []:
                texts.append(str(message.get("content", "")))
    return texts


def is_local_model(model_path: str) -> bool:
    return os.path.isfile(os.path.join(os.path.expanduser(str(model_path)), "config.json"))

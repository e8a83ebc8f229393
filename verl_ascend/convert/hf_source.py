"""The Hugging Face side of a conversion: is the checkpoint readable, supported, and divisible?

Everything here runs before torch.distributed or megatron are touched, so a bad path or a bad
parallel size is reported in seconds (exit 2), not after minutes of model building on 128 ranks.
Weights are read tensor by tensor from memory-mapped safetensors files, never as a whole model.
"""

import json
import os
from dataclasses import dataclass, field

from verl_ascend.core.findings import BadInput

# HF ``model_type`` -> what the conversion was tested with. mbridge knows more model types, but a
# type not listed here has never been checked end to end (tensor equality + logits) by our tests.
SUPPORTED = {
    "qwen2": "Qwen2 / Qwen2.5 (dense)",
    "qwen3": "Qwen3 (dense)",
    "qwen3_moe": "Qwen3-MoE",
}


class ConvertError(BadInput):
    """Bad input: the message names the bad value and the fix. ``cli.main`` says it and exits 2."""


@dataclass
class Layout:
    """How the model is split: tensor, pipeline and expert parallel sizes over ``world`` ranks."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    world: int = 1

    def __str__(self):
        return f"TP{self.tp} PP{self.pp} EP{self.ep} on {self.world} rank(s)"


@dataclass
class HFCheckpoint:
    path: str
    config: dict
    weight_map: dict = field(default_factory=dict)  # tensor name -> safetensors file name

    @property
    def model_type(self) -> str:
        return self.config.get("model_type", "")

    @property
    def is_moe(self) -> bool:
        return bool(self.config.get("num_experts") or self.config.get("num_local_experts"))

    @property
    def num_experts(self) -> int:
        return int(self.config.get("num_experts") or self.config.get("num_local_experts") or 0)

    def nbytes(self) -> int:
        files = set(self.weight_map.values())
        return sum(os.path.getsize(os.path.join(self.path, f)) for f in files)


def inspect(path: str) -> HFCheckpoint:
    """Read config.json and every safetensors header; raise ConvertError on anything unusable."""
    if not os.path.isdir(path):
        raise ConvertError(f"--hf_model_path {path!r} is not a directory. Fix: pass the local folder holding "
                           "config.json and *.safetensors (download it first, e.g. `huggingface-cli download`).")
    config_file = os.path.join(path, "config.json")
    try:
        with open(config_file) as f:
            config = json.load(f)
    except FileNotFoundError:
        raise ConvertError(f"no config.json in --hf_model_path {path!r}. Fix: point at the model folder itself "
                           "(the one holding config.json), not its parent.") from None
    except (OSError, ValueError) as exc:
        raise ConvertError(f"{config_file} cannot be read as JSON ({exc}). Fix: re-download the checkpoint.") from None
    model_type = config.get("model_type")
    if model_type not in SUPPORTED:
        supported = ", ".join(f"{k} ({v})" for k, v in SUPPORTED.items())
        raise ConvertError(f"unsupported architecture: model_type={model_type!r} "
                           f"(architectures={config.get('architectures')}). Supported: {supported}.")
    ckpt = HFCheckpoint(path=path, config=config, weight_map=_weight_map(path))
    return ckpt


def _weight_map(path: str) -> dict:
    from safetensors import safe_open

    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        try:
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError) as exc:
            raise ConvertError(f"{index} is unreadable ({exc}). Fix: re-download the checkpoint.") from None
        files = sorted(set(weight_map.values()))
    else:
        files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        weight_map = {}
        if not files:
            bins = [f for f in os.listdir(path) if f.endswith(".bin")]
            hint = (" It has PyTorch .bin files: re-save it with `model.save_pretrained(dir, safe_serialization=True)`."
                    if bins else "")
            raise ConvertError(f"no *.safetensors weights in --hf_model_path {path!r}.{hint}")
    found = {}
    for name in files:
        file = os.path.join(path, name)
        try:
            with safe_open(file, framework="pt", device="cpu") as f:
                found.update({k: name for k in f.keys()})
        except FileNotFoundError:
            raise ConvertError(f"{file} is listed in model.safetensors.index.json but missing. "
                               "Fix: finish the download (a shard is absent).") from None
        except Exception as exc:  # safetensors raises its own error types for truncated headers
            raise ConvertError(f"{file} is not a readable safetensors file ({type(exc).__name__}: {exc}). "
                               "Fix: re-download this shard (it is truncated or corrupt).") from None
    missing = sorted(set(weight_map) - set(found) if weight_map else ())
    if missing:
        raise ConvertError(f"{len(missing)} tensor(s) listed in the index are absent from the shards, e.g. "
                           f"{missing[0]!r}. Fix: re-download the checkpoint.")
    return found


def check_layout(ckpt: HFCheckpoint, layout: Layout, device: str = "") -> None:
    """Raise ConvertError when the parallel sizes do not divide the model or the world size."""
    c = ckpt.config
    if device == "cpu" and layout.pp > 1 and c.get("tie_word_embeddings"):
        # megatron-core synchronises the shared embedding of the first and last stage with a
        # hard-coded ``.cuda()`` while building the model; on a CPU-only host that cannot run.
        raise ConvertError(f"--pp {layout.pp} with tie_word_embeddings=true cannot be converted on a CPU-only host "
                           "(megatron moves the shared embedding to CUDA). Fix: use --pp 1 (tied-embedding Qwen "
                           "models are small) and split with --tp, or convert on an NPU/GPU host.")
    for flag, value in (("--tp", layout.tp), ("--pp", layout.pp), ("--ep", layout.ep)):
        if value < 1:
            raise ConvertError(f"{flag} {value}: must be >= 1.")
    if layout.ep > 1 and not ckpt.is_moe:
        raise ConvertError(f"--ep {layout.ep} given for a dense model ({ckpt.model_type}). Fix: drop --ep.")
    divisible = [
        ("num_hidden_layers", c.get("num_hidden_layers"), layout.pp, "--pp"),
        ("num_attention_heads", c.get("num_attention_heads"), layout.tp, "--tp"),
        ("num_key_value_heads", c.get("num_key_value_heads", c.get("num_attention_heads")), layout.tp, "--tp"),
        ("vocab_size", c.get("vocab_size"), layout.tp, "--tp"),
        ("intermediate_size", c.get("intermediate_size"), layout.tp, "--tp"),
    ]
    if ckpt.is_moe:
        divisible.append(("num_experts", ckpt.num_experts, layout.ep, "--ep"))
    for key, total, size, flag in divisible:
        if total is None:
            raise ConvertError(f"config.json of {ckpt.path!r} has no {key!r}. Fix: re-download the checkpoint.")
        if int(total) % size:
            options = [d for d in range(1, int(total) + 1) if int(total) % d == 0 and d <= 64]
            raise ConvertError(f"{flag} {size} does not divide {key}={total}. Fix: use one of {options}.")
    model_ranks = layout.tp * layout.pp
    if layout.world % model_ranks:
        raise ConvertError(f"world size {layout.world} is not a multiple of TP*PP = {layout.tp}*{layout.pp}. "
                           f"Fix: start {model_ranks} (or a multiple) processes, e.g. `torchrun --nproc_per_node "
                           f"{model_ranks} ...`, or change --tp/--pp.")
    if (layout.world // layout.pp) % layout.ep:
        raise ConvertError(f"--ep {layout.ep} does not divide the ranks of one pipeline stage "
                           f"({layout.world // layout.pp}). Fix: start a multiple of PP*EP processes.")

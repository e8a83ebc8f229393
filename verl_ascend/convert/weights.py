"""HF tensors -> this rank's Megatron tensors, one tensor at a time, through mbridge's layout code.

Each rank reads only the HF tensors its own slice needs, straight from the safetensors files, and
drops them as soon as its slice is copied: host memory stays at this rank's model share plus one
full tensor. Each safetensors file is opened per read and closed at once, so its memory map never
accumulates the whole file in the process's resident memory.
"""

import os

import torch

from .hf_source import ConvertError, HFCheckpoint
from .model import is_expert, tensor_names


class HFReader:
    def __init__(self, ckpt: HFCheckpoint):
        self.ckpt = ckpt

    def get(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        file = self.ckpt.weight_map.get(name)
        if file is None:
            raise ConvertError(f"tensor {name!r} is missing from {self.ckpt.path!r} although config.json implies it. "
                               "Fix: re-download the checkpoint (or check it is the model config.json describes).")
        with safe_open(os.path.join(self.ckpt.path, file), framework="pt", device="cpu") as f:
            return f.get_tensor(name)


def local_slice(bridge, name: str, param: torch.Tensor, hf_tensors: list) -> torch.Tensor:
    """This rank's part of the Megatron tensor ``name`` built from its HF source tensors."""
    from megatron.core import parallel_state as mpu

    full = bridge._weight_to_mcore_format(name, hf_tensors)
    if is_expert(name):  # experts are split by EP (whole experts), not by TP: expert TP size is 1
        return full
    tp = mpu.get_tensor_model_parallel_world_size()
    if tp == 1 or not getattr(param, "tensor_model_parallel", False):
        return full
    # mbridge splits fused tensors correctly: each rank gets its own rows of gate AND of up
    # (not a slice of the concatenation), and whole query groups of QKV.
    return bridge._weight_split_across_tp(name, full, param, tp)[mpu.get_tensor_model_parallel_rank()]


def load_hf_into(model, bridge, ckpt: HFCheckpoint, progress) -> set:
    """Fill every tensor of ``model`` from the HF checkpoint; return the HF names used."""
    reader = HFReader(ckpt)
    state = model.state_dict(keep_vars=True)
    used = set()
    names = tensor_names(model, bridge)
    for local, name in progress(names):
        try:
            hf_names = bridge._weight_name_mapping_mcore_to_hf(name)
        except NotImplementedError:
            raise ConvertError(f"mbridge has no HF name for Megatron tensor {name!r} ({ckpt.model_type}). "
                               "This model variant is not supported.") from None
        hf_tensors = [reader.get(h) for h in hf_names]
        param = state[local]
        part = local_slice(bridge, name, param, hf_tensors)
        if tuple(part.shape) != tuple(param.shape):
            raise ConvertError(f"{name}: HF tensors {hf_names} give shape {tuple(part.shape)} on this rank, "
                               f"Megatron expects {tuple(param.shape)}. config.json does not match the weights.")
        with torch.no_grad():
            param.data.copy_(part)
        used.update(hf_names)
        del hf_tensors, part
    return used

"""HF tensors -> this rank's Megatron tensors, one tensor at a time, through mbridge's layout code.

Each rank reads only the HF tensors its own slice needs, straight from the safetensors files, and
drops them as soon as its slice is copied: host memory stays at this rank's model share plus one
full tensor. Tensors are read with plain file reads, not memory maps (mapped pages count as the
process's resident memory), and a tensor that needs no reshaping is read directly into its
Megatron parameter, with no intermediate copy at all.
"""

import json
import os
import struct

import torch

from .hf_source import ConvertError, HFCheckpoint
from .model import is_expert, tensor_names

_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64,
           "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}


class HFReader:
    """Reads single tensors of a safetensors checkpoint (format: u64 header size, JSON header with
    dtype/shape/byte offsets per tensor, then the raw little-endian data). The files were already
    validated by safetensors itself in hf_source.inspect."""

    def __init__(self, ckpt: HFCheckpoint):
        self.ckpt = ckpt
        self._headers = {}

    def _entry(self, name: str) -> tuple:
        file = self.ckpt.weight_map.get(name)
        if file is None:
            raise ConvertError(f"tensor {name!r} is missing from {self.ckpt.path!r} although config.json implies it. "
                               "Fix: re-download the checkpoint (or check it is the model config.json describes).")
        path = os.path.join(self.ckpt.path, file)
        if path not in self._headers:
            with open(path, "rb") as f:
                (size,) = struct.unpack("<Q", f.read(8))
                self._headers[path] = (8 + size, json.loads(f.read(size)))
        data_start, header = self._headers[path]
        info = header[name]
        if info["dtype"] not in _DTYPES:
            raise ConvertError(f"tensor {name!r} has dtype {info['dtype']}, which this converter does not read.")
        start, end = info["data_offsets"]
        return path, data_start + start, end - start, _DTYPES[info["dtype"]], tuple(info["shape"])

    def get(self, name: str) -> torch.Tensor:
        path, offset, nbytes, dtype, shape = self._entry(name)
        out = torch.empty(shape, dtype=dtype)
        self._read(path, offset, nbytes, out)
        return out

    def read_into(self, name: str, target: torch.Tensor) -> bool:
        """Fill ``target`` straight from the file when dtype and shape match exactly; else False."""
        path, offset, nbytes, dtype, shape = self._entry(name)
        if dtype != target.dtype or shape != tuple(target.shape) or not target.is_contiguous() or target.is_meta \
                or target.device.type != "cpu":
            return False
        self._read(path, offset, nbytes, target)
        return True

    @staticmethod
    def _read(path, offset, nbytes, out):
        buffer = memoryview(out.view(-1).view(torch.uint8).numpy()) if out.numel() else memoryview(b"")
        if len(buffer) != nbytes:
            raise ConvertError(f"{path}: stored size of a tensor ({nbytes} bytes) does not match its header. "
                               "Fix: re-download this shard.")
        with open(path, "rb", buffering=0) as f:
            f.seek(offset)
            done = 0
            while done < nbytes:
                n = f.readinto(buffer[done:])
                if not n:
                    raise ConvertError(f"{path} ends early (truncated). Fix: re-download this shard.")
                done += n


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


def _is_split(bridge, name: str, param) -> bool:
    from megatron.core import parallel_state as mpu

    return (not is_expert(name) and mpu.get_tensor_model_parallel_world_size() > 1
            and getattr(param, "tensor_model_parallel", False)) or bridge.make_vocab_size_divisible_by is not None


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
        param = state[local]
        used.update(hf_names)
        if len(hf_names) == 1 and not _is_split(bridge, name, param) and reader.read_into(hf_names[0], param.data):
            continue  # 1:1 tensor, same dtype, whole on this rank: read straight into the parameter
        hf_tensors = [reader.get(h) for h in hf_names]
        part = local_slice(bridge, name, param, hf_tensors)
        if tuple(part.shape) != tuple(param.shape):
            raise ConvertError(f"{name}: HF tensors {hf_names} give shape {tuple(part.shape)} on this rank, "
                               f"Megatron expects {tuple(param.shape)}. config.json does not match the weights.")
        with torch.no_grad():
            param.data.copy_(part)
        del hf_tensors, part
    return used

"""TEST DOUBLE of torch_npu.contrib.transfer_to_npu: makes torch.cuda answer with torch.npu.

Models two steps of the real ``_init()`` (torch_npu 2.13.0 ``contrib/transfer_to_npu.py``):
- ``_patch_cuda``: ``_apply_patches([['cuda', torch_npu.npu], ...])`` sets every name of
  ``torch_npu.npu.__all__`` on ``torch.cuda`` (``_init/patches/monkey_patches.py::_apply_patches``),
  so ``torch.cuda.is_initialized`` and ``torch.cuda.synchronize`` *are* the NPU's;
- ``torch._utils._get_available_device_type = _patch_get_available_device_type`` ('npu' when
  ``torch.npu.is_available()``), which modules that imported the old function by name do not see.
The rest (device-string rewriting of torch functions, hccl for nccl, profiler, jit, the
transformers/accelerate wrappers) is not modelled. ``tests/process/test_real_torch_npu.py`` checks both
steps against the wheel's source.
"""

import torch

import torch_npu


def _patch_get_available_device_type():
    if torch.npu.is_available():
        return "npu"
    return None


for _name in torch_npu.npu.__all__:
    setattr(torch.cuda, _name, getattr(torch_npu.npu, _name))
torch._utils._get_available_device_type = _patch_get_available_device_type

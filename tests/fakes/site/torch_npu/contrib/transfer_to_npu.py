"""TEST DOUBLE of torch_npu.contrib.transfer_to_npu: makes torch.cuda answer with torch.npu.

The real module rebinds ``torch.cuda`` functions to their NPU counterparts, so after importing it
``torch.cuda.is_available()`` is True on an Ascend host. That is the behaviour verl trips over.
"""

import torch

import torch_npu  # noqa: F401

for _name in ("is_available", "device_count", "current_device", "set_device", "synchronize", "current_stream"):
    setattr(torch.cuda, _name, getattr(torch.npu, _name))

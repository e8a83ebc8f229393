"""TEST DOUBLE of torch_npu.utils.serialization, reproducing its unsafe ``nbytes`` swap.

The real ``torch.save`` replacement reads ``UntypedStorage.nbytes`` *as it is at call time*, installs
a closure that answers NPU storages itself and calls the value it read for the rest, runs the save,
and only then puts the value it read back (no try/finally, no lock). So:
- a save that raises leaves its closure installed, and the next save wraps that closure again;
- two saves that overlap in time capture each other's closures and restore them.
Either way the closures pile up, every ``nbytes()`` call walks the whole chain, and after about a
thousand of them Python raises RecursionError (seed 002, bug 1). This double keeps that structure
(written here from the behaviour, not copied). CPU storages are the only kind on a test machine,
so the NPU branch answers like the CPU one.

``FAKE_TORCH_NPU_SAVE_FIXED=1`` stands in for a torch_npu that restores ``nbytes`` in a finally.
"""

import os
import pickle

import torch
from torch.serialization import DEFAULT_PROTOCOL


def _get_npu_save_result(
    obj,
    f,
    pickle_module=pickle,
    pickle_protocol=DEFAULT_PROTOCOL,
    _use_new_zipfile_serialization=True,
    _disable_byteorder_record=False,
):
    cpu_nbytes = torch.storage.UntypedStorage.nbytes  # whatever is installed right now

    def npu_nbytes(self):
        if self.device.type != "cpu":
            return cpu_nbytes(self)  # the real one sizes the NPU storage through torch_npu._C
        return cpu_nbytes(self)

    torch.storage.UntypedStorage.nbytes = npu_nbytes
    if os.environ.get("FAKE_TORCH_NPU_SAVE_FIXED") == "1":
        try:
            return torch.serialization.save(obj, f, pickle_module, pickle_protocol, True, _disable_byteorder_record)
        finally:
            torch.storage.UntypedStorage.nbytes = cpu_nbytes
    result = torch.serialization.save(obj, f, pickle_module, pickle_protocol, True, _disable_byteorder_record)
    torch.storage.UntypedStorage.nbytes = cpu_nbytes  # skipped when save raised
    return result


def save(
    obj,
    f,
    pickle_module=pickle,
    pickle_protocol=DEFAULT_PROTOCOL,
    _use_new_zipfile_serialization=True,
    _disable_byteorder_record=False,
):
    # Looks the helper up at call time, as the real module does: a patched helper takes effect.
    return _get_npu_save_result(obj, f, pickle_module, pickle_protocol, True, _disable_byteorder_record)


def add_serialization_methods():
    torch.save = save

"""TEST DOUBLE of torch_npu.utils.serialization: the save path of the real releases, both kinds.

Default: the fixed save path of every package-index release from 2.5.1 on (read from the 2.5.1 and
2.13.0 wheels): ``_add_serialization_methods`` installs ``_npu_save`` as
``torch.serialization._save``; there is no ``_get_npu_save_result`` and nothing touches
``UntypedStorage.nbytes``. The real ``_npu_save`` sizes NPU storages through ``torch_npu._C``;
a test machine has CPU storages only, so this one hands them to torch's own ``_save``.

``FAKE_TORCH_NPU_SAVE_BUG=1``: the affected builds (torch_npu 2.1.0.post4-post11, 2.2.0, 2.3.1 up to
post5, 2.4.0 up to post3 and pre-April-2025 2.5.1/2.6.0 dev builds; read from the 2.4.0 wheel).
``_add_serialization_methods`` sets ``torch.save = save``; ``save`` calls ``_get_npu_save_result``,
looked up at call time, which reads ``UntypedStorage.nbytes`` as it is then, installs a closure
``npu_nbytes`` over it (free variable ``cpu_nbytes``), saves, and only then puts the value back: no
try/finally, no lock. A failing save leaves its closure installed and the next save wraps it
again; overlapping saves capture and restore each other's closures; after about a thousand,
``nbytes()`` fails with RecursionError (Ascend/pytorch removed the swap on 2025-03-31, "Fix
torch.save's bug in multi-thread"). Written here from that behaviour, not copied.

``tests/process/test_real_torch_npu.py`` checks the functions each variant defines and what its
``_add_serialization_methods`` assigns against those two wheels.
"""

import os
import pickle

import torch
from torch.serialization import DEFAULT_PROTOCOL

if os.environ.get("FAKE_TORCH_NPU_SAVE_BUG") == "1":

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

    def _add_serialization_methods():
        torch.save = save

else:
    _torch_save = torch.serialization._save

    def _npu_save(obj, zip_file, pickle_module, pickle_protocol, _disable_byteorder_record):
        return _torch_save(obj, zip_file, pickle_module, pickle_protocol, _disable_byteorder_record)

    def _add_serialization_methods():
        torch.serialization._save = _npu_save

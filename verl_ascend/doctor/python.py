"""doctor's python group: the interpreter under the job. Check ids and groups: :mod:`.checks`."""

import sys

from .findings import error, ok, warn


def check_python(version_info=sys.version_info) -> list:
    shown = ".".join(map(str, version_info[:3]))
    if tuple(version_info[:2]) < (3, 10):
        return [error(check_python, f"Python {shown}: verl and verl-ascend need 3.10 or newer",
                      "use the Python 3.10/3.11 of the Ascend image (the one torch_npu was built for)")]
    if tuple(version_info[:2]) > (3, 11):
        return [warn(check_python, f"Python {shown}: check that torch_npu, vllm-ascend and MindSpeed publish builds for it",
                     "Ascend images ship Python 3.10/3.11; use that interpreter if a wheel is missing")]
    return [ok(check_python, f"Python {shown} ({sys.executable})")]

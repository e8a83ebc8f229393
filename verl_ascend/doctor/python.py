"""doctor's python group: the interpreter under the job. Check ids and groups: :mod:`.checks`."""

import sys

from .findings import error, ok, warn


def check_python(version_info=sys.version_info) -> list:
    shown = ".".join(map(str, version_info[:3]))
    if tuple(version_info[:2]) < (3, 10):
        return [error(check_python, f"Python {shown}: verl and verl-ascend need 3.10 or newer",
                      "use the Python of the Ascend image (the one torch_npu was built for; verl's guide: 3.10-3.12)")]
    if tuple(version_info[:2]) > (3, 12):
        # verl's Ascend install guide accepts >= 3.10, < 3.13 and recommends 3.12; vllm-ascend builds for < 3.13 from
        # 0.21.0rc1 on (< 3.12 before): its release matrix, core/stacks.py and doctor/known_good.py cite both
        return [warn(check_python, f"Python {shown}: newer than verl's Ascend install guide accepts (3.10-3.12); check "
                     "that torch_npu, vllm-ascend and MindSpeed publish builds for it",
                     "use Python 3.12 (verl's recommendation) or the interpreter of the Ascend image")]
    return [ok(check_python, f"Python {shown} ({sys.executable})")]

"""The failure families of `verl-ascend diagnose`, one module per area.

- ``core``: the first table (CANN environment, file handles, HCCL link setup / execution, NPU memory and runtime).
- ``hccl``: the CANN HCCL user guide's fault chapter (TLS check, error CQE, ports taken, the peer that exited).
- ``device``: torch_npu's troubleshooting cases and vllm-ascend's FAQ (operators, devices, environment).
- ``cluster``: Ray and device visibility.
- ``training``: verl's NPU FAQ (weight bucket, MindSpeed, checkpoints on non-shared storage).
- ``common``: the failures any verl run meets on any hardware (config, paths, threads, state dicts, sizes,
  NCCL / Gloo watchdogs, Ray's dead actors).
- ``generic``: the fallback that makes any failed run a finding (harmless lines are decided by their place in the
  run's timeline, ``timeline.py``, never by a list).
- ``retry``: per family, whether a restart may help (transient / config / resource / environment / unknown).
"""

import dataclasses

from . import cluster, common, core, device, generic, hccl, retry, training
from .core import HCCL_RESULT  # noqa: F401
from .model import Family, Rule  # noqa: F401

_AREAS = (core, hccl, device, cluster, training, common, generic)
FAMILIES = {}
for _area in _AREAS:
    for _id, _family in _area.FAMILIES.items():
        assert _id not in FAMILIES, _id
        FAMILIES[_id] = _family
# later areas add public pages to families of the first table
for _area in _AREAS:
    for _id, _more in getattr(_area, "EXTRA_SOURCES", {}).items():
        FAMILIES[_id] = dataclasses.replace(FAMILIES[_id], sources=FAMILIES[_id].sources + tuple(_more))
# the retry class of each family (a family without one in retry.RETRY fails tests/unit/test_diagnose_retry.py)
for _id, _family in FAMILIES.items():
    _cls, _ = retry.RETRY.get(_id, (retry.UNKNOWN, ""))
    FAMILIES[_id] = dataclasses.replace(_family, retry_class=_cls, retry_reason=retry.reason(_id))
RULES = tuple(rule for area in _AREAS for rule in area.RULES)
UNRECOGNISED = generic.UNRECOGNISED

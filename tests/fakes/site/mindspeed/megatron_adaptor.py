"""TEST DOUBLE of mindspeed/megatron_adaptor.py (generation from ``FAKE_MINDSPEED_VERSION``, see
``mindspeed/__init__.py``).

At import, as the real module does in every branch:
- ``from torch_npu.contrib import transfer_to_npu`` (global torch.cuda -> NPU remap);
- MindSpeed's args are parsed from this process's ``sys.argv`` (``args_utils.get_mindspeed_args``);
- ``patch_features()`` imports Megatron and patches it in place. The only patches modelled are the
  ones verl's config path meets: on 2.2+ ``MegatronBasicFeature.register_mcore_basic_patches`` puts
  ``transformer_config_init_wrapper`` on ``TransformerConfig.__init__`` and
  ``MLATransformerConfig.__init__`` (a default feature, so always on); 26.x also hooks
  ``TransformerConfig.__init_subclass__``. 2.1 patches neither. On 26.x, ``--ckpt-acceleration`` in
  argv (``CkptAccelerationFeature.pre_register_patches``) also stubs torch's
  ``default_planner._validate_global_plan`` and
  ``sharding_spec._internals.validate_non_overlapping_shards_metadata``; like MindSpeed's
  ``Patch.apply_patch``, every loaded module holding the same function object is rebound.
``repatch(args)`` (2.2+ only; 2.1 has no such function): removes every patch, sets each key on the
process-global args from ``get_full_args()`` (so values accumulate across calls), and applies the
patches again.

Records go to ``events`` and, when ``FAKE_MINDSPEED_LOG`` names a file, one JSON line each there
(Ray workers and other processes append to the same file; each record names its pid and PID namespace).
"""

import json
import os
import sys

import mindspeed

events = []


def _record(event: dict) -> None:
    try:  # with the pid, the PID namespace: processes of two runs (each in its own namespace) can share a pid
        space = os.readlink("/proc/self/ns/pid")
    except OSError:
        space = ""
    event = {**event, "pid": os.getpid(), "pid_ns": space}
    events.append(event)
    path = os.environ.get("FAKE_MINDSPEED_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps(event, default=str) + "\n")


_record(
    {
        "event": "adaptor_import",
        "generation": mindspeed.GENERATION,
        "argv": list(sys.argv),
        "megatron_imported_before": sorted(m for m in sys.modules if m == "megatron" or m.startswith("megatron.")),
        # modules mid-import at this moment include whichever one was about to import Megatron
        "verl_modules_loaded": sorted(m for m in sys.modules if m.startswith("verl.utils.megatron")),
    }
)

from torch_npu.contrib import transfer_to_npu  # noqa: E402,F401

from mindspeed.args_utils import get_full_args, get_mindspeed_args  # noqa: E402

_originals = {}  # (owner, attribute) -> what was there before MindSpeed


def _targets():
    from megatron.core.transformer import transformer_config as module

    found = [(module.TransformerConfig, "__init__"), (module.MLATransformerConfig, "__init__")]
    if mindspeed.GENERATION == "26":
        found.append((module.TransformerConfig, "__init_subclass__"))
    return found


def _apply_patches():
    if not mindspeed.has_repatch():
        return
    from mindspeed.core.megatron_basic import arguments_basic

    for owner, attr in _targets():
        _originals[(owner, attr)] = owner.__dict__.get(attr)
        if attr == "__init__":
            setattr(owner, attr, arguments_basic.transformer_config_init_wrapper(owner.__dict__[attr]))
        else:
            setattr(owner, attr, classmethod(arguments_basic.transformer_config_init_subclass))


def _rebind(module_name, attr, make):
    import importlib

    module = importlib.import_module(module_name)
    current = getattr(module, attr)
    replacement = make(current)
    for held in list(sys.modules.values()):
        if getattr(held, "__dict__", {}).get(attr) is current:
            setattr(held, attr, replacement)


def _ckpt_acceleration():
    if mindspeed.GENERATION != "26" or not getattr(get_full_args(), "ckpt_acceleration", False):
        return
    from mindspeed.core.dist_checkpointing import checkpoint_adaptor as ckpt

    _rebind("torch.distributed.checkpoint.default_planner", "_validate_global_plan", ckpt.validate_global_plan_wrapper)
    _rebind("torch.distributed._shard.sharding_spec._internals", "validate_non_overlapping_shards_metadata",
            ckpt.validate_non_overlapping_shards_metadata_wrapper)


def _remove_patches():
    for (owner, attr), original in _originals.items():
        if original is None:
            delattr(owner, attr)
        else:
            setattr(owner, attr, original)
    _originals.clear()


get_mindspeed_args()
_ckpt_acceleration()  # a pre-patch: before Megatron
import megatron.core  # noqa: E402,F401  (the real adaptor imports what it patches)

_apply_patches()
_record({"event": "adaptor_done"})

if mindspeed.has_repatch():

    def repatch(args):
        _record({"event": "repatch", "options": dict(args)})
        _remove_patches()
        full_args = get_full_args()
        for key, value in args.items():
            setattr(full_args, key, value)
        _apply_patches()

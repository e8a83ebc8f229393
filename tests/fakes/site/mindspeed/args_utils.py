"""TEST DOUBLE of mindspeed/args_utils.py (MindSpeed >= 2.2; 2.1 keeps the same logic in the adaptor).

``get_mindspeed_args()``: MindSpeed's own argparse namespace, parsed once per process from the
process's ``sys.argv`` with ``parse_known_args`` (unknown ``--foo-bar x`` become ``foo_bar='x'``,
a bare ``--flag`` becomes True) and cached, so every later caller and every ``repatch`` in the
process share one object. Only a handful of MindSpeed's options are registered here (the real
parser registers every feature's options); their defaults match the real ones.
``get_full_args()``: Megatron-training's global args when initialised, else the cached namespace
above (verl never initialises Megatron-training's args).
"""

import argparse

_MINDSPEED_ARGS = None


def _parser():
    parser = argparse.ArgumentParser(description="MindSpeed Arguments (test double)", allow_abbrev=False)
    # features_manager/megatron_basic/megatron_basic.py and context-parallel feature defaults
    parser.add_argument("--use-fused-rmsnorm", action="store_true")
    parser.add_argument("--use-fused-swiglu", action="store_true")
    parser.add_argument("--optimization-level", type=int, default=2)
    parser.add_argument("--context-parallel-algo", type=str, default="megatron_cp_algo")
    return parser


def _add_unknown(found: dict, unknown: list) -> dict:
    key, values = None, []

    def flush():
        if key is not None:
            found[key[2:].replace("-", "_")] = True if not values else values[0] if len(values) == 1 else list(values)

    for item in unknown:
        if item.startswith("-"):
            flush()
            key, _, value = item.partition("=")
            values = [value] if "=" in item else []
        else:
            values.append(item)
    flush()
    return found


def get_mindspeed_args(get_defaults=False):
    global _MINDSPEED_ARGS
    if not get_defaults and _MINDSPEED_ARGS is not None:
        return _MINDSPEED_ARGS
    parsed, unknown = _parser().parse_known_args([] if get_defaults else None)
    args = argparse.Namespace(**_add_unknown(vars(parsed), unknown))
    if not get_defaults:
        _MINDSPEED_ARGS = args
    return args


def get_full_args():
    try:
        from megatron.training.global_vars import get_args
    except ImportError:  # megatron-core wheels have no megatron.training
        return get_mindspeed_args()
    try:
        found = get_args()
    except AssertionError as exc:
        if "not initialized" not in str(exc):
            raise
        found = None
    return get_mindspeed_args() if found is None else found

"""TEST DOUBLE of mindspeed/core/dist_checkpointing/checkpoint_adaptor.py (MindSpeed 26.0.0+).

Models, in the Ascend/MindSpeed repository (26.0.0 branches): that file's
``validate_global_plan_wrapper`` and ``validate_non_overlapping_shards_metadata_wrapper``.

The two wrappers MindSpeed's ``--ckpt-acceleration`` feature
(``features_manager/ckpt_acceleration/ckpt_acceleration.py``) puts on torch's checkpoint validators:
``functools.wraps`` of whatever is installed at that moment, and a body that checks nothing
(the plan check answers True, the shard check returns None).
Source: https://github.com/Ascend/MindSpeed/blob/60b09d7b29c929bd8230cb7c99ad66356fdc490f/mindspeed/core/dist_checkpointing/checkpoint_adaptor.py
(the commit that added it, 2025-12-29; unchanged on master since). Compared with this double by
tests/upstream/test_mindspeed_contract.py::test_ckpt_acceleration_stubs_match_the_checkout given a MindSpeed
checkout (VERL_ASCEND_MINDSPEED_SRC): both wrappers run on the same function; passes on master 028de58c.
"""

import functools


def validate_global_plan_wrapper(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return True

    return wrapper


def validate_non_overlapping_shards_metadata_wrapper(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return None

    return wrapper

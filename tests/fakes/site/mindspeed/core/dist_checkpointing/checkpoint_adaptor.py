"""TEST DOUBLE of mindspeed/core/dist_checkpointing/checkpoint_adaptor.py (MindSpeed 26.0.0+).

Models, in the Ascend/MindSpeed repository (26.0.0 branches): that file's
``validate_global_plan_wrapper`` and ``validate_non_overlapping_shards_metadata_wrapper``.

The two wrappers MindSpeed's ``--ckpt-acceleration`` feature
(``features_manager/ckpt_acceleration/ckpt_acceleration.py``) puts on torch's checkpoint validators:
``functools.wraps`` of whatever is installed at that moment, and a body that checks nothing
(the plan check answers True, the shard check returns None).
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

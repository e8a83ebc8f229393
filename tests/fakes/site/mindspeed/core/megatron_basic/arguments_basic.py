"""TEST DOUBLE of mindspeed/core/megatron_basic/arguments_basic.py (MindSpeed >= 2.2).

Models, in the Ascend/MindSpeed repository (commit 8b14ec4c and later branches): that file's
``transformer_config_init_wrapper`` and ``transformer_config_init_subclass``.

``transformer_config_init_wrapper(init)``: what MindSpeed installs on ``TransformerConfig.__init__``
and ``MLATransformerConfig.__init__``. Each build merges the process-global MindSpeed args
(``get_full_args()``) under the caller's keywords; names in the config class's signature go to the
original ``__init__``, every other name becomes a ``field(init=False)`` of a ``make_dataclass``
subclass named like the class, and is set on the instance. So an unknown key never raises, and
the generated subclass (a ``TransformerConfig`` subclass with a field per MindSpeed option) stays
reachable through ``TransformerConfig.__subclasses__()``.
``transformer_config_init_subclass`` (26.x): a class hook on ``TransformerConfig`` that gives every
subclass created afterwards an annotated class attribute per MindSpeed option it lacks.
Source: https://github.com/Ascend/MindSpeed/blob/3131ff4ffe307bd2ca2b7b2cfaab0a5c3443ef35/mindspeed/core/megatron_basic/arguments_basic.py
(last change to the file on the master branch read, 2026-03-05); compared with this double by
tests/upstream/test_mindspeed_contract.py given a MindSpeed checkout (VERL_ASCEND_MINDSPEED_SRC).
"""

import dataclasses
import functools
import inspect

from mindspeed.args_utils import get_full_args


def transformer_config_init_wrapper(init):
    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        merged = dict(vars(get_full_args()))
        merged.update(kwargs)
        accepted = inspect.signature(type(self)).parameters
        known = {k: v for k, v in merged.items() if k in accepted}
        extra = {k: v for k, v in merged.items() if k not in accepted and not hasattr(self, k)}
        extra_fields = [(k, type(v), dataclasses.field(init=False)) for k, v in extra.items()]
        self.__class__ = dataclasses.make_dataclass(type(self).__name__, extra_fields, bases=(type(self),))
        for key, value in extra.items():
            setattr(self, key, value)
        init(self, *args, **known)

    return wrapper


def transformer_config_init_subclass(cls, **kwargs):
    merged = dict(vars(get_full_args()))
    merged.update(kwargs)
    accepted = inspect.signature(cls).parameters
    for key, value in merged.items():
        if key in accepted or hasattr(cls, key):
            continue
        cls.__annotations__[key] = type(value)
        if isinstance(value, (list, dict, set, bytearray)):
            value = dataclasses.field(default_factory=lambda value=value: value)
        setattr(cls, key, value)

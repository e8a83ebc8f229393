"""TEST DOUBLE of MindSpeed (Ascend's Megatron acceleration library). Never shipped.

``FAKE_MINDSPEED_VERSION`` picks the generation this double behaves as (default ``2.2``):

- ``2.1`` (MindSpeed 2.0.0 / 2.1.0 branches): ``megatron_adaptor`` has no ``repatch`` and leaves
  ``TransformerConfig.__init__`` alone, so an unknown key there is Megatron's own TypeError.
- ``2.2`` (2.2.0_core_r0.12.1 and later: 2.3.0, 26.x, core_r0.16.0, master; added together in
  MindSpeed commit 8b14ec4c): ``repatch`` exists and an always-applied wrapper on
  ``TransformerConfig.__init__`` / ``MLATransformerConfig.__init__`` turns unknown keys into
  attributes of a generated subclass.
- ``26`` (26.0.0 and later): as ``2.2``, plus MindSpeed's ``TransformerConfig.__init_subclass__``
  hook, which gives every config subclass defined afterwards a class attribute per MindSpeed option.

Modules and the real files they model:
``megatron_adaptor``  -> ``mindspeed/megatron_adaptor.py`` (import side effects, ``repatch``)
``args_utils``        -> ``mindspeed/args_utils.py`` (``get_mindspeed_args``, ``get_full_args``)
``core/megatron_basic/arguments_basic`` -> ``mindspeed/core/megatron_basic/arguments_basic.py``
                        (``transformer_config_init_wrapper``, ``transformer_config_init_subclass``)
``tests/upstream/test_mindspeed_contract.py`` checks these against a real MindSpeed checkout.
"""

import os

GENERATIONS = ("2.1", "2.2", "26")
GENERATION = os.environ.get("FAKE_MINDSPEED_VERSION", "2.2")
if GENERATION not in GENERATIONS:
    raise ImportError(f"FAKE_MINDSPEED_VERSION={GENERATION!r}: use one of {', '.join(GENERATIONS)}")

__version__ = {"2.1": "2.1.0", "2.2": "2.2.0", "26": "26.0.0"}[GENERATION] + "+fake"


def has_repatch() -> bool:
    return GENERATION != "2.1"

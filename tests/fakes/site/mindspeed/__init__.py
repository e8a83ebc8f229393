"""TEST DOUBLE of MindSpeed (Ascend's Megatron acceleration library). Never shipped.

Only ``mindspeed.megatron_adaptor`` exists: it records when it was imported relative to Megatron and
every ``repatch`` call, so tests can check the order and the options verl-ascend hands over.
"""

__version__ = "0.0.0+fake"

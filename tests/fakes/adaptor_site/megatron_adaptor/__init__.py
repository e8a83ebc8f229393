"""Double of MegatronAdaptor's ``megatron_adaptor`` (the MegatronAdaptor + TransformerEngine-NPU stack).

What is public of it: one line, ``import megatron_adaptor``, placed before MCore is initialised, applies its
Ascend patches to Megatron (verl-project/verl#7142, modelscope/ms-swift#10087). So the double imports
``megatron.core`` while it is itself being imported (its name is in ``sys.modules`` by then, as for any
module) and records what it found: whether MindSpeed's adaptor was already there.
"""

import sys

events = [{"event": "import", "mindspeed_adaptor_before": "mindspeed.megatron_adaptor" in sys.modules,
           "megatron_before": "megatron.core" in sys.modules}]

import megatron.core  # noqa: E402,F401  (the adaptor patches Megatron at import)

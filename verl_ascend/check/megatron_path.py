"""The `megatron_path` rule: MindSpeed-only transformer options where MegatronAdaptor, not MindSpeed, runs Megatron.

A Megatron recipe written for MindSpeed passes MindSpeed's own switches through
``override_transformer_config`` (``use_flash_attn``, ``use_fused_rmsnorm``, ...): MindSpeed wraps
megatron-core's ``TransformerConfig`` so that keys it does not define become attributes. The other
Megatron-on-NPU stack, MegatronAdaptor + TransformerEngine-NPU, has no such wrapper in its users' account:
ms-swift's move to it (modelscope/ms-swift#10087) dropped ``use_flash_attn`` for megatron-core's own
``attention_backend``. On plain megatron-core the keys raise ``TypeError: TransformerConfig.__init__() got an
unexpected keyword argument 'use_flash_attn'`` at worker start. So where this environment has MegatronAdaptor
and no MindSpeed (``check`` reads the environment it runs in: the cluster's, when run there), a key of the
recipe that megatron-core's TransformerConfig does not define is named, with megatron-core's way instead.
"""

from verl_ascend.core import megatron_path
from verl_ascend.core.findings import WARNING, finding
from verl_ascend.recipe.layout import ARR, get

ROLES = (f"{ARR}.actor", f"{ARR}.ref", "critic")
SOURCE = "https://github.com/modelscope/ms-swift/pull/10087"


def findings(ctx, facts=None, fields=None) -> list:
    if str(get(ctx.cfg, f"{ARR}.actor.strategy", "")) != "megatron":
        return []
    facts = facts if facts is not None else megatron_path.facts()
    if facts["megatron_adaptor"] is None or facts["mindspeed"] is not None:
        return []
    given = {}
    for role in ROLES:
        for key in (get(ctx.cfg, f"{role}.megatron.override_transformer_config") or {}):
            given.setdefault(str(key), f"{role}.megatron.override_transformer_config.{key}")
    if not given:
        return []
    fields = fields if fields is not None else megatron_path.transformer_config_fields()
    if fields is None:  # megatron-core not importable here: nothing to compare against
        return []
    foreign = sorted(k for k in given if k not in fields)
    if not foreign:
        return []
    keys = tuple(given[k] for k in foreign)
    return [finding("megatron_path", WARNING, keys,
                    f"{', '.join(foreign)}: not fields of megatron-core's TransformerConfig, and this environment runs "
                    "Megatron through MegatronAdaptor without MindSpeed, whose TransformerConfig wrapper is what "
                    "accepts them; plain megatron-core rejects them at worker start (TypeError: unexpected keyword "
                    f"argument '{foreign[0]}')",
                    "drop them (~KEY on the command line), and choose attention with megatron-core's own "
                    f"override_transformer_config.attention_backend as ms-swift's MegatronAdaptor path does ({SOURCE}); "
                    "or install MindSpeed if the recipe is meant for it")]

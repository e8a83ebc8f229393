"""Faults from verl's NPU FAQ (docs/ascend_tutorial/en/faq/faq.rst): the weight-sync bucket, MindSpeed too old for
the model, Megatron checkpoints saved on non-shared storage."""

from .model import VERL_NPU_FAQ, Family, Rule

FAMILIES = {f.id: f for f in (
    Family(
        "weight_bucket_too_small", 22, "A weight is larger than verl's weight-sync bucket",
        "verl sends weights to the rollout in buckets of update_weights_bucket_megabytes (2048 MB by default); one "
        "tensor (an fp32 embedding of a large vocabulary: 151936 x 4096 x 4 B = 2369 MB) does not fit.",
        "Raise the bucket above the largest tensor, rounded up to a power of two: "
        "`actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=4096` (8192 for 72B-class "
        "vocabularies); larger buckets cost NPU memory on every worker.",
        (VERL_NPU_FAQ,),
    ),
    Family(
        "mindspeed_too_old", 23, "MindSpeed too old for this model (missing q/k layernorm weights)",
        "The Megatron model built through MindSpeed has no `q_layernorm` / `k_layernorm` (QK-norm models such as "
        "Qwen3): the installed MindSpeed predates them, so loading the checkpoint looks up a key that was never created.",
        "Install the MindSpeed branch verl's NPU docs name for this Megatron: `2.3.0_core_r0.12.1` "
        "(`git clone -b 2.3.0_core_r0.12.1 https://gitcode.com/Ascend/MindSpeed && pip install -e MindSpeed`) on "
        "every node; `verl-ascend doctor` prints the installed version.",
        (VERL_NPU_FAQ,),
    ),
    Family(
        "ckpt_metadata_missing", 24, "Checkpoint metadata missing on this node (storage not shared)",
        "Megatron / DCP checkpoints write shards on every node but `common.pt`, `.metadata` and `metadata.json` only "
        "on the node that saved them; with per-node disks the other nodes cannot load the step.",
        "Copy the missing files of that step to every node before resuming: `verl-ascend ckpt sync <ckpt dir> "
        "--nodes <node> ...` (`--dry-run` lists what it would copy); `verl-ascend ckpt check <dir>` on each node "
        "confirms; or put `trainer.default_local_dir` on shared storage.",
        (VERL_NPU_FAQ,),
    ),
)}

RULES = (
    Rule("weight_bucket_too_small", ("too large to fit in the bucket", "update_weights_bucket_megabytes"),
         r"too large to fit in the bucket|increase \S*update_weights_bucket_megabytes"),
    Rule("mindspeed_too_old", ("q_layernorm", "k_layernorm"), r"KeyError: .*\b[qk]_layernorm\b"),
    Rule("ckpt_metadata_missing", ("common.pt", ".metadata", "metadata.json"),
         r"(?:FileNotFoundError|No such file or directory|CheckpointingException).*"
         r"(?:\bcommon\.pt\b|/\.metadata\b|\.metadata['\"]?\s*$|\bmetadata\.json\b)"),
)

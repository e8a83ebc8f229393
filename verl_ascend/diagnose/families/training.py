"""Faults from verl's NPU FAQ (docs/ascend_tutorial/en/faq/faq.rst): the weight-sync bucket, MindSpeed too old for
the model, Megatron checkpoints saved on non-shared storage; and a dist checkpoint that lacks a tensor the model loads
(megatron-core's and torch DCP's own messages, which name the tensor)."""

from .model import GH, VERL_NPU_FAQ, Family, Rule

# megatron-core's load planner: KeyError: "<key> from model not in state dict: [<the keys it has>]"; torch DCP's
# default planner: RuntimeError: Missing key in checkpoint state_dict: <key>.
MISSING_TENSOR = r"KeyError: ['\"](\S+) from model not in state dict|Missing key in checkpoint state_dict: (\S+?)\.?\s*$"

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
    Family(
        "ckpt_not_seen_on_resume", 36, "A run started from scratch although an earlier run saved a checkpoint",
        "verl's trainer logged `Training from scratch`: with `trainer.resume_mode=auto` it found no "
        "`latest_checkpointed_iteration.txt` in `trainer.default_local_dir`, though an earlier run in these logs "
        "saved a step there (named in the notes). The tracker is written on the node where the trainer ran at the "
        "save and read on the node where it runs now; Ray places the trainer anew each run, so on per-node disks "
        "the new run often looks on a node that never had it (or the folder was cleaned, or the path differs).",
        "Copy the checkpoint to every node before resuming: `verl-ascend ckpt sync <ckpt dir> --all --nodes <node> "
        "...` (`verl-ascend ckpt check <dir>` on each node confirms); or put `trainer.default_local_dir` on shared "
        "storage; or name the step: `trainer.resume_mode=resume_path trainer.resume_from_path=<dir>/global_step_N`.",
        (VERL_NPU_FAQ,),
    ),
    Family(
        "ckpt_missing_tensor", 33, "The checkpoint lacks a tensor the model loads",
        "A Megatron / torch DCP checkpoint is read through its `.metadata` index: the model asked for a tensor (named "
        "in the headline and the notes) that the index does not list. Either the checkpoint is incomplete (a "
        "conversion or copy that stopped part-way, a save that did not finish) or it was saved from a model with "
        "other layers (another architecture, config or converter version).",
        "If it is a training checkpoint: `verl-ascend ckpt check <trainer.default_local_dir>` on every node says "
        "whether that step's save finished and all its files are there; resume from a complete step. If it is a "
        "converted model (the initial weights): convert it again from the HF model into an empty folder and load "
        "it with the model config it was converted with (same layers, heads, experts, QK norm); a tensor name the "
        "checkpoint never had means the configs differ.",
        (GH + "modelscope/ms-swift/issues/6637", GH + "NVIDIA/Megatron-LM/issues/1032"),
    ),
)}

RULES = (
    Rule("weight_bucket_too_small", ("too large to fit in the bucket", "update_weights_bucket_megabytes"),
         r"too large to fit in the bucket|increase \S*update_weights_bucket_megabytes"),
    # not megatron's missing-tensor KeyError, which lists every key the checkpoint has (q_layernorm ones too)
    Rule("mindspeed_too_old", ("q_layernorm", "k_layernorm"), r"KeyError: .*\b[qk]_layernorm\b",
         unless=r"from model not in state dict"),
    # megatron-core's own words when a dist_ckpt folder has no metadata.json (dist_checkpointing/validation.py)
    Rule("ckpt_metadata_missing", ("is not a distributed checkpoint",),
         r"CheckpointingException: \S+ is not a distributed checkpoint"),
    Rule("ckpt_metadata_missing", ("common.pt", ".metadata", "metadata.json"),
         r"(?:FileNotFoundError|No such file or directory|CheckpointingException).*"
         r"(?:\bcommon\.pt\b|/\.metadata\b|\.metadata['\"]?\s*$|\bmetadata\.json\b)"),
    Rule("ckpt_missing_tensor", ("KeyError", "Missing key in checkpoint state_dict"), MISSING_TENSOR),
)

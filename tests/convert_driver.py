"""Run several conversions in one process (one torchrun launch is expensive on 2 shared cores).

    python convert_driver.py models ROOT           build tiny random HF checkpoints in ROOT/hf/*
    python convert_driver.py run PLAN.json         run verl_ascend.cli.script("convert", argv) per plan entry
                                                   (entries may also build models, read keys, plant)
    python convert_driver.py plant CKPT TENSOR     alter one tensor of a written checkpoint in place

``run`` prints one JSON line (rank 0): [{"name", "rc", "stderr"}...]. Not collected by pytest.
"""

import contextlib
import io
import json
import os
import sys


def build_models(root: str) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    common = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    configs = {
        # Qwen2 small models tie lm_head to the embeddings (Qwen2.5-0.5B does): no lm_head tensor
        "qwen2": transformers.Qwen2Config(tie_word_embeddings=True, **common),
        "qwen3": transformers.Qwen3Config(head_dim=16, tie_word_embeddings=False, **common),
        "qwen3_moe": transformers.Qwen3MoeConfig(
            head_dim=16, tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True, **common),
    }
    paths = {}
    for i, (name, config) in enumerate(configs.items()):
        torch.manual_seed(i)
        model = AutoModelForCausalLM.from_config(config).to(torch.float32)
        with torch.no_grad():  # random norms and biases, so a swapped tensor cannot hide behind ones/zeros
            for pname, p in model.named_parameters():
                if p.dim() == 1:
                    p.normal_(1.0 if "norm" in pname else 0.0, 0.1)
        paths[name] = os.path.join(root, "hf", name)
        model.save_pretrained(paths[name])
    return paths


def run_plan(plan: list) -> list:
    from verl_ascend.cli import script

    results = []
    for entry in plan:
        if "models" in entry:  # build the HF checkpoints in this process: one interpreter start less
            build_models(entry["models"])
            continue
        if "keys" in entry:  # the tensor keys a checkpoint stores
            from torch.distributed.checkpoint import FileSystemReader

            keys = sorted(FileSystemReader(entry["keys"]).read_metadata().state_dict_metadata)
            results.append({"name": entry["name"], "rc": 0, "keys": keys, "stderr": ""})
            continue
        if "plant" in entry:
            plant(*entry["plant"])
            continue
        if "views" in entry:
            results.append({"name": entry["name"], "rc": 0, "stderr": "", **views(entry["views"])})
            continue
        err = io.StringIO()
        with contextlib.redirect_stderr(err), _interrupted(entry.get("interrupt")):
            rc = script("convert", entry["argv"])
        results.append({"name": entry["name"], "rc": rc, "stderr": err.getvalue()[-4000:]})
    return results


@contextlib.contextmanager
def _interrupted(stage):
    """stage "verify": Ctrl-C arrives when the verification starts (the checkpoint is in place)."""
    from verl_ascend.convert import verify as verify_module

    real = verify_module.verify

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    if stage == "verify":
        verify_module.verify = ctrl_c
    try:
        yield
    finally:
        verify_module.verify = real


def plant(ckpt_path: str, tensor: str) -> None:
    """Reload at one rank, add 1 to the first element of ``tensor`` (a state-dict name), re-save elsewhere
    and swap the directories: the checkpoint stays valid, one value differs."""
    import shutil

    import torch
    from megatron.core import dist_checkpointing

    from verl_ascend.convert import hf_source, model, runtime, writer

    with open(os.path.join(ckpt_path, writer.INFO_FILE)) as f:
        info = json.load(f)
    ckpt = hf_source.inspect(info["hf_model_path"])
    runtime.init_distributed("cpu", "gloo")
    runtime.init_model_parallel(1, 1, 1)
    bridge = model.make_bridge(ckpt, model.DTYPES[info["dtype"]])
    gpt = model.build_model(bridge)
    with runtime.cpu_cuda_calls("cpu"):
        gpt.load_state_dict(dist_checkpointing.load(gpt.sharded_state_dict(), ckpt_path), strict=False)
        with torch.no_grad():
            gpt.state_dict(keep_vars=True)[tensor].view(-1)[0] += 1.0
        altered = ckpt_path + ".altered"
        os.makedirs(altered)
        dist_checkpointing.save(gpt.sharded_state_dict(), altered, async_sharded_save=False)
    shutil.copy(os.path.join(ckpt_path, writer.INFO_FILE), altered)
    shutil.rmtree(ckpt_path)
    os.rename(altered, ckpt_path)
    runtime.destroy_model_parallel()


def views(hf_path: str) -> dict:
    """One rank's save state as Megatron builds it vs as writer.sharded_state_without_views gives it."""
    import torch
    from megatron.core.dist_checkpointing.dict_utils import nested_values
    from megatron.core.dist_checkpointing.mapping import ShardedTensor, apply_factories

    from verl_ascend.convert import hf_source, model, runtime, weights, writer

    def shards(sharded):
        return {(t.key, t.global_offset): t.data for t in nested_values(sharded) if isinstance(t, ShardedTensor)}

    ckpt = hf_source.inspect(hf_path)
    runtime.init_distributed("cpu", "gloo")
    runtime.init_model_parallel(1, 1, 1)
    bridge = model.make_bridge(ckpt, torch.float32)
    gpt = model.build_empty_model(bridge)
    weights.load_hf_into(gpt, bridge, ckpt, lambda items: items)
    stock = gpt.sharded_state_dict()
    apply_factories(stock)
    stock = shards(stock)
    stock_views = {k for k, t in stock.items() if writer._is_view(t)}
    expected = {k: t.clone() for k, t in stock.items()}
    param_bytes = sum(p.numel() * p.element_size() for p in gpt.parameters())
    after = shards(writer.sharded_state_without_views(gpt))
    runtime.destroy_model_parallel()
    return {
        "stock_views": sorted(f"{k[0]}@{k[1]}" for k in stock_views),
        "views_after": sorted(f"{k[0]}@{k[1]}" for k, t in after.items() if writer._is_view(t)),
        "differ": sorted(f"{k[0]}@{k[1]}" for k in expected if not torch.equal(expected[k], after[k])),
        "emptied_params": sum(1 for p in gpt.parameters() if p.numel() == 0),
        "param_bytes_before": param_bytes,
        "param_bytes_after": sum(p.numel() * p.element_size() for p in gpt.parameters()),
        "view_bytes": sum(stock[k].numel() * stock[k].element_size() for k in stock_views),
    }


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "models":
        print(json.dumps(build_models(sys.argv[2])))
    elif command == "run":
        with open(sys.argv[2]) as f:
            out = run_plan(json.load(f))
        if os.environ.get("RANK", "0") == "0":
            print(json.dumps(out))
    elif command == "plant":
        plant(sys.argv[2], sys.argv[3])
        print(json.dumps({"planted": sys.argv[3]}))

"""The hf rollout takes the per-expert weights of the sync (mbridge's export, HF checkpoint names) into a model
that stacks its experts (transformers 5) exactly as from_pretrained does."""

import pytest

pytest.importorskip("verl.workers.rollout.replica")  # hf_rollout plugs into verl 0.9's rollout classes


def test_fused_experts_equal_what_from_pretrained_builds(tmp_path):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    from verl_ascend.rehearse.loop.hf_rollout import fuse_experts

    config = AutoConfig.for_model("qwen3_moe", num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                  num_key_value_heads=1, head_dim=16, intermediate_size=64, moe_intermediate_size=16,
                                  num_experts=4, num_experts_per_tok=2, vocab_size=64, decoder_sparse_step=1,
                                  mlp_only_layers=[])
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(str(tmp_path))
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path))
    raw = load_file(str(tmp_path / "model.safetensors"))
    assert any(".experts.3.up_proj.weight" in name for name in raw), sorted(raw)[:8]  # per-expert on disk
    fused = fuse_experts(raw, model.state_dict())
    target = model.state_dict()
    assert set(fused) == set(target)
    for name, tensor in target.items():
        assert torch.equal(fused[name].to(tensor.dtype), tensor), name
    part = dict(raw)
    part.pop(next(n for n in raw if ".experts.1.gate_proj.weight" in n))
    if any(name.endswith("gate_up_proj") for name in target):  # stacked experts: a missing one is named
        with pytest.raises(RuntimeError, match="lacks"):
            fuse_experts(part, target)

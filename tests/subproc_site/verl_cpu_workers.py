"""verl's Megatron workers built on CPU just far enough to make their TransformerConfig.

Imported by the fresh interpreters of tests/process/test_mindspeed.py and tests/upstream/test_upstream_patches.py
(this folder is put on their PYTHONPATH). Nothing here imports verl or Megatron at import time:
those tests control the import order (MindSpeed's adaptor must come before Megatron).
"""

import os
import tempfile
import types

import torch

TOKENIZER = types.SimpleNamespace(bos_token_id=1, eos_token_id=2, pad_token_id=0)


def tiny_qwen2():
    from transformers import Qwen2Config

    return Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=256, max_position_embeddings=128,
                       architectures=["Qwen2ForCausalLM"])


def init_distributed():
    """A one-rank gloo group on a free port, as torchrun would set it up. The port comes from below the kernel's
    ephemeral range, as every test listener's does (tests/subproc.py): one from bind(0) can be taken by an
    outgoing connection of a test beside this one before the TCPStore binds it."""
    from verl_ascend.rehearse.run.cluster import free_ports

    port = free_ports("127.0.0.1", 1)[0]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)


def engine_with_tf_config(hf_config, options):
    """verl >= 0.8: a MindspeedEngineWithLMHead without optimiser or model, through verl's
    ``_init_device_mesh`` (where it calls MindSpeed's repatch) and ``_build_tf_config``."""
    from verl.workers.config import McoreEngineConfig
    from verl.workers.engine import MindspeedEngineWithLMHead

    config = McoreEngineConfig(use_mbridge=True, vanilla_mbridge=True, override_transformer_config=dict(options))
    engine = MindspeedEngineWithLMHead.__new__(MindspeedEngineWithLMHead)
    engine.engine_config = config
    engine.model_config = types.SimpleNamespace(
        hf_config=hf_config, model_type="language_model", local_path="", share_embeddings_and_output_weights=False,
        mtp=types.SimpleNamespace(enable=False), trust_remote_code=False)
    engine.enable_routing_replay, engine._qat_enabled = False, False
    engine._init_device_mesh()
    engine._build_tf_config()
    return engine, config


def saved_model_dir(hf_config) -> str:
    model_dir = tempfile.mkdtemp()
    hf_config.save_pretrained(model_dir)
    return model_dir


def legacy_worker(cls, model_dir, options):
    """verl <= 0.7: a Megatron worker (``__init__`` minus torch.distributed and Ray) through
    ``_init_hf_config_and_tf_config``."""
    import inspect

    from omegaconf import OmegaConf

    worker = cls.__new__(cls)
    worker.config, worker._rank = OmegaConf.create({"model": {}}), 0
    params = inspect.signature(cls._init_hf_config_and_tf_config).parameters
    if "megatron_config" in params:  # verl 0.7: the mbridge switches come in the actor's megatron config
        bridge = {"megatron_config": OmegaConf.create({"use_mbridge": True, "vanilla_mbridge": True})}
    else:  # verl 0.6
        bridge = {"use_mbridge": True}
    worker._init_hf_config_and_tf_config(model_dir, TOKENIZER, torch.bfloat16, {}, dict(options),
                                         trust_remote_code=False, **bridge)
    return worker

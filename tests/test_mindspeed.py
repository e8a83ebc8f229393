"""MindSpeed in verl's Megatron workers: adaptor before Megatron, options split between the two.

Fresh interpreters with the Ascend doubles (torch_npu, and a ``mindspeed`` whose adaptor records
the import order and every ``repatch`` call), the real megatron-core, mbridge and the installed verl.
The worker setup path runs as far as it can on CPU: engine workers (verl >= 0.8) through
``_init_device_mesh`` and ``_build_tf_config``; legacy workers (verl <= 0.7) through
``_init_hf_config_and_tf_config``. In both, a verl module that imports Megatron at its top
(``verl.utils.megatron_utils``) is imported first, as the trainer and checkpoint code do.
After the patched run, the same process puts verl's own method back to show the stock failure.
"""

import importlib.util
from pathlib import Path

import pytest

from subproc import clean_env, last_json, run_python

OPTIONS = {
    "use_flash_attn": True,  # seed 003's Qwen3-235B recipe
    "use_fused_rmsnorm": True,
    "use_fused_swiglu": True,
    "recompute_granularity": "full",
    "recompute_method": "uniform",
    "recompute_num_layers": 1,
}
MINDSPEED_KEYS = {"use_flash_attn", "use_fused_rmsnorm", "use_fused_swiglu"}


def _verl_has(relative: str) -> bool:
    spec = importlib.util.find_spec("verl")  # locates the package without importing it
    return spec is not None and (Path(spec.origin).parent / relative).exists()


PRELUDE = r"""
import json, os, socket, sys, tempfile, types
OPTIONS = json.loads(sys.argv[1])
import torch
import verl
import verl.utils.megatron_utils  # imports megatron.core at its top
import mindspeed.megatron_adaptor as adaptor
from verl_ascend import registry
from verl_ascend.patches import _util
from transformers import Qwen2Config
HF = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=256, max_position_embeddings=128,
                 architectures=["Qwen2ForCausalLM"])

def init_distributed():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)

def report(tf_config, **more):
    rows = {r["target"]: r["state"] for r in registry.summarize("mindspeed")["targets"]}
    return {"order": adaptor.events[0], "repatch": [e["options"] for e in adaptor.events if e["event"] == "repatch"],
            "tf_type": type(tf_config).__name__,
            "tf_has": {k: hasattr(tf_config, k) for k in OPTIONS},
            "tf_recompute": getattr(tf_config, "recompute_granularity", None), "rows": rows, **more}

def stock(call):
    try:
        call()
        return "built"
    except TypeError as exc:
        return str(exc)
"""

ENGINE = PRELUDE + r"""
from verl.workers.engine import MindspeedEngineWithLMHead
from verl.workers.engine.megatron import transformer_impl
from verl.workers.config import McoreEngineConfig
init_distributed()
config = McoreEngineConfig(use_mbridge=True, vanilla_mbridge=True, override_transformer_config=dict(OPTIONS))
engine = MindspeedEngineWithLMHead.__new__(MindspeedEngineWithLMHead)  # __init__ minus optimiser/model
engine.engine_config = config
engine.model_config = types.SimpleNamespace(hf_config=HF, model_type="language_model", local_path="",
    share_embeddings_and_output_weights=False, mtp=types.SimpleNamespace(enable=False), trust_remote_code=False)
engine.enable_routing_replay, engine._qat_enabled = False, False
engine._init_device_mesh()  # verl: repatch(override_transformer_config), then the parallel groups
engine._build_tf_config()
out = report(engine.tf_config, options_after=sorted(config.override_transformer_config))
_util.unwrap(transformer_impl.MegatronEngine, "_build_tf_config", "mindspeed")
out["stock"] = stock(engine._build_tf_config)
print(json.dumps(out, default=str))
"""

LEGACY = PRELUDE + r"""
from omegaconf import OmegaConf
from verl.workers import megatron_workers as workers
from megatron.core import parallel_state
init_distributed()
parallel_state.initialize_model_parallel()  # what the workers' __init__ does
model_dir = tempfile.mkdtemp()
HF.save_pretrained(model_dir)
tokenizer = types.SimpleNamespace(bos_token_id=1, eos_token_id=2, pad_token_id=0)

def build(cls, options):
    worker = cls.__new__(cls)  # __init__ minus torch.distributed and Ray
    worker.config, worker._rank = OpenConf, 0
    worker._init_hf_config_and_tf_config(model_dir, tokenizer, torch.bfloat16, {}, dict(options), False, True)
    return worker

OpenConf = OmegaConf.create({"model": {}})
critic = build(workers.CriticWorker, OPTIONS)  # verl 0.6 never calls repatch for the critic
after_critic = len([e for e in adaptor.events if e["event"] == "repatch"])
# ActorRolloutRefWorker.__init__ calls the module's repatch with the actor's options itself.
actor_options = dict(OPTIONS, use_fused_rotary_pos_emb=True)
workers.repatch(dict(actor_options))
actor = build(workers.ActorRolloutRefWorker, actor_options)
out = report(critic.tf_config, repatch_after_critic=after_critic, actor_tf_has_rope=hasattr(actor.tf_config, "use_fused_rotary_pos_emb"))
_util.unwrap(workers.MegatronWorker, "_init_hf_config_and_tf_config", "mindspeed")
out["stock"] = stock(lambda: build(workers.CriticWorker, OPTIONS))
print(json.dumps(out, default=str))
"""


def run(script):
    import json

    proc = run_python(script, env=clean_env(fake_npu=True), timeout=300, args=(json.dumps(OPTIONS),))
    return last_json(proc)


def check_common(out):
    # Adaptor first: it ran while verl.utils.megatron_utils was importing Megatron, before any of it.
    assert out["order"]["megatron_imported_before"] == []
    assert "verl.utils.megatron_utils" in out["order"]["verl_modules_loaded"]
    assert out["rows"]["megatron"] == "applied"
    # TransformerConfig built from the Megatron fields only, and they took effect.
    assert out["tf_type"].endswith("TransformerConfig")
    assert not any(out["tf_has"][k] for k in MINDSPEED_KEYS)
    assert out["tf_recompute"] == "full"
    # Stock verl hands the MindSpeed keys to TransformerConfig through mbridge.
    assert "unexpected keyword argument" in out["stock"] and "use_" in out["stock"]


@pytest.mark.skipif(not _verl_has("workers/engine/mindspeed/transformer_impl.py") or _verl_has("workers/megatron_workers.py"),
                    reason="engine workers are verl's Megatron path from 0.8")
def test_engine_worker_setup_path():
    out = run(ENGINE)
    check_common(out)
    # verl's MindspeedEngine passes the whole dict to repatch itself: once, MindSpeed keys included.
    assert len(out["repatch"]) == 1 and MINDSPEED_KEYS <= set(out["repatch"][0])
    assert out["rows"]["verl.workers.engine.mindspeed.transformer_impl"] == "not applicable"
    assert out["rows"]["verl.workers.engine.megatron.transformer_impl"] == "applied"
    assert MINDSPEED_KEYS <= set(out["options_after"])  # put back for verl's later readers


@pytest.mark.skipif(not _verl_has("workers/megatron_workers.py"), reason="legacy Megatron workers exist up to verl 0.7")
def test_legacy_worker_setup_path():
    out = run(LEGACY)
    check_common(out)
    assert out["rows"]["verl.workers.megatron_workers"] == "applied"
    # The critic's options reached repatch (verl 0.6 never does that); the actor's call by verl is
    # not repeated, and its extra MindSpeed key stayed out of TransformerConfig too.
    assert out["repatch_after_critic"] == 1
    assert MINDSPEED_KEYS <= set(out["repatch"][0])
    assert len(out["repatch"]) == 2 and out["repatch"][1].get("use_fused_rotary_pos_emb") is True
    assert out["actor_tf_has_rope"] is False

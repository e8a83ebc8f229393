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
import os
from pathlib import Path

import pytest

from subproc import SUBPROC_SITE, clean_env, last_json, run_python

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
import json, sys
OPTIONS = json.loads(sys.argv[1])
import torch
import verl
import verl.utils.megatron_utils  # imports megatron.core at its top
import mindspeed.megatron_adaptor as adaptor
from verl_ascend import registry
from verl_ascend.patches import _util
from verl_cpu_workers import engine_with_tf_config, init_distributed, legacy_worker, saved_model_dir, tiny_qwen2
HF = tiny_qwen2()

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
from verl.workers.engine.megatron import transformer_impl
init_distributed()
engine, config = engine_with_tf_config(HF, OPTIONS)  # verl: repatch(override_transformer_config), then groups
out = report(engine.tf_config, options_after=sorted(config.override_transformer_config))
_util.unwrap(transformer_impl.MegatronEngine, "_build_tf_config", "mindspeed")
out["stock"] = stock(engine._build_tf_config)
print(json.dumps(out, default=str))
"""

LEGACY = PRELUDE + r"""
from verl.workers import megatron_workers as workers
from megatron.core import parallel_state
init_distributed()
parallel_state.initialize_model_parallel()  # what the workers' __init__ does
model_dir = saved_model_dir(HF)
critic = legacy_worker(workers.CriticWorker, model_dir, OPTIONS)  # verl 0.6 never calls repatch for the critic
after_critic = len([e for e in adaptor.events if e["event"] == "repatch"])
# ActorRolloutRefWorker.__init__ calls the module's repatch with the actor's options itself.
actor_options = dict(OPTIONS, use_fused_rotary_pos_emb=True)
workers.repatch(dict(actor_options))
actor = legacy_worker(workers.ActorRolloutRefWorker, model_dir, actor_options)
out = report(critic.tf_config, repatch_after_critic=after_critic, actor_tf_has_rope=hasattr(actor.tf_config, "use_fused_rotary_pos_emb"))
_util.unwrap(workers.MegatronWorker, "_init_hf_config_and_tf_config", "mindspeed")
out["stock"] = stock(lambda: legacy_worker(workers.CriticWorker, model_dir, OPTIONS))
print(json.dumps(out, default=str))
"""


def run(script):
    import json

    env = clean_env(fake_npu=True)
    env["PYTHONPATH"] += os.pathsep + str(SUBPROC_SITE)
    proc = run_python(script, env=env, timeout=300, args=(json.dumps(OPTIONS),))
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

"""MindSpeed in verl's Megatron workers, per MindSpeed generation.

Fresh interpreters with the Ascend doubles (torch_npu; a ``mindspeed`` whose generation comes from
``FAKE_MINDSPEED_VERSION``: ``2.2`` has ``repatch`` and the TransformerConfig init wrapper, ``2.1``
has neither; see tests/fakes/site/mindspeed and tests/upstream/test_mindspeed_contract.py), the real
megatron-core, mbridge and the installed verl. The worker setup path runs as far as it can on CPU:
engine workers (verl >= 0.8) through ``_init_device_mesh`` and ``_build_tf_config``; legacy workers
(verl <= 0.7) through ``_init_hf_config_and_tf_config``. In both, a verl module that imports
Megatron at its top (``verl.utils.megatron_utils``) is imported first, as the trainer and
checkpoint code do. After the patched run, the same process puts verl's own method back to show
what stock verl does with the same double.
"""

import importlib.util
import json
import os
from pathlib import Path

import pytest
from subproc import SUBPROC_SITE, clean_env, last_json, run_python

OPTIONS = {
    "use_flash_attn": True,  # verl's NPU CI and MindSpeed-RL's docs pass this one
    "use_fused_rmsnorm": True,
    "use_fused_swiglu": True,
    "recompute_granularity": "full",
    "recompute_method": "uniform",
    "recompute_num_layers": 1,
}
MINDSPEED_KEYS = {"use_flash_attn", "use_fused_rmsnorm", "use_fused_swiglu"}
# a second Megatron model in the same process (reward model beside the critic): the same MindSpeed
# keys as the first (after whose build MindSpeed's generated config subclass has a field for each), other values
SECOND = {"use_flash_attn": False, "use_fused_rmsnorm": False, "recompute_granularity": "full",
          "recompute_method": "block", "recompute_num_layers": 1}


def _verl_has(relative: str) -> bool:
    spec = importlib.util.find_spec("verl")  # locates the package without importing it
    return spec is not None and (Path(spec.origin).parent / relative).exists()


ENGINE_PATH = _verl_has("workers/engine/mindspeed/transformer_impl.py") and not _verl_has("workers/megatron_workers.py")
LEGACY_PATH = _verl_has("workers/megatron_workers.py")

PRELUDE = r"""
import json, sys, traceback
OPTIONS = json.loads(sys.argv[1])
SECOND = json.loads(sys.argv[2])
import torch
import verl
import verl.utils.megatron_utils  # imports megatron.core at its top
import mindspeed.megatron_adaptor as adaptor
import mindspeed.args_utils
from verl_ascend.core import marks as _util, registry
from verl_cpu_workers import engine_with_tf_config, init_distributed, legacy_worker, saved_model_dir, tiny_qwen2
HF = tiny_qwen2()

def repatches():
    return [e["options"] for e in adaptor.events if e["event"] == "repatch"]

def described(tf_config):
    return {"type": type(tf_config).__name__, "num_layers": tf_config.num_layers, "hidden_size": tf_config.hidden_size,
            "recompute": [getattr(tf_config, k, None) for k in ("recompute_granularity", "recompute_method", "recompute_num_layers")],
            "has": {k: getattr(tf_config, k, None) for k in ("use_flash_attn", "use_fused_rmsnorm", "use_fused_swiglu", "use_fused_rotary_pos_emb")}}

def attempt(call):
    try:
        return {"ok": described(call())}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}

def report(**more):
    rows = {r["target"]: [r["state"], r.get("detail") or r.get("reason") or ""] for r in registry.summarize("mindspeed")["targets"]}
    args = vars(mindspeed.args_utils.get_full_args())
    return {"order": adaptor.events[0], "repatch": repatches(), "rows": rows,
            "global_args": {k: args.get(k) for k in ("use_flash_attn", "use_fused_rmsnorm")}, **more}
"""

ENGINE = PRELUDE + r"""
from verl.workers.engine.megatron import transformer_impl
init_distributed()
def patched():
    engine, config = engine_with_tf_config(HF, OPTIONS)  # verl: repatch(override_transformer_config), then groups
    patched.options_after = sorted(config.override_transformer_config)
    return engine.tf_config
first = attempt(patched)
out = report(first=first, options_after=getattr(patched, "options_after", None))
_util.unwrap(transformer_impl.MegatronEngine, "_build_tf_config", "mindspeed")
out["stock"] = attempt(lambda: engine_with_tf_config(HF, OPTIONS)[0].tf_config)
print(json.dumps(out, default=str))
"""

LEGACY = PRELUDE + r"""
from verl.workers import megatron_workers as workers
from megatron.core import parallel_state
init_distributed()
parallel_state.initialize_model_parallel()  # what the workers' __init__ does
model_dir = saved_model_dir(HF)
first = attempt(lambda: legacy_worker(workers.CriticWorker, model_dir, OPTIONS).tf_config)  # verl never repatches for it
after_first = len(repatches())
second = attempt(lambda: legacy_worker(workers.CriticWorker, model_dir, SECOND).tf_config)  # a colocated second model
after_second = len(repatches())
out = report(first=first, second=second, after_first=after_first, after_second=after_second)
if getattr(workers, "repatch", None) is not None:  # ActorRolloutRefWorker.__init__ calls it with the actor's options
    actor_options = dict(OPTIONS, use_fused_swiglu=False)
    workers.repatch(dict(actor_options))
    before_actor = len(repatches())
    out["actor"] = attempt(lambda: legacy_worker(workers.ActorRolloutRefWorker, model_dir, actor_options).tf_config)
    out["actor_repatches"] = len(repatches()) - before_actor
_util.unwrap(workers.MegatronWorker, "_init_hf_config_and_tf_config", "mindspeed")
out["stock"] = attempt(lambda: legacy_worker(workers.CriticWorker, model_dir, OPTIONS).tf_config)
print(json.dumps(out, default=str))
"""


def run(script, generation):
    env = clean_env(fake_npu=True, FAKE_MINDSPEED_VERSION=generation)
    env["PYTHONPATH"] += os.pathsep + str(SUBPROC_SITE)
    proc = run_python(script, env=env, timeout=300, args=(json.dumps(OPTIONS), json.dumps(SECOND)))
    out = last_json(proc)
    out["stderr"] = proc.stderr
    return out


def check_adaptor_first(out):
    # Adaptor first: it ran while verl.utils.megatron_utils was importing Megatron, before any of it.
    assert out["order"]["megatron_imported_before"] == []
    assert "verl.utils.megatron_utils" in out["order"]["verl_modules_loaded"]
    assert out["rows"]["megatron"][0] == "applied"


def megatron_values_intact(built):
    assert built["num_layers"] == 2 and built["hidden_size"] == 64  # from the HF config
    assert built["recompute"] == ["full", "uniform", 1]  # from override_transformer_config


def check_old_generation(out):
    """MindSpeed 2.0/2.1: no traceback; one WARNING naming the dropped keys and the version that takes them."""
    assert "ok" in out["first"], out["first"]
    megatron_values_intact(out["first"]["ok"])
    assert out["repatch"] == []
    warnings = [line for line in out["stderr"].splitlines() if "WARNING" in line and "use_flash_attn" in line]
    assert len(warnings) == 1 and "dropped" in warnings[0], out["stderr"]
    assert all(key in warnings[0] for key in MINDSPEED_KEYS) and "2.2.0" in warnings[0]
    assert "Traceback" not in out["stderr"]
    # stock verl with the same MindSpeed: Megatron's own TypeError, which names neither cause nor fix
    assert "unexpected keyword argument" in out["stock"]["error"]


@pytest.mark.skipif(not ENGINE_PATH, reason="engine workers are verl's Megatron path from 0.8")
def test_engine_path_mindspeed_2_2_gets_every_option():
    out = run(ENGINE, "2.2")
    check_adaptor_first(out)
    assert "ok" in out["first"], out["first"]
    built = out["first"]["ok"]
    # verl's MindspeedEngine handed the options to repatch in this process: MindSpeed's global args hold them
    assert len(out["repatch"]) == 1 and out["repatch"][0]["use_flash_attn"] is True
    assert out["global_args"]["use_flash_attn"] is True
    # nothing hidden from MindSpeed's TransformerConfig wrapper, and Megatron's values intact
    assert all(built["has"][k] is True for k in MINDSPEED_KEYS)
    megatron_values_intact(built)
    assert out["rows"]["verl.workers.engine.megatron.transformer_impl"][0] == "not applicable"
    assert "2.2+" in out["rows"]["verl.workers.engine.megatron.transformer_impl"][1]
    assert out["rows"]["verl.workers.engine.mindspeed.transformer_impl"][0] == "not applicable"
    assert MINDSPEED_KEYS <= set(out["options_after"])
    # stock verl builds too with this MindSpeed (its wrapper takes the keys): nothing for the split to fix
    assert out["stock"]["ok"] == built


@pytest.mark.skipif(not ENGINE_PATH, reason="engine workers are verl's Megatron path from 0.8")
def test_engine_path_mindspeed_2_1_warns_and_builds():
    out = run(ENGINE, "2.1")
    check_adaptor_first(out)
    check_old_generation(out)
    assert not any(out["first"]["ok"]["has"][k] for k in MINDSPEED_KEYS)
    assert out["rows"]["verl.workers.engine.megatron.transformer_impl"][0] == "applied"
    assert "2.0/2.1" in out["rows"]["verl.workers.engine.megatron.transformer_impl"][1]
    assert MINDSPEED_KEYS <= set(out["options_after"])  # put back for verl's later readers


@pytest.mark.skipif(not LEGACY_PATH, reason="legacy Megatron workers exist up to verl 0.7")
def test_legacy_path_mindspeed_2_2_repatches_every_build():
    out = run(LEGACY, "2.2")
    check_adaptor_first(out)
    first, second = out["first"]["ok"], out["second"]["ok"]
    megatron_values_intact(first)
    # critic: its options reached repatch (stock verl 0.6/0.7 never does that) and MindSpeed's wrapper
    assert out["after_first"] == 1 and out["repatch"][0] == OPTIONS
    assert all(first["has"][k] is True for k in MINDSPEED_KEYS)
    # a second model built in the same process reaches repatch too (MindSpeed's generated config
    # subclass from the first build must not make its keys look like Megatron fields)
    assert out["after_second"] == 2 and out["repatch"][1] == SECOND
    assert second["has"]["use_flash_attn"] is False and out["global_args"]["use_flash_attn"] is False
    # the actor: verl's own repatch call is not repeated
    assert "ok" in out["actor"] and out["actor_repatches"] == 0
    # stock verl builds with this MindSpeed, but without repatch for the critic
    assert "ok" in out["stock"]
    row = out["rows"]["verl.workers.megatron_workers"]
    assert row[0] == "applied" and "2.2+" in row[1]


@pytest.mark.skipif(not LEGACY_PATH, reason="legacy Megatron workers exist up to verl 0.7")
def test_legacy_path_mindspeed_2_1_warns_and_builds():
    out = run(LEGACY, "2.1")
    check_adaptor_first(out)
    check_old_generation(out)
    row = out["rows"]["verl.workers.megatron_workers"]
    assert row[0] == "applied" and "2.0/2.1" in row[1]
    assert "ok" in out["second"] and "actor" not in out  # verl found no repatch to call


SPLIT = r"""
import json
import mindspeed.megatron_adaptor
from megatron.core.transformer import TransformerConfig
from verl_ascend.patches.mindspeed import split_options
options = {"use_flash_attn": True, "add_bias_linear": False}
before = split_options(options)
TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, **options)  # MindSpeed's wrapper absorbs use_flash_attn
print(json.dumps({"before": before, "after": split_options(options), "subclasses": [c.__name__ for c in TransformerConfig.__subclasses__()]}))
"""


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("generation", ["2.2", "26"])
def test_megatron_fields_ignore_mindspeeds_generated_subclass(generation):
    out = last_json(run_python(SPLIT, env=clean_env(fake_npu=True, FAKE_MINDSPEED_VERSION=generation), timeout=120))
    expected = [{"add_bias_linear": False}, {"use_flash_attn": True}]
    assert out["subclasses"].count("TransformerConfig") >= 1  # MindSpeed's make_dataclass subclass is alive
    assert out["before"] == expected and out["after"] == expected


BESIDE_ADAPTOR = r"""
import json, sys
import torch
import verl
import megatron_adaptor  # the MegatronAdaptor path: it imports Megatron while it is being imported
from verl_ascend.core import registry
import importlib
importlib.import_module(sys.argv[1])  # the worker step's target: the Megatron engine (verl >= 0.8) or legacy workers
rows = {r["target"]: [r["state"], r.get("detail") or r.get("reason") or ""] for r in registry.summarize("mindspeed")["targets"]}
ms = sys.modules.get("mindspeed.megatron_adaptor")
print(json.dumps({"rows": rows, "mindspeed_loaded": ms is not None, "adaptor_events": megatron_adaptor.events,
                  "mindspeed_order": ms.events[0] if ms is not None else None}))
"""


def test_mindspeed_stands_down_where_the_process_imports_megatron_adaptor_first():
    # MindSpeed installed beside MegatronAdaptor (verl's Qwen3.5 examples name both): a process that imports
    # megatron_adaptor before Megatron chose that stack; MindSpeed's adaptor must not be patched in beside it
    env = clean_env(fake_npu=True, FAKE_MINDSPEED_VERSION="2.2")
    env["PYTHONPATH"] += os.pathsep + str(Path(__file__).parents[1] / "fakes" / "adaptor_site")
    worker = "verl.workers.engine.megatron.transformer_impl" if ENGINE_PATH else "verl.workers.megatron_workers"
    out = last_json(run_python(BESIDE_ADAPTOR, env=env, timeout=300, args=(worker,)))
    assert out["adaptor_events"][0]["mindspeed_adaptor_before"] is False, out
    # verl's own worker modules import MindSpeed's adaptor for repatch wherever MindSpeed is installed (0.8+: its
    # MindspeedEngine module; 0.6/0.7: megatron_workers, at its top): that is verl's doing, after Megatron was
    # imported; what is asserted is that nothing put it before Megatron
    assert out["mindspeed_order"] is None or out["mindspeed_order"]["megatron_imported_before"], out
    for target in ("megatron", worker):
        state, why = out["rows"][target]
        assert state == "not applicable" and "megatron_adaptor" in why, out["rows"]

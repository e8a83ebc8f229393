"""The MindSpeed double (tests/fakes/site/mindspeed) against a real MindSpeed source tree.

Set ``VERL_ASCEND_MINDSPEED_SRC`` to a MindSpeed checkout (``git clone https://gitcode.com/Ascend/MindSpeed``
or ``github.com/Ascend/MindSpeed``, any branch: 2.1.0_core_r0.12.1, 2.2.0_core_r0.12.1, 26.0.0_core_r0.12.1,
master, ...). The test finds the checkout's generation from its source (does the adaptor define
``repatch``? does the megatron-basic feature hook ``__init_subclass__``?), sets the double's
``FAKE_MINDSPEED_VERSION`` to match, and compares what both do:

- the adaptor imports ``torch_npu.contrib.transfer_to_npu`` at import, and has ``repatch`` or not;
- which ``TransformerConfig`` attributes MindSpeed patches (``__init__`` of TransformerConfig and
  MLATransformerConfig; ``__init_subclass__`` from 26.x);
- the real ``transformer_config_init_wrapper``, ``repatch`` and argv parsing (their source taken
  from the checkout and run here over a stand-in for MindSpeed's feature manager) against the
  double's, on the real megatron-core: same generated class, same attributes, same keywords reaching
  Megatron's ``__init__``, same process-global args after ``repatch``;
- from 26.x, the two checkpoint-validator stubs of ``--ckpt-acceleration`` (checkpoint_adaptor.py)
  against the double's, on the same wrapped function and inputs.

CI has no MindSpeed checkout (it is not on the package index: ``pip install mindspeed`` is a
placeholder), so there the test is skipped with that reason; developers run it by hand, e.g.
``VERL_ASCEND_MINDSPEED_SRC=~/src/MindSpeed dev/with-verl.sh 0.9.1 -- python -m pytest -q -rs tests/upstream/test_mindspeed_contract.py``.
"""

import ast
import json
import os
from pathlib import Path

import pytest
from subproc import clean_env, last_json, run_python

ENV = "VERL_ASCEND_MINDSPEED_SRC"
pytestmark = pytest.mark.verl_agnostic


def _checkout() -> Path:
    raw = os.environ.get(ENV, "")
    if not raw:
        reason = f"{ENV} is not set: no MindSpeed checkout to compare the double with (developers run this by hand)"
        print(reason)
        pytest.skip(reason)
    root = Path(raw).expanduser()
    if (root / "mindspeed").is_dir():
        return root
    raise AssertionError(f"{ENV}={raw} has no mindspeed/ package: point it at a MindSpeed checkout")


def _functions(path: Path) -> dict:
    tree = ast.parse(path.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _top_imports(path: Path) -> set:
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _patched_targets(root: Path) -> set:
    """String targets the megatron-basic feature registers MindSpeed patches on."""
    path = root / "mindspeed" / "features_manager" / "megatron_basic" / "megatron_basic.py"
    if not path.exists():
        return set()
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "transformer_config." in node.value}


def _generation(root: Path) -> str:
    if "repatch" not in _functions(root / "mindspeed" / "megatron_adaptor.py"):
        return "2.1"
    return "26" if any(t.endswith("__init_subclass__") for t in _patched_targets(root)) else "2.2"


# Runs the checkout's functions (source read from the files, executed over a stand-in feature
# manager) and the double's on the same inputs, in one fresh interpreter with the double first.
PROBE = r"""
import argparse, ast, dataclasses, functools, inspect, json, sys
from pathlib import Path
ROOT = Path(sys.argv[1])
ARGV = ["prog", "--use-fused-swiglu", "--foo-bar", "x", "--flag", "--many", "a", "b", "--eq=1"]

def real(path, *names, **namespace):
    tree = ast.parse(Path(path).read_text())
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    for node in body:
        node.decorator_list = []
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), namespace)
    return namespace

class Features:  # stand-in for MindSpeedFeaturesManager: the double's registered options, calls recorded
    calls = []
    @staticmethod
    def register_features_args(parser):
        from mindspeed.args_utils import _parser
        for action in _parser()._actions[1:]:
            parser._add_action(action)
    @classmethod
    def remove_patches(cls): cls.calls.append("remove")
    @classmethod
    def apply_features_pre_patches(cls, args): cls.calls.append("pre")
    @classmethod
    def apply_features_patches(cls, args): cls.calls.append("apply")

sys.argv = list(ARGV)
import mindspeed, mindspeed.megatron_adaptor as adaptor, mindspeed.args_utils as args_utils
from megatron.core.transformer import transformer_config as tc
out = {"generation": mindspeed.GENERATION, "transfer_to_npu": "torch_npu.contrib.transfer_to_npu" in sys.modules,
       "has_repatch": callable(getattr(adaptor, "repatch", None)),
       "wrapped": sorted(f"{c.__name__}.{a}" for c in (tc.TransformerConfig, tc.MLATransformerConfig)
                         for a in ("__init__", "__init_subclass__")
                         if a in c.__dict__ and (a == "__init_subclass__" or hasattr(c.__dict__[a], "__wrapped__")))}
if out["has_repatch"]:
    mine = args_utils.get_mindspeed_args()
    theirs = real(ROOT / "mindspeed/args_utils.py", "add_args", "parser_unknown_args", "get_mindspeed_args",
                  argparse=argparse, MindSpeedFeaturesManager=Features, _MINDSPEED_ARGS=None)["get_mindspeed_args"]()
    out["argv"] = {"double": dict(vars(mine)), "real": dict(vars(theirs))}

    # the init wrapper, on a fresh config, with the same process-global args under the same kwargs
    shared = argparse.Namespace(**vars(mine))
    real_ns = real(ROOT / "mindspeed/core/megatron_basic/arguments_basic.py", "transformer_config_init_wrapper",
                   inspect=inspect, wraps=functools.wraps, make_dataclass=dataclasses.make_dataclass,
                   field=dataclasses.field, get_full_args=lambda: shared)
    from mindspeed.core.megatron_basic import arguments_basic
    arguments_basic.get_full_args = lambda: shared
    kwargs = dict(num_layers=2, hidden_size=64, num_attention_heads=4, recompute_granularity="full",
                  recompute_method="uniform", recompute_num_layers=1, use_flash_attn=True)
    built = {}
    for name, make in (("real", real_ns["transformer_config_init_wrapper"]), ("double", arguments_basic.transformer_config_init_wrapper)):
        for cls in (tc.TransformerConfig, tc.MLATransformerConfig):
            seen = {}
            def original(self, *a, _init=cls.__dict__["__init__"], **kw):
                seen.update(kw)
                try:
                    _init(self, *a, **kw)
                except Exception as exc:  # MLA validates more; only what reached __init__ matters
                    seen["__error__"] = type(exc).__name__
            self = cls.__new__(cls)
            make(original)(self, **kwargs)
            built[f"{name}/{cls.__name__}"] = {
                "type": type(self).__name__, "bases": [b.__name__ for b in type(self).__bases__],
                "new_fields": sorted(f.name for f in dataclasses.fields(type(self)) if f.name not in {g.name for g in dataclasses.fields(cls)}),
                "attrs": {k: getattr(self, k, "<missing>") for k in ("use_flash_attn", "use_fused_swiglu", "foo_bar", "recompute_granularity")},
                "init_kwargs": sorted(seen)}
    out["init"] = built

    # repatch: the same keys set on the same process-global args, patches removed then re-applied
    theirs_args = argparse.Namespace(**vars(mine))
    repatch = real(ROOT / "mindspeed/megatron_adaptor.py", "repatch", MindSpeedFeaturesManager=Features,
                   get_full_args=lambda: theirs_args)["repatch"]
    repatch({"use_flash_attn": True, "recompute_granularity": "full"})
    repatch({"use_fused_rmsnorm": True})
    adaptor.repatch({"use_flash_attn": True, "recompute_granularity": "full"})
    adaptor.repatch({"use_fused_rmsnorm": True})
    out["repatch"] = {"real": vars(theirs_args), "double": vars(args_utils.get_full_args()), "real_calls": Features.calls}
print(json.dumps(out, default=repr))
"""


def _probe(root: Path, generation: str) -> dict:
    env = clean_env(fake_npu=True, FAKE_MINDSPEED_VERSION=generation)
    return last_json(run_python(PROBE, env=env, timeout=180, args=(str(root),)))


def test_double_matches_the_checkout():
    root = _checkout()
    generation = _generation(root)
    adaptor = root / "mindspeed" / "megatron_adaptor.py"
    out = _probe(root, generation)
    print(f"{root}: MindSpeed generation {generation}")

    assert out["generation"] == generation
    assert "torch_npu.contrib.transfer_to_npu" in _top_imports(adaptor) and out["transfer_to_npu"]
    assert out["has_repatch"] == ("repatch" in _functions(adaptor))
    real_wrapped = sorted(t.rsplit(".", 2)[-2] + "." + t.rsplit(".", 1)[-1] for t in _patched_targets(root)
                          if t.endswith(("__init__", "__init_subclass__")))
    assert out["wrapped"] == real_wrapped
    if generation == "2.1":
        return
    assert out["argv"]["double"] == out["argv"]["real"]
    for cls in ("TransformerConfig", "MLATransformerConfig"):
        assert out["init"][f"double/{cls}"] == out["init"][f"real/{cls}"], cls
    assert out["init"]["real/TransformerConfig"]["attrs"]["use_flash_attn"] is True  # absorbed, no TypeError
    assert out["repatch"]["double"] == out["repatch"]["real"]
    assert out["repatch"]["real"]["use_flash_attn"] is True and out["repatch"]["real"]["use_fused_rmsnorm"] is True
    assert out["repatch"]["real_calls"] == ["remove", "pre", "apply"] * 2
    json.dumps(out)  # the report is plain data


def test_ckpt_acceleration_stubs_match_the_checkout():
    """tests/fakes/site/mindspeed/core/dist_checkpointing/checkpoint_adaptor.py against the checkout's file:
    the two validator wrappers ``--ckpt-acceleration`` installs, run on the same function and inputs."""
    import functools
    import importlib.util

    from subproc import FAKE_SITE

    root = _checkout()
    path = root / "mindspeed" / "core" / "dist_checkpointing" / "checkpoint_adaptor.py"
    if not path.is_file():  # before 26.x: no such feature, so nothing installs the stubs
        assert not (root / "mindspeed" / "features_manager" / "ckpt_acceleration").exists(), root
        print(f"{root}: no checkpoint_adaptor.py (MindSpeed before --ckpt-acceleration)")
        return
    names = ("validate_global_plan_wrapper", "validate_non_overlapping_shards_metadata_wrapper")
    tree = ast.parse(path.read_text())
    body = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    assert sorted(node.name for node in body) == sorted(names), f"{path} no longer defines both wrappers"
    real = {"wraps": functools.wraps}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), real)
    spec = importlib.util.spec_from_file_location(
        "double_checkpoint_adaptor", FAKE_SITE / "mindspeed" / "core" / "dist_checkpointing" / "checkpoint_adaptor.py")
    double = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(double)

    def validator(plan, metadata=None):
        """torch's check, which raises on a bad plan"""
        raise AssertionError("the stub must not call the function it wraps")

    for name in names:
        ours, theirs = getattr(double, name)(validator), real[name](validator)
        assert (ours.__name__, ours.__doc__, ours.__wrapped__) == (theirs.__name__, theirs.__doc__, theirs.__wrapped__)
        for args, kwargs in (((), {}), (([1, 2],), {}), (([],), {"metadata": object()})):
            assert ours(*args, **kwargs) == theirs(*args, **kwargs), (name, args, kwargs)

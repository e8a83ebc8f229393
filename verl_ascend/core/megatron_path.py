"""Which way Megatron runs on NPU in this environment: MindSpeed, or MegatronAdaptor with TransformerEngine-NPU.

Two stacks adapt Megatron-LM to Ascend NPUs:
- MindSpeed (``import mindspeed.megatron_adaptor`` before Megatron): verl's own NPU path, through its
  ``MindspeedEngine`` (verl >= 0.8) or our ``mindspeed`` patch (verl <= 0.7).
- MegatronAdaptor + TransformerEngine-NPU (``import megatron_adaptor``): newer megatron-core (0.17, 0.18),
  used by ms-swift (PR modelscope/ms-swift#10087) and ROLL (alibaba/ROLL#492), and named beside MindSpeed
  in verl's Qwen3.5 Megatron examples (``examples/grpo_trainer/run_qwen3_5_*_megatron.sh``); verl's own
  engine for it (verl-project/verl#7142) was closed unmerged, so no verl release selects it.

TransformerEngine-NPU installs its code as the module ``transformer_engine``: the name of NVIDIA's
TransformerEngine, whose import on a host without CUDA fails loading cuDNN (the traceback in
modelscope/ms-swift#6968, MindSpeed importing NVIDIA's package on an NPU host). NVIDIA's is recognised
by its CUDA build distribution (``transformer_engine_cu12`` / ``_cu13``, which its ``transformer_engine``
meta-package requires); any other owner of the module is taken for a non-CUDA build (TE-NPU or a source
build). Two owners of one module overwrite each other's files: the clash is named.

Metadata and import specs only: nothing here imports MindSpeed, MegatronAdaptor or TransformerEngine.
"""

import re
import sys
from typing import Optional

from verl_ascend.core.platform import importable, installed_version

ADAPTOR_MODULE = "megatron_adaptor"
TE_MODULE = "transformer_engine"
_NVIDIA_CUDA_DIST = re.compile(r"^transformer[-_]engine[-_]cu\d+$", re.IGNORECASE)
_NVIDIA_PARTS = re.compile(r"^transformer[-_]engine([-_](torch|jax|cu\d+))?$", re.IGNORECASE)


def _owners(module: str) -> list:
    from importlib import metadata

    return sorted(set(metadata.packages_distributions().get(module, [])))


def _installed_dists() -> list:
    from importlib import metadata

    return sorted({(d.metadata["Name"] or "") for d in metadata.distributions()} - {""})


def facts() -> dict:
    """What decides the Megatron-on-NPU path here: {"mindspeed": version or '' (None: not installed),
    "megatron_adaptor": "dist version" or '' (None: not installed), "transformer_engine": {"owners": [...],
    "nvidia": [CUDA dists], "other": [non-NVIDIA owners], "clash": bool} or None}."""
    mindspeed = installed_version("mindspeed") if importable("mindspeed") else None
    adaptor = None
    if importable(ADAPTOR_MODULE):
        adaptor = ", ".join(f"{d} {installed_version(d)}".strip() for d in _owners(ADAPTOR_MODULE))
    te = None
    owners = _owners(TE_MODULE)
    if owners or importable(TE_MODULE):
        nvidia = [d for d in _installed_dists() if _NVIDIA_CUDA_DIST.match(d)]
        other = [d for d in owners if not _NVIDIA_PARTS.match(d)]
        te = {"owners": owners, "nvidia": nvidia, "other": other, "clash": bool(nvidia and other)}
    return {"mindspeed": mindspeed, "megatron_adaptor": adaptor, "transformer_engine": te}


def summary(found: dict) -> str:
    """One line for ``status``: the stacks present and the TransformerEngine that owns the module."""
    parts = []
    if found["mindspeed"] is not None:
        parts.append(f"MindSpeed {found['mindspeed'] or '(version unknown)'}")
    if found["megatron_adaptor"] is not None:
        parts.append(f"MegatronAdaptor ({found['megatron_adaptor'] or 'no distribution metadata'})")
    te = found["transformer_engine"]
    if te:
        if te["clash"]:
            parts.append(f"transformer_engine CLASH: NVIDIA's {', '.join(te['nvidia'])} and {', '.join(te['other'])} "
                         "install the same module")
        elif te["nvidia"]:
            parts.append(f"transformer_engine: NVIDIA's CUDA build ({', '.join(te['nvidia'])})")
        else:
            parts.append(f"transformer_engine: not NVIDIA's CUDA build ({', '.join(te['owners']) or 'no metadata'}: "
                         "TE-NPU or a source build)")
    return "; ".join(parts) if parts else "neither MindSpeed nor MegatronAdaptor installed"


def transformer_config_fields() -> Optional[set]:
    """megatron-core's TransformerConfig field names (feature detection), without importing megatron in this process
    (MindSpeed, where present, must patch it first); None when they cannot be read.

    Read from megatron-core's source first (:func:`_fields_from_source`, ~0.01 s), else from a child process that
    imports it (:func:`_fields_from_import`, ~5 CPU-s: torch and megatron-core). Both give the same set on every
    megatron-core of CI (tests/unit/test_megatron_fields.py)."""
    fields = _fields_from_source()
    return fields if fields is not None else _fields_from_import()


def _fields_from_source() -> Optional[set]:
    """The dataclass fields of TransformerConfig as its source declares them: the class-level annotated names of
    the class and of its dataclass bases (ModelParallelConfig), minus ClassVar, InitVar and KW_ONLY. None where the
    source is not laid out so (a base that is not a dataclass of these two files, a class not found)."""
    import ast
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec("megatron")  # a namespace package: nothing of megatron is imported
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        files = [os.path.join(root, "core", "transformer", "transformer_config.py"),
                 os.path.join(root, "core", "model_parallel_config.py")]
        if all(os.path.isfile(f) for f in files):
            break
    else:
        return None
    classes = {}
    try:
        for path in files:
            with open(path, encoding="utf-8") as fh:
                for node in ast.parse(fh.read()).body:
                    if isinstance(node, ast.ClassDef):
                        classes.setdefault(node.name, node)
    except (OSError, SyntaxError, ValueError):
        return None

    def is_dataclass(node) -> bool:
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if ast.unparse(target) in ("dataclass", "dataclasses.dataclass"):
                return True
        return False

    def fields_of(name: str, seen=()) -> Optional[set]:
        node = classes.get(name)
        if node is None or name in seen or not is_dataclass(node):
            return None
        out = set()
        for base in node.bases:
            if ast.unparse(base) == "object":
                continue
            inherited = fields_of(ast.unparse(base), seen + (name,))
            if inherited is None:
                return None
            out |= inherited
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                kind = ast.unparse(item.annotation).split("[")[0].rsplit(".", 1)[-1]
                if kind not in ("ClassVar", "InitVar", "KW_ONLY"):
                    out.add(item.target.id)
        return out

    return fields_of("TransformerConfig")


def _fields_from_import() -> Optional[set]:
    """The same names from ``dataclasses.fields`` in a child process that imports megatron-core."""
    import json
    import os
    import subprocess

    code = ("import dataclasses, json\nfrom megatron.core.transformer.transformer_config import TransformerConfig\n"
            "print(json.dumps(sorted(f.name for f in dataclasses.fields(TransformerConfig))))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_ASCEND_REHEARSE")}
    env.update(TORCH_DEVICE_BACKEND_AUTOLOAD="0", VERL_ASCEND_DEVICE="cpu")
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)
        return set(json.loads(proc.stdout.strip().splitlines()[-1])) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None

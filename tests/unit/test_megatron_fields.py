"""TransformerConfig's field names read from megatron-core's source (core/megatron_path.py), against the same names
from `dataclasses.fields` after a real import, on the megatron-core of every CI environment (0.16 with verl 0.9.1,
0.6.1's, 0.12 of the field report's stack); and the source reader's refusals, which hand over to the import."""

import importlib.util
from types import SimpleNamespace

import pytest

from verl_ascend.core import megatron_path

pytestmark = pytest.mark.field_stack


def test_the_source_gives_the_fields_the_import_gives():
    from_source = megatron_path._fields_from_source()
    from_import = megatron_path._fields_from_import()  # a child process importing the installed megatron-core
    assert from_import and len(from_import) > 100, from_import
    assert from_source == from_import, sorted(from_source ^ from_import)
    assert megatron_path.transformer_config_fields() == from_import


def _megatron_tree(tmp_path, base_decorator="@dataclass"):
    root = tmp_path / "megatron"
    (root / "core" / "transformer").mkdir(parents=True)
    (root / "core" / "model_parallel_config.py").write_text(
        f"from dataclasses import dataclass\n{base_decorator}\nclass ModelParallelConfig:\n"
        "    tensor_model_parallel_size: int = 1\n    note = 'not annotated: not a field'\n")
    (root / "core" / "transformer" / "transformer_config.py").write_text(
        "import dataclasses\nfrom dataclasses import InitVar, dataclass\nfrom typing import ClassVar\n"
        "from megatron.core.model_parallel_config import ModelParallelConfig\n"
        "@dataclasses.dataclass(kw_only=False)\nclass TransformerConfig(ModelParallelConfig):\n"
        "    num_layers: int = 0\n    registry: ClassVar[dict] = {}\n    seed: InitVar[int] = 0\n"
        "    def method(self):\n        local: int = 1\n")
    return root


def test_a_dataclass_and_its_dataclass_base_give_their_annotated_names(tmp_path, monkeypatch):
    root = _megatron_tree(tmp_path)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: SimpleNamespace(submodule_search_locations=[str(root)]))
    assert megatron_path._fields_from_source() == {"tensor_model_parallel_size", "num_layers"}


@pytest.mark.parametrize("layout", ["undecorated base", "no source"])
def test_a_layout_it_does_not_know_is_none_so_the_import_answers(tmp_path, monkeypatch, layout):
    root = _megatron_tree(tmp_path, base_decorator="" if layout == "undecorated base" else "@dataclass")
    if layout == "no source":
        (root / "core" / "model_parallel_config.py").unlink()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: SimpleNamespace(submodule_search_locations=[str(root)]))
    assert megatron_path._fields_from_source() is None
    monkeypatch.setattr(megatron_path, "_fields_from_import", lambda: {"from the import"})
    assert megatron_path.transformer_config_fields() == {"from the import"}

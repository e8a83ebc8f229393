"""check's reading of sizes from a composed config: unset values in every spelling verl's YAML uses,
numbers given as strings (command-line overrides), and values that are no number (a finding, not a crash)."""

import pytest
from omegaconf import OmegaConf

from verl_ascend.recipe.layout import BadValue, get_int, train_layout

pytestmark = pytest.mark.verl_agnostic

REF = """
actor_rollout_ref:
  actor: {strategy: megatron}
  ref:
    strategy: megatron
    megatron:
      tensor_model_parallel_size: 4
      expert_tensor_parallel_size: ETP
"""


@pytest.mark.parametrize("written", ["None", "null", "~", "none", "''"])
def test_unset_expert_tp_falls_back_to_the_dense_tp(written):
    cfg = OmegaConf.create(REF.replace("ETP", written))  # YAML: `None` is the string 'None', `null`/`~` are None
    assert train_layout(cfg, "ref").etp == 4


@pytest.mark.parametrize("written, read", [("2", 2), ("'2'", 2), ("2.0", 2), ("'+1'", 1)])
def test_numbers_in_any_form_are_read(written, read):
    assert train_layout(OmegaConf.create(REF.replace("ETP", written)), "ref").etp == read


@pytest.mark.parametrize("written", ["two", "2.5", "[2]"])
def test_a_value_that_is_no_whole_number_names_its_key(written):
    with pytest.raises(BadValue) as exc:
        train_layout(OmegaConf.create(REF.replace("ETP", written)), "ref")
    assert exc.value.key == "actor_rollout_ref.ref.megatron.expert_tensor_parallel_size"
    assert "expert_tensor_parallel_size=" in str(exc.value) and "whole number" in str(exc.value)


def test_missing_keys_keep_their_default():
    cfg = OmegaConf.create({"trainer": {}})
    assert get_int(cfg, "trainer.nnodes", 1) == 1 and get_int(cfg, "trainer.nothing") is None

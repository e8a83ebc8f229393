"""Where the rehearsal's tiny model takes its architecture from, and the fix it names when it cannot tell."""

import json

import pytest

from verl_ascend.rehearse.plan import assets

pytestmark = pytest.mark.verl_agnostic  # reads a config.json or the built-in facts; no verl


def test_a_hub_id_without_facts_names_both_ways_to_give_a_config(tmp_path):
    # verl's examples hard-code hub ids (run_qwen2-7b_math_megatron.sh: Qwen/Qwen2-7B-Instruct), read no MODEL_PATH
    with pytest.raises(assets.AssetError) as caught:
        assets.source_config("Qwen/Qwen2-7B-Instruct")
    message = str(caught.value)
    assert "Qwen/Qwen2-7B-Instruct" in message
    assert "--override actor_rollout_ref.model.path=DIR" in message and "--env MODEL_PATH=DIR" in message, message


def test_a_folder_with_the_models_config_json_is_the_source(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
                                                      "hidden_size": 3584, "num_hidden_layers": 28}))
    config, where = assets.source_config(str(tmp_path))
    assert config["model_type"] == "qwen2" and config["num_hidden_layers"] == 28
    assert where == f"config.json at {tmp_path / 'config.json'}"

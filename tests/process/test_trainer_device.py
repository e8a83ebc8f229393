"""trainer.device cuda -> npu on Ascend hosts for verl without auto_set_device (0.6.x)."""

import pytest
from subproc import clean_env, last_json, run_python

CODE = """
import json
from omegaconf import OmegaConf
import verl.utils.device as device
from verl.trainer.ppo import ray_trainer
from verl_ascend.core import registry
config = OmegaConf.create({"trainer": {"device": "cuda"}})
try:  # the real __init__ fails later on this bare config; what matters is what it was handed
    ray_trainer.RayPPOTrainer.__init__(object.__new__(ray_trainer.RayPPOTrainer), config,
                                       tokenizer=None, role_worker_mapping={}, resource_pool_manager=None)
except Exception:
    pass
print(json.dumps({"device": config.trainer.device, "state": registry.summarize("trainer_device"),
                  "has_auto": hasattr(device, "auto_set_device")}))
"""


@pytest.mark.field_stack
def test_cuda_becomes_npu_where_verl_does_not_do_it_itself():
    out = last_json(run_python(CODE, env=clean_env(fake_npu=True)))
    if out["has_auto"]:  # verl >= 0.7 switches the device itself
        assert out["state"]["state"] == "not applicable"
        assert "auto_set_device" in out["state"]["targets"][0]["detail"]
    else:
        assert out["state"]["state"] == "applied"
        assert out["device"] == "npu"


@pytest.mark.field_stack
def test_off_ascend_the_config_is_untouched():
    out = last_json(run_python(CODE, env=clean_env()))
    assert out["device"] == "cuda"
    assert out["state"]["state"] == "not applicable"

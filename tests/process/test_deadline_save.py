"""deadline_save: verl 0.9's trainer v1 forces a save before the allocation ends, as its legacy trainer does.

A fresh interpreter imports the real ``verl.trainer.ppo.v1.trainer_base`` (the patch activates on that import, as in
a TaskRunner), makes the real ``sync`` trainer without its ``__init__``, and calls the real ``PPOTrainer.step`` once
per step as ``fit`` does. Only the two calls that need a cluster are replaced on the instance: one mini-batch's
pipeline (``_step_once``) and the save (``_save_checkpoint``, recorded). verl's own ``should_save_ckpt_esi`` decides,
from the variable ``supervise --deadline`` sets.
"""

import json

import pytest
from subproc import clean_env, last_json, run_python

CODE = """
import json, os, sys, time
from omegaconf import OmegaConf
import verl
from verl_ascend.core import registry
try:
    from verl.trainer.ppo.v1 import trainer_base
except ImportError as exc:  # verl before trainer v1 (0.6.x): the patch's target never appears
    print(json.dumps({"state": registry.summarize("deadline_save"), "no_v1": repr(exc)}))
    sys.exit(0)
VAR = "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"


def forced(save_freq, redundant, expires_in):
    os.environ.pop(VAR, None)
    if expires_in is not None:
        os.environ[VAR] = str(time.time() + expires_in)
    trainer = object.__new__(trainer_base.get_trainer_cls("sync"))
    trainer.config = OmegaConf.create({"data": {"train_batch_size": 4},
                                       "trainer": {"save_freq": save_freq, "esi_redundant_time": redundant}})
    trainer.parameter_sync_step = 1
    trainer.total_training_steps = 6
    trainer.prepare_step = lambda: {}

    def one_batch(metrics, timing_raw, size):
        time.sleep(0.05)
        return trainer_base.KVBatchMeta(partition_id="train", keys=[], tags=[])

    saved, timers = [], []
    trainer._step_once = one_batch
    trainer._save_checkpoint = lambda: saved.append(trainer.global_steps)
    for step in range(1, 7):  # fit's loop: global_steps set, then step()
        trainer.global_steps = step
        timing = {}
        trainer.step({}, timing)
        timers.append(sorted(timing))
    return {"forced": saved, "timers": timers}


print(json.dumps({"state": registry.summarize("deadline_save"),
                  "cases": [forced(*case) for case in json.loads(sys.argv[1])]}))
"""
HOUR = 3600
# (save_freq, esi_redundant_time, seconds to the expiration or None for no variable)
NEAR = (4, 3 * HOUR, 2 * HOUR)  # 2 h left, 3 h of margin: verl's check says "save" once a step has a length
CASES = [NEAR, (4, 0, 2 * HOUR), (4, 3 * HOUR, None), (-1, 3 * HOUR, 2 * HOUR)]


def _run(cases, **extra) -> dict:
    return last_json(run_python(CODE, env=clean_env(**extra), args=(json.dumps(cases),)))


@pytest.mark.field_stack
def test_trainer_v1_saves_before_the_expiration_and_only_then():
    out = _run(CASES)
    if "no_v1" in out:  # verl 0.6.x: no trainer v1, nothing to patch; the legacy trainer has verl's own check
        assert out["state"]["state"] != "applied", out["state"]
        return
    assert out["state"]["state"] == "applied", out["state"]
    near, far, no_variable, saving_off = out["cases"]
    # step 1 has no longest step yet (as in verl's legacy trainer); 4 and 6 are fit's own saves (save_freq, last step)
    assert near["forced"] == [2, 3, 5]
    assert [s for s in range(1, 7) if "save_checkpoint" in near["timers"][s - 1]] == [2, 3, 5]
    assert far["forced"] == [] and no_variable["forced"] == [] and saving_off["forced"] == []


@pytest.mark.field_stack
def test_stock_trainer_v1_forces_no_save_which_is_why_the_patch_exists():
    out = _run([NEAR], VERL_ASCEND_PATCHES="-deadline_save")
    if "no_v1" in out:
        return  # verl 0.6.x: nothing to compare (test above)
    assert out["state"]["state"] != "applied"
    assert out["cases"][0]["forced"] == []


def test_the_decision_is_fits_own_save_rule_plus_verls_check():
    from omegaconf import OmegaConf

    from verl_ascend.patches.deadline_save import force_save, will_save

    config = OmegaConf.create({"save_freq": 5, "esi_redundant_time": 7})
    asked = []

    def near(max_steps_duration, redundant_time):
        asked.append((max_steps_duration, redundant_time))
        return True

    assert will_save(config, 5, 20) and will_save(config, 20, 20) and not will_save(config, 6, 20)
    assert not force_save(config, 10, 20, 3.0, near)  # fit saves step 10 anyway: no second save
    assert force_save(config, 11, 20, 3.0, near) and asked == [(3.0, 7)]
    assert not force_save(OmegaConf.create({"save_freq": 0}), 11, 20, 3.0, near)

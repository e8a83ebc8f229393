"""NPU-only settings a recipe carries are switched off in the rehearsal's plan and listed, never passed to a CPU worker.

The profiler lines are verl 0.9.0's own Ascend example for Qwen3-30B-A3B (DAPO on Megatron), as it sets them:
https://github.com/verl-project/verl/blob/main/examples/ascend_extras/grpo_trainer/run_qwen3_30b_a3b_megatron.sh
(its PROF_CONFIG). With global_profiler.tool=npu every worker that builds a profiler imports
verl/utils/profiler/mstx_profile.py, which imports torch_npu at module level.
"""

import pytest

from verl_ascend.rehearse.plan import overrides as plan

pytestmark = pytest.mark.verl_agnostic  # the plan decides this from the override strings alone

PROF_CONFIG = ["global_profiler.tool=npu", "global_profiler.steps=null", "global_profiler.save_path=/profpath",
               "actor_rollout_ref.actor.profiler.enable=True", 'actor_rollout_ref.actor.profiler.ranks="[0]"',
               "actor_rollout_ref.actor.profiler.all_ranks=False",
               "actor_rollout_ref.actor.profiler.tool_config.npu.discrete=True",
               "actor_rollout_ref.actor.profiler.tool_config.npu.contents=['npu','cpu']",
               "actor_rollout_ref.actor.profiler.tool_config.npu.level=level0",
               "actor_rollout_ref.actor.profiler.tool_config.npu.analysis=True",
               "actor_rollout_ref.rollout.profiler.enable=True", 'actor_rollout_ref.rollout.profiler.ranks="[0]"',
               "actor_rollout_ref.rollout.profiler.all_ranks=False"]
OTHER = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.use_kl_loss=True"]


def _plan(recipe: list):
    return plan.build("ppo_trainer", recipe, model_dir="/m", train_file="/t.parquet", val_file="/v.parquet", nproc=2,
                      steps=1, prompt_length=32, response_length=16, ckpt_dir="/c", ray_tmp="/r", n_resp=2, batch=4)


def test_the_npu_profiler_and_its_lines_are_switched_off_and_listed():
    made = _plan(OTHER + PROF_CONFIG)
    passed = [item for item in made.overrides if "profiler" in item]
    assert passed == [], passed  # none reaches main_ppo: verl's global_profiler.tool default (null) builds a no-op
    listed = [c for c in made.changes if c.startswith(plan.NPU_PROFILER)]
    assert len(listed) == 1 and "global_profiler.tool=npu" in listed[0] and "(+7 more)" in listed[0], made.changes
    assert set(OTHER) <= set(made.kept)


def test_a_cpu_profiler_is_left_as_the_recipe_set_it():
    torch_profiler = [item.replace("=npu", "=torch") for item in PROF_CONFIG if ".npu." not in item]
    made = _plan(OTHER + torch_profiler)
    assert "global_profiler.tool=torch" in made.kept and "actor_rollout_ref.actor.profiler.enable=True" in made.kept
    assert not [c for c in made.changes if c.startswith(plan.NPU_PROFILER)], made.changes


def test_a_roles_own_npu_tool_counts_too():
    made = _plan(OTHER + ["actor_rollout_ref.actor.profiler.tool=npu", "actor_rollout_ref.actor.profiler.enable=True"])
    assert not [item for item in made.overrides if "profiler" in item]

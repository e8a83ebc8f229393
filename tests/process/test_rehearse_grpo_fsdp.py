"""`verl-ascend rehearse` on verl's own Ascend example of GRPO on FSDP, as it is published (Qwen3-4B, vLLM rollout).

The recipe is tests/fixtures/wild_recipes/ascend_qwen3_4b_grpo_fsdp.sh, verl's
examples/ascend_extras/grpo_trainer/run_qwen3_4b_fsdp.sh verbatim: it sources CANN's and NNAL's set_env.sh first
(skipped where CANN is missing, and listed), takes MODEL_PATH from the environment, runs GRPO with a KL loss and
no critic on verl's FSDP engine, offloads, and logs to console and TensorBoard. As a new user would, MODEL_PATH
names a folder holding Qwen3-4B's config.json (its public sizes). What no other rehearsal in CI covers: GRPO on
FSDP (the 7B/235B/32B recipes are Megatron, the FSDP one is PPO with a critic), a script that sources CANN, a
qwen3 dense model. Cost: two main_ppo runs of 1 step on 2 ranks (~4 min on 2 shared cores).
"""

import json
import re
import tempfile
from pathlib import Path

from rehearsal_helpers import assert_diagnosed_clean, assert_nothing_left, logs_tail, needs_09, rehearse, steps
from subproc import clean_env

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "tests" / "fixtures" / "wild_recipes" / "ascend_qwen3_4b_grpo_fsdp.sh"
# Qwen3-4B's config as its model card publishes it (the sizes the tiny model shrinks; the family it keeps)
QWEN3_4B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
            "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
            "rope_theta": 1000000, "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False}


@needs_09
def test_verls_ascend_grpo_fsdp_example_trains_saves_and_resumes():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        out, model, home = tmp / "out", tmp / "Qwen3-4B", tmp / "home"
        model.mkdir()
        home.mkdir()
        (model / "config.json").write_text(json.dumps(QWEN3_4B))
        proc = rehearse(out, "--nproc", "2", "--steps", "1", "--env", f"MODEL_PATH={model}", recipe=RECIPE,
                        env=clean_env(HOME=home))
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:] + logs_tail(out)
        changes = (out / "changes.txt").read_text()
        for expected in ("engine: FSDP2 over gloo, 2 CPU rank(s)", "Qwen3ForCausalLM (qwen3) from config.json at",
                         "kept: algorithm.adv_estimator=grpo", "kept: actor_rollout_ref.actor.use_kl_loss=True",
                         "rollout -> hf (transformers generate on CPU): recipe's", "actor_rollout_ref.rollout.name=vllm",
                         "CPU run: nothing to offload: recipe's actor_rollout_ref.actor.fsdp_config.param_offload=True"):
            assert expected in changes, (expected, changes)
        assert "critic:" not in changes  # GRPO: verl trains no critic
        log = (out / "console.log").read_text(errors="replace")
        engines = set(re.findall(r"verl-ascend rehearse: engine in rank \d: (\w+) ", log))
        assert engines == {"FSDPEngineWithLMHead"}, engines
        train, resumed = steps(out / "console.log"), steps(out / "console_resume.log")
        assert sorted(train) == [1] and sorted(resumed) == [2], (train.keys(), resumed.keys())
        for step, metrics in {**train, **resumed}.items():
            assert metrics["actor/grad_norm"] > 0, (step, metrics)
        shards = sorted(p.name for p in (out / "checkpoints" / "global_step_1" / "actor").glob("model_world_size_2_rank_*.pt"))
        assert shards == ["model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt"], shards
        for line in ("ok   resume loaded the checkpoint", "ok   actor/grad_norm > 0 at every update",
                     "ok   actor/kl_loss > 0", "ok   training/rollout_probs_diff_max <"):
            assert line in proc.stdout, (line, proc.stdout[-3000:])
        assert_nothing_left(proc, out)
        assert_diagnosed_clean(out)

"""`verl-ascend rehearse` on an FSDP recipe written elsewhere: PPO with GAE and a critic (verl's most common shape).

The recipe (tests/fixtures/wild_recipes/ppo_gae_fsdp_critic.sh) is the shape of verl's
examples/ppo_trainer/run_qwen2.5-0.5b.sh: hub ids for actor and critic, FSDP, no MODEL_PATH to set. As a new
user would, the model is named by --override with a folder holding the model's config.json (Qwen2.5-0.5B's
public sizes). verl's FSDP2 engine over gloo on 2 ranks, the actor and the critic (verl's value-head engine)
trained, checkpointed and resumed; the rehearsal's own verdict covers the critic's gradient too.
Cost: two main_ppo runs of 1 step on 2 ranks (~4-5 min on 2 shared cores).
"""

import json
import re
import tempfile
from pathlib import Path

from rehearsal_helpers import assert_diagnosed_clean, assert_nothing_left, logs_tail, needs_09, rehearse, steps
from subproc import clean_env

ROOT = Path(__file__).resolve().parents[2]
WILD = ROOT / "tests" / "fixtures" / "wild_recipes" / "ppo_gae_fsdp_critic.sh"
# Qwen2.5-0.5B's config as its model card publishes it (the sizes the tiny model shrinks; the family it keeps)
QWEN2_5_0_5B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
                "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
                "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
                "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": True, "hidden_act": "silu"}


@needs_09
def test_an_fsdp_ppo_recipe_with_a_critic_trains_both_saves_and_resumes():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        out, model, home = tmp / "out", tmp / "Qwen2.5-0.5B", tmp / "home"
        model.mkdir()
        home.mkdir()
        (model / "config.json").write_text(json.dumps(QWEN2_5_0_5B))
        proc = rehearse(out, "--nproc", "2", "--steps", "1", "--override", f"actor_rollout_ref.model.path={model}",
                        recipe=WILD, env=clean_env(HOME=home))
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:] + logs_tail(out)
        changes = (out / "changes.txt").read_text()
        for expected in ("engine: FSDP2 over gloo, 2 CPU rank(s)", "critic: the tiny model with verl's value head",
                         "critic model -> the same tiny model (verl adds its value head): recipe's "
                         "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct", "kept: algorithm.adv_estimator=gae",
                         "Qwen2ForCausalLM (qwen2) from config.json at"):
            assert expected in changes, (expected, changes)
        log = (out / "console.log").read_text(errors="replace")
        engines = set(re.findall(r"verl-ascend rehearse: engine in rank \d: (\w+) ", log))
        assert engines == {"FSDPEngineWithLMHead", "FSDPEngineWithValueHead"}, engines
        assert "Qwen/Qwen2.5" not in (out / "commands.txt").read_text()  # neither hub id reached main_ppo
        train, resumed = steps(out / "console.log"), steps(out / "console_resume.log")
        assert sorted(train) == [1] and sorted(resumed) == [2], (train.keys(), resumed.keys())
        for step, metrics in {**train, **resumed}.items():
            assert metrics["critic/grad_norm"] > 0 and metrics["actor/grad_norm"] > 0, (step, metrics)
        # both roles wrote their FSDP shards, one per rank, and the resume read the critic's back
        step_dir = out / "checkpoints" / "global_step_1"
        for role in ("actor", "critic"):
            shards = sorted(p.name for p in (step_dir / role).glob("model_world_size_2_rank_*.pt"))
            assert shards == ["model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt"], (role, shards)
        assert re.search(r"Loaded model from \S+/global_step_1/critic/model_world_size_2_rank_\d\.pt",
                         (out / "console_resume.log").read_text(errors="replace"))
        for line in ("ok   resume loaded the checkpoint", "ok   critic/grad_norm > 0 at every update",
                     "ok   actor/grad_norm > 0 at every update", "ok   training/rollout_probs_diff_max <"):
            assert line in proc.stdout, (line, proc.stdout[-3000:])
        checked = re.findall(r"^  (?:ok  |FAIL) ([^:]+):", proc.stdout, re.M)
        assert checked and not any("kl_loss" in name for name in checked), checked  # the recipe has no KL loss
        assert_nothing_left(proc, out)
        assert_diagnosed_clean(out)

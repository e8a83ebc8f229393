"""`verl-ascend rehearse` when the Megatron path fails: the error named, nothing of the run left alive, under load.

Two planted faults (1 rank, 2 partial main_ppo runs): the recipe's reward function raises at the first
reward; the first run's converted dist checkpoint (kept by --keep-model), with one tensor dropped, is given as
the second run's initial weights. A third, the recipe's data file without the prompt column, fails in the
TaskRunner before any worker starts. The fourth planted fault of #35, a killed worker, is CI's supervised
kill-worker rehearsal (test_rehearse_supervised.py: diagnose headlines Ray's verdict on the attempt's log, and
nothing is left); it ran here as well until the CI budget asked for one killed worker, not two (~65 CPU-s).
These runs share CI's two cores with two other pytest workers: the load under which their ending must hold.
"""

import json
import pickle
import tempfile
from pathlib import Path

from rehearsal_helpers import assert_diagnosed_as, assert_nothing_left, logs_tail, needs_09, rehearse, weights_named

RAISING_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    raise ValueError("planted reward fault: the recipe's reward function raises")
'''

# Qwen2-7B-Instruct's published architecture (its config.json on the model hub; only the fields the tiny model reads)
QWEN2_CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
                "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
                "vocab_size": 152064, "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
                "tie_word_embeddings": False, "hidden_act": "silu"}


def _drop_one_tensor(dist_ckpt: Path) -> str:
    """Remove one weight from a Megatron dist checkpoint's index (what a half-finished copy leaves)."""
    meta = dist_ckpt / ".metadata"
    metadata = pickle.loads(meta.read_bytes())
    victim = sorted(k for k in metadata.state_dict_metadata if "linear_fc2.weight" in k)[0]
    del metadata.state_dict_metadata[victim]
    meta.write_bytes(pickle.dumps(metadata))
    return victim


@needs_09
def test_faults_planted_in_the_megatron_path_are_named_and_leave_nothing_running():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        (tmp / "raising_reward.py").write_text(RAISING_REWARD)
        out = tmp / "reward_fault"
        proc = rehearse(out, "--nproc", "1", "--steps", "1", "--keep-model",
                         "--override", f"reward.custom_reward_function.path={tmp / 'raising_reward.py'}")
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "ValueError: planted reward fault" in proc.stderr, (proc.stderr[-3000:], logs_tail(out))
        assert not list((out / "checkpoints").glob("global_step_*"))
        assert_nothing_left(proc, out)
        assert_diagnosed_as(out, "ValueError: planted reward fault")  # diagnose, on the run's own logs, agrees
        # a converted checkpoint missing one tensor (the first run's conversion, kept), given as the initial weights
        damaged = out / "model_mcore"
        assert (damaged / ".metadata").is_file(), sorted(p.name for p in out.iterdir())
        victim = _drop_one_tensor(damaged)
        out2 = tmp / "ckpt_fault"
        proc = rehearse(out2, "--nproc", "1", "--steps", "1", *weights_named(damaged))
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert victim in proc.stderr, (victim, proc.stderr[-3000:], logs_tail(out2))
        # the weights --override names are the run's: nothing of its own was converted
        assert "converting the tiny model" not in proc.stdout, proc.stdout[-3000:]
        assert "initial weights: the dist checkpoint that --override names" in (out2 / "changes.txt").read_text()
        assert_nothing_left(proc, out2)
        # diagnose headlines megatron's KeyError naming the tensor, not Ray's RayTaskError(CheckpointException)
        # wrapper printed above it (tests/fixtures/diagnose/faults/ckpt_missing_tensor.log: the same load, reduced)
        assert_diagnosed_as(out2, f"(ckpt_missing_tensor: {victim})")



@needs_09
def test_a_data_file_missing_a_column_fails_the_rehearsal_naming_it_and_leaves_nothing_running():
    # The planted fault `check` cannot see: the recipe's own data files (its DATA_DIR) lack the prompt
    # column. verl's dataset in the TaskRunner raises before any worker starts, the cheapest fault in the loop.
    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        tmp = Path(tmp)
        data = tmp / "data"
        data.mkdir()
        table = pa.table({"data_source": ["openai/gsm8k"] * 8, "question": [f"{i} + {i}?" for i in range(8)],
                          "reward_model": [{"style": "rule", "ground_truth": str(2 * i)} for i in range(8)]})
        for name in ("train", "test"):
            pq.write_table(table, data / f"{name}.parquet")
        out = tmp / "out"
        # weights named by --override: the run ends before any worker loads them, a conversion would only cost time
        (tmp / "no-weights").mkdir()  # a folder here: used as given (a path absent here would be converted)
        weights = weights_named(tmp / "no-weights")
        # the model as a user names it after the recipe: a folder holding only the model's config.json. It is
        # the tiny model's source and is replaced like the recipe's own path (appended as given, it reached
        # main_ppo as the model itself: with verl's run_qwen2-7b_math_megatron.sh, whose data keeps its prompt
        # column, verl's dataset then failed on a tokenizer without a chat template)
        hf = tmp / "hf"
        hf.mkdir()
        (hf / "config.json").write_text(json.dumps(QWEN2_CONFIG))
        proc = rehearse(out, "--nproc", "1", "--steps", "1", "--env", f"DATA_DIR={data}", *weights,
                        "--override", f"actor_rollout_ref.model.path={hf}")
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        changes = (out / "changes.txt").read_text()
        assert f"data: the recipe's {data / 'train.parquet'}" in changes
        assert f"from config.json at {hf / 'config.json'}" in changes, changes
        # ...and main_ppo ran on the tiny model: the user's folder is named nowhere in its config
        assert str(hf) not in (out / "console.log").read_text(errors="replace"), logs_tail(out)
        assert "KeyError: 'prompt'" in proc.stderr, (proc.stderr[-3000:], logs_tail(out))
        assert not list((out / "checkpoints").glob("global_step_*"))
        assert_nothing_left(proc, out)
        assert_diagnosed_as(out, "'prompt'")



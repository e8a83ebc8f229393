"""`verl-ascend rehearse` of the shipped Qwen3-235B-A22B MoE recipe (TP4 PP8 EP4, 11-layer first and last stages,
full recompute, MindSpeed's use_flash_attn) with expert AND pipeline parallelism kept in one run.

4 ranks, the fewest that hold EP >= 2 and PP >= 2 (each pipeline stage needs 2 ranks for EP2): the plan scales the
recipe to TP2 PP2 EP2 ETP1 (megatron-core 0.16.1 splits a stage's ranks as ETP x EP x expert-DP, so EP2 x TP2 on
2 ranks needs ETP1), its first/last-stage split to 1 + 1 of a 2-layer tiny Qwen3-MoE (top-8 of 16 experts) and drops
use_flash_attn (no MindSpeed here: plain megatron-core's TransformerConfig refuses it). Everything asserted is read
from the run's own outputs: changes.txt, the converter's checkpoint, the workers' lines, the step metrics, the
checkpoint files. Cost: train 2 steps + resume 1 on 4 ranks (see docs/rehearse.md for the measured figures).
"""

import re
import tempfile
from pathlib import Path

from rehearsal_helpers import ROOT, assert_diagnosed_clean, assert_nothing_left, logs_tail, needs_09, rehearse, steps

RECIPE = ROOT / "recipes" / "grpo_qwen3_235b_a22b_a2.sh"
STEPS = 2
OTC = "actor_rollout_ref.actor.megatron.override_transformer_config"


def dcp_tensors(folder: Path) -> dict:
    """name -> global shape of the tensors a torch DCP (Megatron dist) checkpoint folder holds."""
    from torch.distributed.checkpoint import FileSystemReader

    meta = FileSystemReader(str(folder)).read_metadata()
    return {k: tuple(v.size) for k, v in meta.state_dict_metadata.items() if hasattr(v, "size")}


@needs_09
def test_the_235b_moe_recipe_rehearses_with_expert_and_pipeline_parallel_saves_and_resumes():
    with tempfile.TemporaryDirectory(prefix="va-rh-test-") as tmp:
        out = Path(tmp) / "out"
        proc = rehearse(out, "--nproc", "4", "--steps", str(STEPS), "--keep-model", recipe=RECIPE)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:] + logs_tail(out)
        changes = (out / "changes.txt").read_text()
        for expected in ("recipe TP4 PP8 EP4 ETP4 (megatron's default: TP) -> TP2 PP2 EP2 ETP1 (DP1) on 4 CPU rank(s); "
                         "kept TP PP EP; tiny model 2 layers",
                         "MoE kept: 16 experts, top-8 routing",
                         f"scaled: {OTC}.num_layers_in_first_pipeline_stage: 11 -> 1",
                         f"scaled: {OTC}.num_layers_in_last_pipeline_stage: 11 -> 1",
                         f"dropped: {OTC}.use_flash_attn: True -> (dropped)",
                         f"kept: {OTC}.recompute_num_layers: 1 -> 1",
                         f"kept: ++{OTC}.recompute_method=uniform", f"kept: ++{OTC}.recompute_granularity=full",
                         "initial weights: the tiny model converted by verl-ascend convert"):
            assert expected in changes, (expected, changes)

        # the converter's checkpoint holds the experts stacked as global tensors ([layers, experts, ...]): each
        # EP/PP rank of the run reads its own slice of them
        converted = dcp_tensors(out / "model_mcore")
        assert converted["decoder.layers.mlp.experts.experts.linear_fc1.weight"][:2] == (2, 16), converted
        assert converted["decoder.layers.mlp.router.weight"][:2] == (2, 16), converted

        # what each rank built, said by the rank itself: 2 pipeline stages x 2 expert ranks, MoE layers with a router
        log, resume_log = (out / "console.log").read_text(errors="replace"), (out / "console_resume.log").read_text()
        built = re.findall(r"\(WorkerDict pid=\d+\).*verl-ascend rehearse: model in rank (\d): TP rank (\d)/2, "
                           r"PP stage (\d)/2, EP rank (\d)/2: decoder layers \[(\d)\] of 2; MoE in 1 of them: router "
                           r"\(top-8\), experts \[([\d, ]+)\] of 16 here \(SequentialMLP\), token dispatcher (\w+)", log)
        ranks = {(int(r), int(pp), int(ep)) for r, _, pp, ep, *_ in built}
        assert {(pp, ep) for _, pp, ep in ranks} == {(0, 0), (0, 1), (1, 0), (1, 1)}, built
        for _, _, pp, ep, layer, experts, dispatcher in built:
            assert int(layer) == int(pp) + 1, built  # stage 0 holds layer 1, stage 1 layer 2: the 1 + 1 split
            assert [int(e) for e in experts.split(",")] == list(range(8 * int(ep), 8 * int(ep) + 8)), built
            assert dispatcher == "MoEAlltoAllTokenDispatcher", built  # the dispatcher verl picks, over gloo
        engines = set(re.findall(r"verl-ascend rehearse: engine in rank \d: (\w+) ", log))
        assert engines == {"MegatronEngineWithLMHead"}, engines

        train, resumed = steps(out / "console.log"), steps(out / "console_resume.log")
        assert sorted(train) == list(range(1, STEPS + 1)) and sorted(resumed) == [STEPS + 1], (train, resumed)
        assert "Resuming from" in resume_log or "Load from checkpoint" in resume_log, resume_log[-2000:]
        for step, metrics in {**train, **resumed}.items():
            assert metrics["actor/grad_norm"] > 0, (step, metrics)
            assert metrics["training/rollout_probs_diff_max"] < 1e-2, (step, metrics)  # the EP-gathered sync
        # every EP / PP rank got its own trained weights back exactly (not the initial ones), and the update moved them
        for line in (f"ok   resume loaded the weights global_step_{STEPS} saved: actor rank(s) 0, 1, 2, 3: each",
                     f"ok   the resumed update moved the weights (global_step_{STEPS + 1} against"):
            assert line in proc.stdout, (line, proc.stdout[-3000:])

        # the expert-parallel dist checkpoint: every rank's shard, the experts and router as global tensors
        model_ckpt = out / "checkpoints" / f"global_step_{STEPS}" / "actor" / "model" / "dist_ckpt"
        assert len(list(model_ckpt.glob("*.distcp"))) >= 4, sorted(p.name for p in model_ckpt.iterdir())
        saved = dcp_tensors(model_ckpt)
        experts = [k for k in saved if ".mlp.experts." in k and k.endswith("linear_fc1.weight")]
        assert experts and saved[experts[0]][:2] == (2, 16), (experts, saved)
        assert list((out / "checkpoints" / f"global_step_{STEPS}" / "actor" / "optimizer" / "dist_ckpt").glob("*.distcp"))
        for rank in range(4):
            assert re.search(rf"ckpt_validation in actor rank {rank} during load_checkpoint.*validated [1-9]\d* shard",
                             resume_log), rank
        assert_nothing_left(proc, out)
        assert_diagnosed_clean(out)

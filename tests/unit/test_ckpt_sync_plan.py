"""ckpt sync's plan: a copy a node's own check finds damaged is never a source (it would spread the damage)."""

import pytest

from verl_ascend.ckpt.sync import make_plan, not_copied

pytestmark = pytest.mark.verl_agnostic
STEP = "global_step_4/actor/"
FSDP = {STEP + "fsdp_config.json": 10, "global_step_4/data.pt": 5}


def _rank(r):
    return {STEP + f"{k}_world_size_2_rank_{r}.pt": 1000 for k in ("model", "optim", "extra_state")}


def test_a_damaged_longer_copy_loses_to_a_whole_one_and_a_lone_damaged_file_is_not_planned():
    a = {**FSDP, **_rank(0), **_rank(1)}
    b = {**_rank(1), STEP + "model_world_size_2_rank_1.pt": 1200}  # longer, but its check says damaged
    listings, trackers = {"a": a, "b": b}, {"a": "4", "b": None}
    plan, skipped, kept = make_plan(["a", "b"], listings, trackers, True)
    assert ("global_step_4/actor/model_world_size_2_rank_1.pt", "b", 1200) in plan["a"]  # longest wins unchecked
    damaged = {"b": {STEP + "model_world_size_2_rank_1.pt"}}
    plan, skipped, kept = make_plan(["a", "b"], listings, trackers, True, damaged)
    assert not [f for f in plan["a"] if f[0].endswith("model_world_size_2_rank_1.pt")]
    assert (STEP + "model_world_size_2_rank_1.pt", "a", 1000) in plan["b"]  # node a's whole copy replaces it
    assert kept == {4} and not_copied(listings, damaged) == {}
    alone = {"a": {**FSDP, **_rank(0)}, "b": _rank(1)}
    only = {"b": {STEP + "optim_world_size_2_rank_1.pt"}}
    plan, skipped, kept = make_plan(["a", "b"], alone, {"a": "4", "b": None}, True, only)
    assert kept == set() and skipped[0][0] == 4 and "optim_world_size_2_rank_1.pt" in skipped[0][1]
    assert not_copied(alone, only) == {STEP + "optim_world_size_2_rank_1.pt": ["b"]}

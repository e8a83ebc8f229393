"""ckpt_validation in this process: the fast checks give torch's own answers on thousands of layouts, the
contract is probed from behaviour, apply is idempotent and reverts. The status and bad-mode runs, which need a
fresh interpreter, are in tests/process/test_ckpt_validation.py."""

import random

import pytest
import torch
import torch.distributed._shard.sharded_tensor.api as sharded_tensor_api
import torch.distributed._shard.sharding_spec._internals as internals
import torch.distributed.checkpoint.default_planner as default_planner
import torch.distributed.checkpoint.planner_helpers as planner_helpers
from ckpt_layouts import layouts
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed.checkpoint.metadata import ChunkStorageMetadata

from verl_ascend.patches import ckpt_validation as patch
from verl_ascend.patches.ckpt_validation import shard_checks
from verl_ascend.patches.ckpt_validation import validators as impl

# Tests of torch's own behaviour run in every environment, each with its torch (2.13, 2.7.1, 2.5.1):
# they assert what the installed torch answers, found by calling it, never one torch's answer.
per_torch = pytest.mark.field_stack
agnostic = pytest.mark.verl_agnostic  # torch-independent, or the same on every torch
ORIG_SHARDS = patch._current(internals, "validate_non_overlapping_shards_metadata")
ORIG_PLAN = patch._current(default_planner, "_validate_global_plan")
ORIG_READ = patch._current(planner_helpers, "create_read_items_for_chunk_list")
CONTRACT = impl.probe_plan_contract(ORIG_PLAN, default_planner)
FAST_SHARDS = impl.fast_shard_check(ORIG_SHARDS)
FAST_PLAN = impl.fast_plan_check(ORIG_PLAN, default_planner, CONTRACT)
FAST_READ = impl.fast_read_items(ORIG_READ, planner_helpers)


def _verdict(func, shards):
    try:
        func(shards)
    except ValueError as exc:
        return str(exc)
    return None


def _shards(chunks):
    return [ShardMetadata(shard_offsets=list(o), shard_sizes=list(s), placement=None) for o, s in chunks]


@per_torch
def test_load_side_verdicts_match_torch_on_5000_layouts():
    rejected = 0
    for size, chunks, kind, defect in layouts(seed=4, count=5000, allow_negative=False):
        shards = _shards(chunks)
        want, got = _verdict(ORIG_SHARDS, shards), _verdict(FAST_SHARDS, shards)
        assert (want is None) == (got is None), (kind, defect, size, chunks, want, got)
        if got is not None:
            rejected += 1
            assert got.startswith("Shards ShardMetadata(") and got.endswith(" overlap")
    assert 1000 < rejected < 4000  # the planted defects really are caught, and not everything is


@per_torch
def test_save_side_errors_match_torch_on_5000_layouts():
    """A list-returning torch (2.10+): the same messages in the same order. A bool-returning one
    (<= 2.9): the same verdict (what it logs is not compared here: docs/ckpt_validation.md)."""
    lists = CONTRACT["returns"] == "list"
    counts = {"valid": 0, "overlapping": 0, "out of bounds": 0, "invalid fill": 0} if lists else {"valid": 0, "rejected": 0}
    layout_list = list(layouts(seed=5, count=5000))
    for n, (size, chunks, kind, defect) in enumerate(layout_list):
        extra_size, extra_chunks, _, _ = layout_list[(n * 7 + 3) % len(layout_list)]
        md = impl._plan_metadata({"a": (size, chunks), "b.x": (extra_size, extra_chunks)})
        for plans in (1, 2):
            with impl._quiet(default_planner):
                want = ORIG_PLAN(impl._plans(plans), md)
                got = FAST_PLAN(impl._plans(plans), md)
            assert type(got) is type(want) and got == want, (kind, defect, size, chunks, want, got)
            if plans == 2 and lists:
                counts["valid"] += not want
                for word in counts:
                    counts[word] += sum(word in message for message in want)
            elif plans == 2:
                counts["valid" if want else "rejected"] += 1
    assert all(count > 300 for count in counts.values()), counts


def _chunks(boxes):
    return [ChunkStorageMetadata(offsets=torch.Size(o), sizes=torch.Size(s)) for o, s in boxes]


@per_torch
def test_read_planning_matches_torch_on_random_reshardings():
    rng = random.Random(6)
    for size, chunks, kind, defect in layouts(seed=6, count=1500, allow_negative=False):
        if defect not in ("none", "zero_size", "hole"):
            continue
        saved = impl._plan_metadata({"w": (size, chunks)}).state_dict_metadata["w"]
        local = chunks[: rng.randint(1, len(chunks))] if chunks else []
        rng.shuffle(local)
        want = sorted(map(impl._read_key, ORIG_READ("w", saved, _chunks(local))))
        got = sorted(map(impl._read_key, FAST_READ("w", saved, _chunks(local))))
        assert got == want, (kind, size, chunks, local)


@agnostic
def test_pairs_match_brute_force_with_negative_and_empty_sizes():
    rng = random.Random(7)
    for _ in range(1500):
        ndim, n = rng.randint(0, 3), rng.randint(0, 14)
        offs = [tuple(rng.randint(-1, 4) for _ in range(ndim)) for _ in range(n)]
        sizes = [tuple(rng.randint(-1, 3) for _ in range(ndim)) for _ in range(n)]
        brute = [
            (i, j) for i in range(n) for j in range(i + 1, n)
            if shard_checks.boxes_overlap(offs[i], sizes[i], offs[j], sizes[j])
        ]
        assert sorted(shard_checks.overlapping_pairs(offs, sizes)) == brute
        cross = [(i, j) for i in range(n) for j in range(n) if shard_checks.boxes_overlap(offs[i], sizes[i], offs[j], sizes[j])]
        assert shard_checks.crossing_pairs(offs, sizes, offs, sizes) == cross


def _legacy_plan_check(global_plan, metadata):
    """torch <= 2.9's contract: bool, volume checked always (built from a list-returning torch's function)."""
    plans = global_plan if len(global_plan) > 1 else global_plan * 2 or [None, None]
    return not ORIG_PLAN(plans, metadata)


def _installed_answers() -> dict:
    """What the installed torch's own function answers, asked here on layouts of this test's own."""
    valid = impl._plan_metadata({"a": ((4, 4), [((0, 0), (2, 4)), ((2, 0), (2, 4))])})
    holed = impl._plan_metadata({"a": ((4, 4), [((0, 0), (2, 4))])})  # half the tensor is missing
    with impl._quiet(default_planner):
        answer = ORIG_PLAN(impl._plans(1), valid)
        single_hole = ORIG_PLAN(impl._plans(1), holed)
        multi_hole = ORIG_PLAN(impl._plans(2), holed)
    returns = "list" if isinstance(answer, list) else "bool"
    rejected = (lambda a: bool(a)) if returns == "list" else (lambda a: a is False)
    assert rejected(multi_hole)  # every torch checks the volume of a multi-rank plan
    return {"returns": returns, "volume": "always" if rejected(single_hole) else "multi-rank plans"}


@per_torch
def test_contract_is_probed_from_behaviour():
    assert CONTRACT == _installed_answers()
    legacy = impl.probe_plan_contract(
        ORIG_PLAN if CONTRACT["returns"] == "bool" else _legacy_plan_check, default_planner)
    if CONTRACT["returns"] == "bool":  # the installed torch is the legacy one: what it says, the probe says
        assert legacy == CONTRACT
        _check_legacy_wrappers(ORIG_PLAN, legacy)
    else:
        assert legacy == {"returns": "bool", "volume": "always"}
        _check_legacy_wrappers(_legacy_plan_check, legacy)
    # skip answers "valid" in the installed torch's own form
    skipped = impl.skip_plan_check(ORIG_PLAN, CONTRACT)(impl._plans(2), impl._plan_metadata({"a": ((2,), [((0,), (3,))])}))
    assert skipped == ([] if CONTRACT["returns"] == "list" else True) and type(skipped) is (list if CONTRACT["returns"] == "list" else bool)


def _check_legacy_wrappers(legacy_check, legacy):
    fast_legacy = impl.fast_plan_check(legacy_check, default_planner, legacy)
    skip_legacy = impl.skip_plan_check(legacy_check, legacy)
    for size, chunks, _, _ in layouts(seed=8, count=400):
        md = impl._plan_metadata({"a": (size, chunks)})
        with impl._quiet(default_planner):
            assert fast_legacy(impl._plans(1), md) is legacy_check(impl._plans(1), md)
        assert skip_legacy(impl._plans(1), md) is True
    with pytest.raises(ValueError, match="answered"):
        impl.probe_plan_contract(lambda plans, md: None, default_planner)


@per_torch
def test_apply_is_idempotent_reaches_importers_and_reverts(monkeypatch):
    monkeypatch.setenv(patch.ENV, "fast")
    patch.revert()
    assert sharded_tensor_api.validate_non_overlapping_shards_metadata is ORIG_SHARDS
    try:
        for module in (internals, default_planner, planner_helpers):
            assert patch._applies(module) is None
            first = patch._apply(module)
            assert first.startswith("fast: ")
            assert "already replaced" in patch._apply(module)
        replaced = internals.validate_non_overlapping_shards_metadata
        assert replaced is not ORIG_SHARDS and replaced.__wrapped__ is ORIG_SHARDS
        assert sharded_tensor_api.validate_non_overlapping_shards_metadata is replaced  # imported by name
        assert default_planner._validate_global_plan.verl_ascend_mode == "fast"
    finally:
        patch.revert()
    assert sharded_tensor_api.validate_non_overlapping_shards_metadata is ORIG_SHARDS
    assert default_planner._validate_global_plan is ORIG_PLAN
    assert planner_helpers.create_read_items_for_chunk_list is ORIG_READ


@agnostic
def test_modes_and_bad_value(monkeypatch):
    monkeypatch.setenv(patch.ENV, "stock")
    assert "stock" in patch._applies(internals)
    monkeypatch.setenv(patch.ENV, "quick")
    with pytest.raises(ValueError, match="'quick'.*=fast .*=skip .*=stock "):  # names the value and every mode
        patch._applies(internals)

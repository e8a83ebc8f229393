"""Property tests with the real DataProto: tiled dispatch spreads samples, and every row comes home.

Each case builds a trainer-side batch the way ``RayPPOTrainer.fit`` / ``_validate`` do (uid,
ground truth and extra fields per prompt; ``repeat(n, interleave=True)``; validation padding with
``pad_dataproto_to_divisor``; REMAX's extra greedy row per prompt), sends it through the patch's
wrapper around a generator shaped like verl's ``AgentLoopManager.generate_sequences`` body
(``prompts.chunk(workers)`` -> one worker per chunk -> ``DataProto.concat``), and re-joins it with
the trainer's ``batch.repeat(n).union(output)``. The stand-in worker answers with the prompt id
it read from the row plus (worker, position) so that lost, duplicated or misplaced rows show.
"""

import random
import sys
from collections import Counter, defaultdict

import torch
from subproc import FAKES
from verl.protocol import DataProto, pad_dataproto_to_divisor, unpad_dataproto

from verl_ascend.patches import rollout_order

sys.path.insert(0, str(FAKES / "rollout"))
from echo_rollout import make_batch  # noqa: E402  (the trainer-side batch the Ray test uses too)

CASES = 1000


def generate_body(log):
    """Shaped like verl's manager: split by position, one worker per chunk, concatenate in order."""

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        outputs = []
        for worker, chunk in enumerate(prompts.chunk(self["workers"])):
            prompt_ids = (chunk.batch["input_ids"][:, 0] // 10).tolist()
            log[worker].extend(prompt_ids)
            responses = torch.tensor([[p, worker, pos] for pos, p in enumerate(prompt_ids)], dtype=torch.long)
            out = DataProto.from_single_dict({"responses": responses.reshape(-1, 3)})
            out.non_tensor_batch["uid"] = chunk.non_tensor_batch["uid"].copy()  # union checks these
            outputs.append(out)
        return DataProto.concat(outputs)

    return generate_sequences


def run_case(rng: random.Random, tiled: bool):
    prompts, n, workers = rng.randint(1, 24), rng.randint(1, 17), rng.randint(1, 16)
    mode = rng.choice(["train", "validate", "remax"])
    batch = make_batch(prompts)
    gen_batch = batch.select(batch_keys=["input_ids", "attention_mask"],
                             non_tensor_batch_keys=["uid", "reward_model", "extra_info"],
                             deepcopy=True)
    dispatched = gen_batch.repeat(repeat_times=n, interleave=True)
    sampled = len(dispatched)
    if mode == "remax":  # one greedy row per prompt rides with the sampled rows (verl 0.8+)
        dispatched = DataProto.concat([dispatched, gen_batch.slice(0, None)])
    pad = 0
    if mode == "validate" or len(dispatched) % workers:
        dispatched, pad = pad_dataproto_to_divisor(dispatched, workers)

    log = defaultdict(list)
    body = generate_body(log)
    call = rollout_order.reorder_around(body) if tiled else body
    output = unpad_dataproto(call({"workers": workers}, dispatched), pad_size=pad)

    # trainer side: the rows it gets back, then batch.repeat(n).union(...) exactly as fit() does
    output = output.slice(0, sampled)
    merged = batch.repeat(repeat_times=n, interleave=True).union(output)  # raises on a uid mismatch
    return dict(prompts=prompts, n=n, workers=workers, mode=mode, pad=pad, log=log, merged=merged,
                total=len(dispatched))


def misalignments(case) -> int:
    merged = case["merged"]
    prompt = (merged.batch["input_ids"][:, 0] // 10).tolist()
    responses = merged.batch["responses"].tolist()
    columns = merged.non_tensor_batch
    bad = 0
    for row, (p, (echoed, _worker, _pos)) in enumerate(zip(prompt, responses)):
        bad += echoed != p
        bad += columns["uid"][row] != f"uid-{p}"
        bad += columns["reward_model"][row]["ground_truth"] != f"gt-{echoed}"
        bad += columns["extra_info"][row]["index"] != echoed
        bad += row // case["n"] != p  # the trainer's order is still interleaved
    bad += len({(w, pos) for _, w, pos in responses}) != len(responses)  # a row generated twice
    return bad


def spread_violations(case) -> int:
    """Prompts whose samples a worker holds fewer than floor(n/W) or more than ceil(n/W) of."""
    n, workers = case["n"], case["workers"]
    lo, hi = n // workers, -(-n // workers)
    counts = {w: Counter(ids) for w, ids in case["log"].items()}
    bad = 0
    for p in range(case["prompts"]):
        per_worker = [counts.get(w, Counter())[p] for w in range(workers)]
        bad += not all(lo <= c <= hi for c in per_worker)
        bad += sum(c > 0 for c in per_worker) != min(n, workers)
    return bad


def test_tiled_dispatch_spreads_and_realigns_every_row():
    rng = random.Random(20261129)
    checked = {"train": 0, "validate": 0, "remax": 0}
    regular = 0
    for _ in range(CASES):
        case = run_case(rng, tiled=True)
        assert misalignments(case) == 0, case
        received = sum(len(v) for v in case["log"].values())
        assert received == case["total"], "a worker lost or gained rows"
        checked[case["mode"]] += 1
        if case["mode"] == "train" and case["pad"] == 0:
            # the regular case verl runs every step: exact spread
            assert spread_violations(case) == 0, case
            regular += 1
        else:
            # Padding / REMAX rows take the last rounds, so the P*n sampled rows still fill the first
            # floor(P*n / chunk) chunks in tiled order: every prompt reaches that many workers (or n).
            chunk = case["total"] // case["workers"]
            reachable = min(case["n"], case["prompts"] * case["n"] // chunk)
            for p in range(case["prompts"]):
                holders = sum(p in ids for ids in case["log"].values())
                assert holders >= reachable, case
    assert min(checked.values()) > 200 and regular > 100, (checked, regular)


def test_stock_order_fails_the_spread_property():
    # Shows the property can fail: verl's own order keeps each prompt on one worker.
    rng = random.Random(7)
    violated = 0
    for _ in range(200):
        case = run_case(rng, tiled=False)
        assert misalignments(case) == 0
        if case["mode"] == "train" and case["pad"] == 0 and case["n"] > 1 and case["workers"] > 1:
            violated += spread_violations(case) > 0
    assert violated >= 10


def test_identity_cases_pass_the_same_object_through():
    batch = make_batch(5)  # n = 1: nothing to spread, no copy made
    tiled, inv = rollout_order.to_tiled(batch)
    assert tiled is batch and inv is None


def test_group_key_falls_back_to_prompt_tokens():
    gen = make_batch(4).repeat(3, interleave=True)
    gen.pop(non_tensor_batch_keys=["uid"])  # 0.6.x sync rollout: the gen batch carries no uid
    keys, source = rollout_order.group_keys(gen)
    assert source == "input_ids"
    tiled, inv = rollout_order.to_tiled(gen)
    assert (tiled.batch["input_ids"][:, 0] // 10).tolist() == [0, 1, 2, 3] * 3
    assert torch.equal(tiled.select_idxs(inv).batch["input_ids"], gen.batch["input_ids"])


def test_wrong_row_count_is_an_error_naming_the_switch():
    gen = make_batch(2).repeat(2, interleave=True)

    def drops_a_row(self, prompts):
        return prompts.slice(0, len(prompts) - 1)

    call = rollout_order.reorder_around(drops_a_row)
    try:
        call(None, gen)
    except RuntimeError as exc:
        assert "VERL_ASCEND_ROLLOUT_ORDER=interleaved" in str(exc)
    else:
        raise AssertionError("a lost row went unnoticed")


def test_verls_decorators_keep_seeing_verls_order():
    """0.7+ stacks auto_await and (0.9) SkipManager.annotate on the manager's generate_sequences;
    the reorder goes inside them, so a rollout dump/replay layer records the trainer's order."""
    import functools

    seen = {}

    def recording(func):  # stands in for SkipManager.annotate: keeps func in its closure
        @functools.wraps(func)
        def wrapper(self, prompts):
            seen["decorator_in"] = (prompts.batch["input_ids"][:, 0] // 10).tolist()
            out = func(self, prompts)
            seen["decorator_out"] = (out.batch["responses"][:, 0] // 10).tolist()
            return out

        return wrapper

    class Manager:
        @recording
        def generate_sequences(self, prompts):
            seen["body_in"] = (prompts.batch["input_ids"][:, 0] // 10).tolist()
            return DataProto.concat([chunk.select(batch_keys=["input_ids"]).rename("input_ids", "responses")
                                     for chunk in prompts.chunk(2)])

    before = Manager.generate_sequences
    rollout_order._wrap_manager(Manager)
    rollout_order._wrap_manager(Manager)  # idempotent
    assert Manager.generate_sequences is before  # patched inside, the decorator itself is untouched
    Manager().generate_sequences(make_batch(2).repeat(3, interleave=True))
    assert seen["body_in"] == [0, 1, 0, 1, 0, 1]
    assert seen["decorator_in"] == seen["decorator_out"] == [0, 0, 0, 1, 1, 1]
    rollout_order.revert()
    Manager().generate_sequences(make_batch(2).repeat(3, interleave=True))
    assert seen["body_in"] == [0, 0, 0, 1, 1, 1]

"""patches/torch: the checkpoint-validation diff applies to the installed torch and to 2.7.1, and a
patched torch finds exactly the overlaps, out-of-bounds chunks and volume errors stock torch finds.

The observable behaviour of the runtime patch ``ckpt_validation`` is "same verdicts and errors as
torch, in near-linear time"; here the patched validators are compared with the pristine ones on
random layouts (overlaps, empty chunks, out-of-bounds chunks included) and run on a MoE expert stack
of 16,384 chunks with one injected overlap, which the stock sweep would take tens of seconds on.
"""

import shutil
import subprocess

import pytest
from subproc import clean_env, last_json, run_cli, run_python
from upstream_trees import installed_torch_release, installed_torch_root, torch_overlay, torch_tree

from verl_ascend.diffs.check import dry_run, load_diffs

TORCH_DIFFS = [d for d in load_diffs() if d.project == "torch"]
INTERNALS = "torch/distributed/_shard/sharding_spec/_internals.py"
PLANNER = "torch/distributed/checkpoint/default_planner.py"


def _apply(diff, root):
    proc = subprocess.run(["git", "apply", "-p1", str(diff)], cwd=root, capture_output=True, text=True, timeout=60,
                          env={**clean_env(), "GIT_CEILING_DIRECTORIES": str(root.parent)})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("diff", TORCH_DIFFS, ids=lambda d: f"{d.version}/{d.fix}")
def test_torch_diff_applies(diff):
    root = torch_tree(diff.version)
    ok, message = dry_run(diff.path, root)
    assert ok, message
    proc = subprocess.run(["patch", "-p1", "--dry-run", "--batch", "--forward", "--fuzz=0", "-i", str(diff.path)],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# Loads the pristine validators from files under other module names and compares them with the
# patched ones on the same layouts. {patched} sets `internals` and `planner` to the patched modules.
PROBE = """
import importlib, importlib.util, json, logging, random, sys
import torch
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata, Metadata, TensorProperties,
                                                   TensorStorageMetadata)
from torch.distributed.checkpoint.planner import SavePlan


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


stock_internals = load("torch.distributed._shard.sharding_spec._internals_stock", {stock_internals!r})
stock_planner = load("torch.distributed.checkpoint.default_planner_stock", {stock_planner!r})
{patched}
assert hasattr(internals, "_find_overlapping_boxes") and not hasattr(stock_internals, "_find_overlapping_boxes")


class Messages(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(" ".join(record.getMessage().split()))


def plan_check(module, size, boxes):
    handler = Messages()
    logger = module.logger
    logger.addHandler(handler)
    logger.propagate = False
    try:
        chunks = [ChunkStorageMetadata(offsets=torch.Size(o), sizes=torch.Size(s)) for o, s in boxes]
        meta = Metadata(state_dict_metadata={{"w": TensorStorageMetadata(
            properties=TensorProperties(dtype=torch.float32), size=torch.Size(size), chunks=chunks)}})
        answer = module._validate_global_plan([SavePlan([]), SavePlan([])], meta)
    finally:
        logger.removeHandler(handler)
    ok = answer if isinstance(answer, bool) else not answer
    # one line per finding; a pair may be printed in either order by different algorithms
    found = sorted(" | ".join(sorted(line.split("chunks: ", 1)[1].replace(") C", ")\\0C").split("\\0")))
                   if "overlapping" in line else line for line in handler.lines)
    return ok, found


def shard_check(module, boxes):
    shards = [ShardMetadata(shard_offsets=list(o), shard_sizes=list(s), placement="rank:0/cpu") for o, s in boxes]
    try:
        module.validate_non_overlapping_shards_metadata(shards)
        return "ok"
    except ValueError as exc:
        return "overlap" if "overlap" in str(exc) else str(exc)


rng = random.Random(7)
cases = mismatches = overlapping = 0
examples = []
for _ in range(400):
    ndim = rng.choice([1, 2, 3])
    size = [rng.randint(1, 6) for _ in range(ndim)]
    boxes = []
    for _ in range(rng.randint(2, 7)):
        offsets = [rng.randint(0, s) for s in size]
        sizes = [rng.randint(0, max(0, s - o) + rng.choice([0, 0, 0, 1])) for s, o in zip(size, offsets)]
        boxes.append((offsets, sizes))
    if rng.random() < 0.3:  # exact grids too
        boxes = [([i], [1]) for i in range(size[0])] if ndim == 1 else boxes
    cases += 1
    stock = (plan_check(stock_planner, size, boxes), shard_check(stock_internals, boxes))
    patched = (plan_check(planner, size, boxes), shard_check(internals, boxes))
    overlapping += stock[1] == "overlap"
    if stock != patched:
        mismatches += 1
        examples.append({{"boxes": boxes, "size": size, "stock": stock, "patched": patched}})

# MoE expert stack: (layers, experts, 3072, 4096) split (layers, experts, 4, 1), one duplicate chunk
L, E, S = 16, 256, 4
stack = [([l, e, k * 768, 0], [1, 1, 768, 4096]) for l in range(L) for e in range(E) for k in range(S)]
stack.append(([7, 100, 1000, 0], [1, 1, 768, 4096]))  # overlaps two chunks of expert 100 in layer 7
ok, found = plan_check(planner, [L, E, 3072, 4096], stack)
shard = shard_check(internals, stack)
print(json.dumps({{"cases": cases, "overlapping": overlapping, "mismatches": mismatches, "examples": examples[:3],
                  "stack": {{"chunks": len(stack), "ok": ok, "found": found, "shard": shard}}}}))
"""


def _check_behaviour(out):
    assert out["cases"] == 400 and out["overlapping"] > 20, out  # the random layouts do contain overlaps
    assert out["mismatches"] == 0, out["examples"]
    stack = out["stack"]
    assert stack["chunks"] == 16 * 256 * 4 + 1 and stack["ok"] is False and stack["shard"] == "overlap"
    overlaps = [line for line in stack["found"] if "|" in line]
    assert len(overlaps) == 2 and all("offsets=torch.Size([7, 100, 1000, 0])" in line for line in overlaps)
    assert any("invalid fill" in line for line in stack["found"])  # the extra chunk breaks the volume too


# not verl_agnostic: each full environment has its own torch (2.13.0, 2.7.1), each with its own diff
def test_patched_installed_torch_matches_stock_and_handles_expert_stacks(tmp_path):
    version = installed_torch_release()
    diff = next((d for d in TORCH_DIFFS if d.version == version), None)
    if diff is None:
        pytest.skip(f"no ckpt_validation diff for the installed torch {version}")
    overlay = torch_overlay(tmp_path, {INTERNALS, PLANNER})
    _apply(diff.path, overlay)
    root = installed_torch_root()
    patched = ("import torch.distributed._shard.sharding_spec._internals as internals\n"
               "import torch.distributed.checkpoint.default_planner as planner\n"
               f"assert internals.__file__.startswith({str(overlay)!r}) and planner.__file__.startswith({str(overlay)!r})")
    code = PROBE.format(stock_internals=str(root / INTERNALS), stock_planner=str(root / PLANNER), patched=patched)
    env = clean_env(VERL_ASCEND="0", PYTHONPATH=str(overlay))
    _check_behaviour(last_json(run_python(code, env=env, timeout=300)))
    # the CLI tells the patched tree from the installed one
    patched_report = run_cli("patches", "check", "--source", str(overlay))
    stock_report = run_cli("patches", "check", "--project", "torch")
    assert patched_report.returncode == 0 and stock_report.returncode == 0, patched_report.stderr + stock_report.stderr
    assert f"torch {version}" in patched_report.stdout
    assert "ckpt_validation" in patched_report.stdout and "already applied" in patched_report.stdout
    assert "ckpt_validation" in stock_report.stdout and "applies" in stock_report.stdout


@pytest.mark.verl_agnostic
def test_patched_torch_2_7_1_sources_match_stock(tmp_path):
    # torch 2.7.1 itself is not installed here: its two validator modules are loaded, pristine and
    # patched, under the installed torch (their imports exist there too).
    diff = next(d for d in TORCH_DIFFS if d.version == "2.7.1")
    tree = torch_tree("2.7.1")
    shutil.copytree(tree / "torch", tmp_path / "torch")
    report = run_cli("patches", "check", "--source", str(tmp_path))
    assert report.returncode == 0 and "torch 2.7.1" in report.stdout and "applies" in report.stdout, report.stdout
    _apply(diff.path, tmp_path)
    patched = (f"internals = load('torch.distributed._shard.sharding_spec._internals', {str(tmp_path / INTERNALS)!r})\n"
               f"planner = load('torch.distributed.checkpoint.default_planner_patched', {str(tmp_path / PLANNER)!r})")
    code = PROBE.format(stock_internals=str(tree / INTERNALS), stock_planner=str(tree / PLANNER), patched=patched)
    _check_behaviour(last_json(run_python(code, env=clean_env(VERL_ASCEND="0"), timeout=300)))

"""`verl-ascend diagnose` on real console output of a planted fault: a dist checkpoint missing one tensor.

tests/fixtures/diagnose/faults/ckpt_missing_tensor.log is what megatron-core, torch DCP and Ray printed when the
fault of tests/process/test_rehearse_faults.py was loaded (its README says how it was made). Ray prints its
wrappers (``RayTaskError(CheckpointException)``) above the KeyError that names the tensor; the headline must be
the tensor, not the wrapper.
"""

from pathlib import Path

import pytest
from test_diagnose import cli_run, diagnose

pytestmark = pytest.mark.verl_agnostic
FAULTS = Path(__file__).parents[1] / "fixtures" / "diagnose" / "faults"
LOG = FAULTS / "ckpt_missing_tensor.log"
DROPPED = "decoder.layers.mlp.linear_fc2.weight"


def test_the_generator_planted_the_tensor_the_headline_names():
    # the log says which tensor its generator dropped; the expectation is read from it, not assumed
    assert f"dropped {DROPPED}" in LOG.read_text()


def test_a_checkpoint_missing_a_tensor_headlines_the_tensor_not_rays_wrapper(capsys):
    result = diagnose(LOG)
    assert result["exit_code"] == 1
    assert [f["code"] for f in result["findings"]] == ["ckpt_missing_tensor"]
    first = result["first_failure"]
    assert first["family"] == "ckpt_missing_tensor" and first["names"] == DROPPED
    assert "from model not in state dict" in first["text"] and "RayTaskError" not in first["text"]
    found = result["findings"][0]
    assert "verl-ascend ckpt check" in found["fix"]
    assert any(DROPPED in note for note in found["details"]["notes"])
    assert found["where"]["raised_at"].endswith("in _validate_global_shapes")
    # Ray's wrappers and torch's CheckpointException are counted as its echo, not shown as a second failure
    assert result["unrecognised_lines"] >= 2
    code, out, _ = cli_run(capsys, "diagnose", LOG)
    headline = next(line for line in out.splitlines() if line.startswith("first failure:"))
    assert code == 1 and f"(ckpt_missing_tensor: {DROPPED})" in headline


def test_the_missing_tensor_keyerror_is_not_read_as_mindspeed_without_qk_norm():
    # megatron's KeyError lists every key the checkpoint has; this one holds a q_layernorm weight, which
    # mindspeed_too_old's pattern (a KeyError naming q/k_layernorm) would otherwise take
    assert "q_layernorm" in LOG.read_text().splitlines()[-1]
    assert "mindspeed_too_old" not in [f["code"] for f in diagnose(LOG)["findings"]]

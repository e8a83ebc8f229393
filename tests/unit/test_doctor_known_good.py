"""doctor: this node's vllm / torch / torch_npu / CANN against vllm-ascend's published compatibility row."""

import pytest

from verl_ascend.doctor import known_good

pytestmark = pytest.mark.verl_agnostic


def test_matching_set_is_ok():
    found = known_good.check({"vllm-ascend": "0.11.0", "vllm": "0.11.0", "torch": "2.7.1+cpu", "torch_npu": "2.7.1.post1"},
                             cann_version="8.3.RC2")
    assert [f.severity for f in found] == ["ok"]


def test_mismatch_names_each_package_and_the_tested_set():
    found = known_good.check({"vllm-ascend": "0.11.0", "vllm": "0.11.1", "torch": "2.8.0", "torch_npu": "2.7.1.post1"})
    assert [f.severity for f in found] == ["warning"]
    assert "vllm 0.11.1 (tested: 0.11.0)" in found[0].message and "torch 2.8.0 (tested: 2.7.1)" in found[0].message
    assert "torch_npu" not in found[0].message.split("this node has")[1]
    assert "pip install vllm==0.11.0 torch==2.7.1 torch-npu==2.7.1.post1" in found[0].fix
    assert known_good.SOURCE in found[0].fix


def test_the_post_release_vllm_a_row_allows():
    found = known_good.check({"vllm-ascend": "0.10.1rc1", "vllm": "0.10.1.1", "torch": "2.7.1", "torch_npu": "2.7.1.dev20250724"})
    assert [f.severity for f in found] == ["ok"]


def test_unknown_or_absent_vllm_ascend_is_a_skip():
    assert [f.severity for f in known_good.check({"vllm-ascend": "0.99.0"})] == ["skip"]
    assert [f.severity for f in known_good.check({})] == ["skip"]


def test_rows_are_well_formed():
    seen = set()
    for row in known_good.ROWS:
        assert len(row) == len(known_good.COLUMNS) and all(row) and row[0] not in seen
        seen.add(row[0])

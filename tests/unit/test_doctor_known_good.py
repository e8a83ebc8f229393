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


# verl's own install guide names one Ascend stack for verl 0.9.x (core/stacks.py): where a node departs
GUIDE = {"verl": "0.9.1", "torch": "2.10.0+cpu", "torch-npu": "2.10.0.post4", "transformers": "5.10.4", "vllm": "0.23.0",
         "vllm-ascend": "0.23.0", "megatron-core": "0.16.1"}


def test_the_guides_stack_is_ok_and_a_python_it_accepts_is_only_named():
    found = known_good.check_verl_stack(GUIDE, (3, 12, 1), ascend_host=True)
    assert [f.severity for f in found] == ["ok"] and "(" not in found[0].message
    found = known_good.check_verl_stack(GUIDE, (3, 11, 7), ascend_host=True)
    assert [f.severity for f in found] == ["ok"] and "python 3.11 (guide recommends 3.12" in found[0].message


def test_each_departure_is_named_with_the_guides_version_and_source():
    node = dict(GUIDE, torch="2.13.0", **{"torch-npu": "2.9.0", "megatron-core": "0.160.0"})
    found = known_good.check_verl_stack(node, (3, 13, 0), ascend_host=True)
    assert [f.severity for f in found] == ["warning"]
    for part in ("torch 2.13.0 (guide: 2.10.0)", "torch_npu 2.9.0 (guide: 2.10.0.post4)", "megatron-core 0.160.0 (guide: 0.16)",
                 "python 3.13 (guide: 3.12, accepts 3.10-3.12)"):
        assert part in found[0].message, found[0].message
    assert "transformers" not in found[0].message.split("this environment has")[1]
    assert known_good.VERL_SOURCE in found[0].fix


def test_absent_packages_are_no_departure_and_off_ascend_nothing_is_judged():
    found = known_good.check_verl_stack({"verl": "0.9.1", "torch": "2.13.0"}, (3, 12, 0), ascend_host=False)
    assert [f.severity for f in found] == ["skip"] and "torch 2.13.0 (guide: 2.10.0)" in found[0].message
    assert "vllm" not in found[0].message.split("this environment has")[1]


def test_other_verl_releases_are_not_held_to_the_09_stack():
    for verl in ("0.6.1", "0.8.0", "0.10.0"):
        found = known_good.check_verl_stack(dict(GUIDE, verl=verl, torch="2.7.1"), (3, 11, 0), ascend_host=True)
        assert [f.severity for f in found] == ["skip"] and verl in found[0].message
    assert [f.severity for f in known_good.check_verl_stack({}, (3, 12, 0), True)] == ["skip"]

"""Shared pytest setup.

Tests run once per verl version (dev/with-verl.sh). Tests that do not touch verl at all carry
``@pytest.mark.verl_agnostic`` and run only in the first environment, to keep CI inside its budget.
"""

import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "verl_agnostic: does not touch verl; runs in the first test environment only")


# The longest test files, longest first (measured with --durations). With `-n 2 --dist loadfile` each
# file goes whole to the next free worker in collection order: starting the long ones first keeps one
# worker from running the rehearsal alone at the end. Order only; every test still runs.
LONGEST_FIRST = ("test_rehearse.py", "test_doctor_cli.py", "test_device.py", "test_check.py", "test_convert.py",
                 "test_broken_torch_npu.py", "test_ckpt_sync.py", "test_ckpt_validation.py", "test_check_profiles.py",
                 "test_quiet.py", "test_activation.py", "test_registry.py", "test_ray_workers.py", "test_check_wild.py")


def _rank(item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: within a file, and among the rest, collection order stays
    if os.environ.get("VERL_ASCEND_TEST_ENV_INDEX", "0") == "0":
        return
    skip = pytest.mark.skip(reason="verl-independent; runs in the first test environment")
    for item in items:
        if "verl_agnostic" in item.keywords:
            item.add_marker(skip)

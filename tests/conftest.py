"""Shared pytest setup.

Tests run once per verl version (dev/with-verl.sh). Tests that do not touch verl at all carry
``@pytest.mark.verl_agnostic`` and run only in the first environment, to keep CI inside its budget.
"""

import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "verl_agnostic: does not touch verl; runs in the first test environment only")


# The longest files (each a few main_ppo runs) go first: `--dist loadfile` hands files out in collection
# order, so started last they would leave one worker running them alone at the end.
LONGEST_FIRST = ("test_rehearse.py", "test_rehearse_dapo.py", "test_rehearse_faults.py")


def pytest_collection_modifyitems(config, items):
    order = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(order)))  # stable: the rest keep their order
    if os.environ.get("VERL_ASCEND_TEST_ENV_INDEX", "0") == "0":
        return
    skip = pytest.mark.skip(reason="verl-independent; runs in the first test environment")
    for item in items:
        if "verl_agnostic" in item.keywords:
            item.add_marker(skip)

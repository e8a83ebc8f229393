"""Shared pytest setup.

Tests run once per verl version (dev/with-verl.sh). Tests that do not touch verl at all carry
``@pytest.mark.verl_agnostic`` and run only in the first environment, to keep CI inside its budget.

A small environment for one users' stack runs only the tests that declare themselves for it: its
requirements file names a marker (``# test-marker: field_stack`` in dev/requirements-verl-0.5.0.txt),
dev/with-verl.sh passes it as ``VERL_ASCEND_TEST_MARKER``, and every other test is deselected there
(it runs in the full environments). If nothing is marked, pytest exits 5 and with-verl.sh fails.
"""

import os

import pytest


def pytest_configure(config):
    # pytest-xdist >= 3.6 hands out `--dist loadfile` files largest first (by number of tests) unless told not
    # to; the rehearsal files have few tests and run longest, so that put them last, one worker running them
    # alone at the end. Collection order (LONGEST_FIRST below) is the order wanted.
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False
    config.addinivalue_line("markers", "verl_agnostic: does not touch verl; runs in the first test environment only")
    config.addinivalue_line("markers", "field_stack: also runs in the field report's stack (verl 0.5.0, torch 2.5.1, "
                            "megatron-core 0.12): runtime patches and read-only tools")


# The rehearsal files (each a few main_ppo runs), longest first: the two rehearsal lanes (tests/xdist_lanes.py) take
# them in this order, so that none is left to run alone at the end. By their wall seconds in CI's 0.9.1 part
# (fresh clone of b24ce73, 2026-12-05, test_rehearse_faults.py since cut by one run):
LONGEST_FIRST = ("test_rehearse_nodes.py",  # 415, and a resume without the sync since (was its own file: 306)
                 "test_rehearse_supervised.py",  # 388
                 "test_rehearse.py",  # 362
                 "test_rehearse_moe.py",  # 353
                 "test_rehearse_killed.py",  # 345 over 6 cases
                 "test_rehearse_faults.py",  # ~340
                 "test_rehearse_fsdp.py",  # 280
                 "test_rehearse_dapo.py",  # 222
                 "test_rehearse_nodes_fault.py")  # 182


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadfile`, two workers run the rehearsal files one at a time each, the others the rest
    (tests/xdist_lanes.py: a third rehearsal at once costs each of them 55 % more CPU)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist_lanes import make

    return make(config, log, set(LONGEST_FIRST))


def pytest_ignore_collect(collection_path, config):
    """With a marker scope, a test file that never names the marker is not even imported: in the small
    environment some files cannot import (tests/fakes/rollout needs verl >= 0.6 at module level)."""
    marker = os.environ.get("VERL_ASCEND_TEST_MARKER", "")
    if marker and collection_path.is_file() and collection_path.name.startswith("test_") and collection_path.suffix == ".py":
        return marker not in collection_path.read_text(errors="replace") or None
    return None


def pytest_collection_modifyitems(config, items):
    order = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(order)))  # stable: the rest keep their order
    marker = os.environ.get("VERL_ASCEND_TEST_MARKER", "")
    if marker:
        keep = [item for item in items if item.get_closest_marker(marker)]
        config.hook.pytest_deselected(items=[item for item in items if not item.get_closest_marker(marker)])
        items[:] = keep
    if os.environ.get("VERL_ASCEND_TEST_ENV_INDEX", "0") == "0":
        return
    skip = pytest.mark.skip(reason="verl-independent; runs in the first test environment")
    for item in items:
        if "verl_agnostic" in item.keywords:
            item.add_marker(skip)

"""The pure order functions: a permutation in every case, undone exactly, tiled when groups are regular."""

import random

import pytest

from verl_ascend.patches.rollout_order import order as do

pytestmark = pytest.mark.verl_agnostic


def test_tiled_permutation_of_interleaved_groups():
    keys = ["a", "a", "a", "b", "b", "b", "c", "c", "c"]
    perm = do.tiled_permutation(keys)
    assert [keys[i] for i in perm] == ["a", "b", "c"] * 3
    assert perm == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_uneven_and_scattered_groups_stay_a_permutation():
    # padding copies of the first rows and one REMAX baseline row per prompt at the end
    keys = ["a", "a", "b", "b", "c", "c", "a", "a", "b", "c"]
    perm = do.tiled_permutation(keys)
    assert sorted(perm) == list(range(len(keys)))
    assert [keys[i] for i in perm] == ["a", "b", "c", "a", "b", "c", "a", "b", "c", "a"]
    # within a group rows keep their relative order
    assert [i for i in perm if keys[i] == "a"] == [0, 1, 6, 7]


def test_random_keys_round_trip():
    rng = random.Random(3)
    for _ in range(2000):
        size = rng.randint(0, 60)
        keys = [rng.randint(0, rng.randint(1, 12)) for _ in range(size)]
        perm = do.tiled_permutation(keys)
        assert sorted(perm) == list(range(size))
        inv = do.inverse(perm)
        assert [perm[i] for i in inv] == list(range(size))
        assert do.is_identity([perm[i] for i in inv])


def test_one_sample_per_prompt_is_identity():
    assert do.is_identity(do.tiled_permutation(list("abcdef")))
    assert do.tiled_permutation([]) == []


@pytest.mark.parametrize(
    "env,ascend,expected",
    [
        ({}, True, "tiled"),
        ({}, False, "interleaved"),
        ({do.ENV: "tiled"}, False, "tiled"),
        ({do.ENV: " Interleaved "}, True, "interleaved"),
    ],
)
def test_configured_order(env, ascend, expected):
    order, reason = do.configured_order(env, ascend)
    assert order == expected and reason


def test_batch_already_tiled_by_hand_is_left_alone():
    # users who followed the 235B field report's rollout-timeout fix (docs/field-reports.md) and set interleave=False in both repeats
    keys = ["a", "b", "c"] * 4
    assert do.is_identity(do.tiled_permutation(keys))

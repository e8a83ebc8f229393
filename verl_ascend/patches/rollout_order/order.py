"""Rollout dispatch order: from verl's interleaved batch to a tiled one, and back.

verl repeats every prompt ``n`` times next to each other (``repeat(n, interleave=True)``), the
*interleaved* order ``a a a b b b c c c``, and then cuts the batch into contiguous slices, one per
rollout worker. All samples of a prompt therefore land on one worker, and one long-answer prompt
makes that worker the straggler of the whole step.

The *tiled* order takes the first sample of every prompt, then the second sample of every prompt,
and so on: ``a b c a b c a b c``. Cut into contiguous slices, it spreads each prompt's samples over
``min(n, workers)`` workers, ``floor(n / workers)`` or ``ceil(n / workers)`` per worker (when the
batch divides evenly, as verl requires).

Which rows belong to one prompt is given by a key per row (verl's ``uid``, or the prompt's token
ids). Groups need not be contiguous nor of equal size (padding copies of the first rows, REMAX's
extra greedy row per prompt, a last short batch): the result is a permutation of ``range(len)`` in
every case, so no row is ever lost or duplicated, and ``inverse`` restores the input order exactly.

Pure functions of Python sequences; no torch, numpy or verl here (the switch is read through
:mod:`verl_ascend.core.settings`).
"""

from collections.abc import Hashable, Sequence

from verl_ascend.core import settings

ENV = "VERL_ASCEND_ROLLOUT_ORDER"  # its valid values and their meanings: core/settings.py's TABLE
TILED = "tiled"
INTERLEAVED = "interleaved"


def configured_order(environ, on_ascend: bool) -> tuple[str, str]:
    """The order to use and why: ``(order, reason)``; ``environ`` None reads the process environment.

    Default: tiled on Ascend hosts (where long-tail rollouts end in HCCL timeouts), interleaved
    elsewhere, because off Ascend verl-ascend changes nothing unless asked. A bad value raises
    ValueError naming it and the valid ones (the patch is then recorded as failed, with the fix).
    """
    order = settings.choose(ENV, "a rollout order", environ)
    if order:
        return order, f"{ENV}={order}"
    if on_ascend:
        return TILED, "default on Ascend hosts"
    return INTERLEAVED, f"default off Ascend hosts (set {ENV}=tiled to use it here)"


def tiled_permutation(keys: Sequence[Hashable]) -> list[int]:
    """Indices that put rows into tiled order: ``rows[perm[i]]`` is the i-th row to dispatch.

    Groups are the sets of rows with equal keys, taken in order of first appearance; within a
    group rows keep their relative order. Round ``k`` lists the ``k``-th row of every group that
    has more than ``k`` rows.
    """
    groups: dict = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    members = list(groups.values())
    perm = []
    round_ = 0
    while members:
        perm.extend(group[round_] for group in members)
        round_ += 1
        members = [group for group in members if len(group) > round_]
    return perm


def inverse(perm: Sequence[int]) -> list[int]:
    """The permutation that undoes ``perm``: ``tiled[inverse(perm)] == rows``."""
    inv = [0] * len(perm)
    for position, index in enumerate(perm):
        inv[index] = position
    return inv


def is_identity(perm: Sequence[int]) -> bool:
    return all(position == index for position, index in enumerate(perm))

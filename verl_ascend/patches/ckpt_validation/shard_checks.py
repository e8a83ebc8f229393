"""Which boxes of a sharded tensor overlap, in near-linear time for the layouts checkpoints use.

A box is a pair (offsets, sizes) of equal-length integer sequences; boxes ``a`` and ``b`` overlap
when in every dimension ``a.off < b.off + b.size`` and ``b.off < a.off + a.size``. That is the
pairwise rule torch's checkpoint validators apply, including its edge cases: a chunk that is empty
in some dimension still "overlaps" a chunk that strictly contains its position there, two empty
intervals never overlap, and a 0-d box overlaps every other 0-d box.

Why not torch's sweep line: torch sweeps one dimension and compares every pair that overlaps in
that dimension. Megatron's MoE expert stacks (e.g. (layers, experts, 3072, 4096) split
(layers, experts, 4, 1)) have only a handful of distinct intervals in the swept dimension, so that
is still ~n^2/4 pair tests (minutes for ~48k chunks).

How: split the boxes by their exact interval in dimension 0. Boxes with different, disjoint
intervals there cannot overlap, so each group is checked on its own in dimension 1, and so on.
Pairs of groups whose intervals do overlap (never the case for grids, expert stacks or flattened
ranges; common only in broken layouts) are checked against each other the same way, one dimension
further. A grid of n chunks in d dimensions costs O(d n log n); in general the cost is
output-sensitive and every overlapping pair is found exactly once.

Pure Python, no torch: the patch in ``verl_ascend.patches.ckpt_validation`` adapts torch's
metadata objects to this module.
"""

import sys
from bisect import bisect_right, insort
from itertools import combinations, product

_BIG = sys.maxsize


class _Enough(Exception):
    """Raised inside the search once the caller has as many pairs as it asked for."""


class _Pairs:
    def __init__(self, limit):
        self.found = []
        self.limit = limit

    def add_all(self, pairs) -> None:
        for pair in pairs:
            self.found.append(pair)
            if self.limit is not None and len(self.found) >= self.limit:
                raise _Enough


def _group(members, offsets, sizes, dim) -> dict:
    """Members keyed by their exact interval (offset, size) in ``dim``, in first-seen order."""
    groups: dict = {}
    for i in members:
        key = (offsets[i][dim], sizes[i][dim])
        bucket = groups.get(key)
        if bucket is None:
            groups[key] = [i]
        else:
            bucket.append(i)
    return groups


def interval_pairs(left, right=None) -> list:
    """Overlapping pairs among distinct 1-D intervals given as (offset, size).

    With only ``left``: pairs (i, j) of positions in ``left`` (each unordered pair once, an
    interval is never paired with itself). With ``right`` too: pairs (i, j) with i in ``left`` and
    j in ``right``, an interval equal on both sides included when it is non-empty.

    Sweep over start positions. A non-empty interval overlaps exactly the non-empty intervals still
    open at its start. An empty or negative interval [o, e) with e <= o overlaps only non-empty
    intervals b with b.start < e and b.end > o: it is asked at time e, before anything starting at
    e is opened.
    """
    sides = [left] if right is None else [left, right]
    events = []
    for side, intervals in enumerate(sides):
        for i, (off, size) in enumerate(intervals):
            end = off + size
            if size > 0:
                events.append((off, 1, end, side, i))
            else:
                events.append((end, 0, off, side, i))
    events.sort()
    open_by_side = [[] for _ in sides]  # each sorted by (end, index)
    pairs = []
    for time, kind, other, side, i in events:
        for active in open_by_side:
            cut = bisect_right(active, (time, _BIG))
            if cut:
                del active[:cut]
        partner_sides = (0,) if right is None else (1 - side,)
        for partner in partner_sides:
            active = open_by_side[partner]
            if kind == 0:  # empty interval: partners must also end after its offset
                hits = active[bisect_right(active, (other, _BIG)):]
            else:
                hits = active
            for _, j in hits:
                if right is None:
                    pairs.append((j, i))
                else:
                    pairs.append((i, j) if side == 0 else (j, i))
        if kind == 1:
            insort(open_by_side[side], (other, i))
    return pairs


def _within(members, offsets, sizes, dim, ndim, out: _Pairs) -> None:
    if len(members) < 2:
        return
    if dim == ndim:
        out.add_all(combinations(members, 2))
        return
    groups = _group(members, offsets, sizes, dim)
    keys = list(groups)
    for key in keys:
        if key[1] > 0:  # identical non-empty intervals overlap: look one dimension further
            _within(groups[key], offsets, sizes, dim + 1, ndim, out)
    if len(keys) > 1:
        for a, b in interval_pairs(keys):
            _across(groups[keys[a]], groups[keys[b]], offsets, sizes, dim + 1, ndim, out)


def _across(left, right, offsets, sizes, dim, ndim, out: _Pairs, right_boxes=None) -> None:
    """Pairs (i, j), i from ``left`` and j from ``right``, that overlap from ``dim`` on."""
    r_offsets, r_sizes = right_boxes or (offsets, sizes)
    if dim == ndim:
        out.add_all(product(left, right))
        return
    lgroups = _group(left, offsets, sizes, dim)
    rgroups = _group(right, r_offsets, r_sizes, dim)
    lkeys, rkeys = list(lgroups), list(rgroups)
    for a, b in interval_pairs(lkeys, rkeys):
        _across(lgroups[lkeys[a]], rgroups[rkeys[b]], offsets, sizes, dim + 1, ndim, out, right_boxes)


def _ndim(offsets, sizes) -> int:
    ndims = {len(o) for o in offsets} | {len(s) for s in sizes}
    if len(ndims) > 1:
        raise ValueError(f"boxes of different ranks: {sorted(ndims)}")
    return ndims.pop() if ndims else 0


def overlapping_pairs(offsets, sizes, limit=None) -> list:
    """Every pair (i, j), i < j, of overlapping boxes; at most ``limit`` of them if given."""
    out = _Pairs(limit)
    ndim = _ndim(offsets, sizes)
    try:
        _within(list(range(len(offsets))), offsets, sizes, 0, ndim, out)
    except _Enough:
        pass
    return [(i, j) if i < j else (j, i) for i, j in out.found]


def crossing_pairs(offsets_a, sizes_a, offsets_b, sizes_b) -> list:
    """Every pair (i, j) with box i of set a overlapping box j of set b, sorted."""
    ndim = _ndim(list(offsets_a) + list(offsets_b), list(sizes_a) + list(sizes_b))
    out = _Pairs(None)
    if offsets_a and offsets_b:
        _across(
            list(range(len(offsets_a))), list(range(len(offsets_b))),
            offsets_a, sizes_a, 0, ndim, out, right_boxes=(offsets_b, sizes_b),
        )
    out.found.sort()
    return out.found


def boxes_overlap(off_a, size_a, off_b, size_b) -> bool:
    """The pairwise rule itself (used by tests and for ordering messages)."""
    return all(
        oa < ob + sb and ob < oa + sa for oa, sa, ob, sb in zip(off_a, size_a, off_b, size_b)
    )

"""Seeded random shard layouts for the checkpoint-validation tests, with planted defects.

A layout is (tensor size, [(offsets, sizes), ...]). The generators mimic what Megatron, FSDP and
DTensor produce (irregular grids, expert stacks, flattened ranges, empty chunks), then plant
defects: an overlap (a chunk grown, shifted or duplicated), an out-of-bounds chunk, a hole (a chunk
dropped) or stray zero-size chunks. Chunk order is shuffled.
"""

import random

KINDS = ("grid", "experts", "flat", "mixed")
DEFECTS = ("none", "overlap", "out_of_bounds", "hole", "zero_size", "several")


def _cuts(rng, length, pieces, allow_empty):
    if pieces <= 1 or length == 0 or (length < 2 and not allow_empty):
        return [0, length]
    inner = sorted(rng.choices(range(0 if allow_empty else 1, length + (1 if allow_empty else 0)), k=pieces - 1))
    if not allow_empty:
        inner = sorted(set(inner))
    return [0, *inner, length]


def grid(rng, size, pieces, allow_empty=False):
    """Every dimension cut at its own points: the chunks tile the tensor exactly."""
    per_dim = [_cuts(rng, n, p, allow_empty) for n, p in zip(size, pieces)]
    chunks = [((), ())]
    for cuts in per_dim:
        chunks = [
            (o + (a,), s + (b - a,))
            for o, s in chunks
            for a, b in zip(cuts, cuts[1:])
        ]
    return chunks


def _base(rng, kind):
    if kind == "grid":
        ndim = rng.randint(1, 3)
        size = tuple(rng.randint(1, 9) for _ in range(ndim))
        return size, grid(rng, size, [rng.randint(1, 4) for _ in size], allow_empty=rng.random() < 0.2)
    if kind == "experts":  # (layers, experts, rows, cols) split (layers, experts, k, 1)
        layers, experts, k = rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 4)
        size = (layers, experts, 4 * k, rng.randint(1, 5))
        return size, grid(rng, size, (layers, experts, k, 1))
    if kind == "flat":  # flattened ranges: prefix dims of size 1 per chunk, uneven flat ranges
        prefix = rng.randint(0, 2)
        size = tuple(rng.randint(1, 3) for _ in range(prefix)) + (rng.randint(1, 40),)
        pieces = [n for n in size[:-1]] + [rng.randint(1, 6)]
        return size, grid(rng, size, pieces, allow_empty=rng.random() < 0.3)
    ndim = rng.randint(2, 4)
    size = tuple(rng.randint(1, 6) for _ in range(ndim))
    # rows cut differently in each row block (not a product grid)
    rows = _cuts(rng, size[0], rng.randint(1, 3), False)
    chunks = []
    for a, b in zip(rows, rows[1:]):
        for o, s in grid(rng, size[1:], [rng.randint(1, 3) for _ in size[1:]]):
            chunks.append(((a, *o), (b - a, *s)))
    return size, chunks


def _plant(rng, size, chunks, defect, allow_negative):
    chunks = list(chunks)
    ndim = len(size)
    if defect == "several":
        for _ in range(rng.randint(2, 3)):
            chunks = _plant(rng, size, chunks, rng.choice(DEFECTS[1:5]), allow_negative)
        return chunks
    if defect == "overlap" and chunks:
        i = rng.randrange(len(chunks))
        o, s = chunks[i]
        how = rng.choice(("grow", "shift", "duplicate", "cover"))
        d = rng.randrange(ndim) if ndim else 0
        if how == "duplicate" or ndim == 0:
            chunks.append(chunks[i])
        elif how == "grow":
            chunks[i] = (o, s[:d] + (s[d] + rng.randint(1, 3),) + s[d + 1:])
        elif how == "shift":
            chunks[i] = (o[:d] + (max(0, o[d] - rng.randint(1, 3)),) + o[d + 1:], s)
        else:  # one big chunk across the middle
            chunks.append((tuple(n // 3 for n in size), tuple(max(1, n // 2) for n in size)))
    elif defect == "out_of_bounds" and chunks and ndim:
        i = rng.randrange(len(chunks))
        o, s = chunks[i]
        d = rng.randrange(ndim)
        if allow_negative and rng.random() < 0.3:
            chunks[i] = (o[:d] + (o[d] - 1,) + o[d + 1:], s)
        else:
            chunks[i] = (o, s[:d] + (size[d] - o[d] + rng.randint(1, 2),) + s[d + 1:])
    elif defect == "hole" and len(chunks) > 1:
        chunks.pop(rng.randrange(len(chunks)))
    elif defect == "zero_size" and ndim:
        for _ in range(rng.randint(1, 3)):
            o = tuple(rng.randint(0, n) for n in size)
            s = tuple(rng.randint(0, 2) for _ in size)
            d = rng.randrange(ndim)
            chunks.append((o, s[:d] + (0,) + s[d + 1:]))
    return chunks


def layouts(seed, count, allow_negative=True):
    """``count`` layouts (size, chunks, kind, defect) from one seed."""
    rng = random.Random(seed)
    for n in range(count):
        kind = KINDS[n % len(KINDS)]
        defect = DEFECTS[(n // len(KINDS)) % len(DEFECTS)]
        size, chunks = _base(rng, kind)
        chunks = _plant(rng, size, chunks, defect, allow_negative)
        rng.shuffle(chunks)
        yield size, chunks, kind, defect

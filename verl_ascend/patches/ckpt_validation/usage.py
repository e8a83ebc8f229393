"""How much this process's checkpoint checks did: calls, shard entries looked at, seconds spent.

Counted around each installed replacement (not around torch's own functions), so a process can say
what the patch did during one save or load: ``verl-ascend rehearse``'s actor ranks print it after
each ``save_checkpoint`` / ``load_checkpoint``. Counting costs two clock reads per call.
"""

import functools
import threading
import time

_lock = threading.Lock()
_totals: dict = {}  # attr -> [calls, entries, seconds]


def _entries(attr: str, args) -> int:
    """Shard entries the call validates or plans from (0 when the argument shape is unknown)."""
    try:
        if attr == "validate_non_overlapping_shards_metadata":  # (shards,)
            return len(args[0])
        if attr == "_validate_global_plan":  # (global_plan, metadata): every chunk of every key
            return sum(len(getattr(v, "chunks", ()) or ()) for v in args[1].state_dict_metadata.values())
        if attr == "create_read_items_for_chunk_list":  # (fqn, checkpoint_md, local_chunks)
            return len(getattr(args[1], "chunks", ()) or ())
    except (AttributeError, IndexError, TypeError):
        pass
    return 0


def counted(attr: str, replacement):
    @functools.wraps(replacement)
    def call(*args, **kwargs):
        started = time.perf_counter()
        try:
            return replacement(*args, **kwargs)
        finally:
            spent = time.perf_counter() - started
            with _lock:
                row = _totals.setdefault(attr, [0, 0, 0.0])
                row[0] += 1
                row[1] += _entries(attr, args)
                row[2] += spent

    return call


def snapshot() -> dict:
    """attr -> (calls, entries, seconds) so far in this process."""
    with _lock:
        return {attr: tuple(row) for attr, row in _totals.items()}


def since(before: dict) -> dict:
    """What was counted after ``before`` (a :func:`snapshot`)."""
    now = snapshot()
    out = {}
    for attr, (calls, entries, seconds) in now.items():
        c0, e0, s0 = before.get(attr, (0, 0, 0.0))
        if calls - c0:
            out[attr] = (calls - c0, entries - e0, seconds - s0)
    return out

"""torch-facing side of the ``ckpt_validation`` patch: fast and skipping replacements, and probes.

The replacements take torch's own metadata objects, hand plain tuples to
``verl_ascend.patches.ckpt_validation.shard_checks`` and answer in the form the installed torch uses. What that form is
(``_validate_global_plan`` returns a bool or a list of messages; the volume check runs always or
only for multi-rank plans) is learnt by calling the installed function on tiny layouts, never from
the version number. Every replacement is also checked against the original on small layouts before
it is installed; a mismatch leaves torch's function in place.

Anything outside the layouts the fast paths understand (chunks whose rank differs from the
tensor's, ...) is handed to torch's original, which keeps torch's exact behaviour for it.
Nothing here imports torch at module level: it runs only once a torch target is imported.
"""

import contextlib
import functools
import logging
import math
import sys
import types

from verl_ascend.core import marks
from verl_ascend.patches.ckpt_validation import shard_checks

logger = logging.getLogger("verl_ascend")
_skip_logged = set()


def _boxes(chunks, off_attr="offsets", size_attr="sizes"):
    offsets = [tuple(getattr(c, off_attr)) for c in chunks]
    sizes = [tuple(getattr(c, size_attr)) for c in chunks]
    return offsets, sizes


def _same_rank(ndim, offsets, sizes) -> bool:
    return all(len(o) == ndim for o in offsets) and all(len(s) == ndim for s in sizes)


def _log_skip_once(what: str) -> None:
    if what in _skip_logged:
        return
    _skip_logged.add(what)
    logger.warning(
        "distributed-checkpoint %s validation is OFF in this process (VERL_ASCEND_CKPT_VALIDATION=skip): "
        "overlapping or out-of-bounds shards will not be detected; use `fast` to keep the checks",
        what,
    )


# ---------------------------------------------------------------------------------------------
# Save side: torch.distributed.checkpoint.default_planner._validate_global_plan


@contextlib.contextmanager
def _quiet(module):
    """Silence the target module's logger while it is probed with broken layouts."""
    log = getattr(module, "logger", None) or logging.getLogger(module.__name__)
    was = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = was


def _plan_metadata(layouts: dict):
    """Metadata of {key: (tensor size, [(offsets, sizes), ...])} the way the save planner builds it."""
    from torch import Size
    from torch.distributed.checkpoint.metadata import (
        ChunkStorageMetadata,
        Metadata,
        TensorProperties,
        TensorStorageMetadata,
    )

    md = {}
    for key, (size, chunks) in layouts.items():
        md[key] = TensorStorageMetadata(
            properties=TensorProperties(),
            size=Size(size),
            chunks=[ChunkStorageMetadata(offsets=Size(o), sizes=Size(s)) for o, s in chunks],
        )
    return Metadata(state_dict_metadata=md)


def _plans(n: int) -> list:
    from torch.distributed.checkpoint.planner import SavePlan

    return [SavePlan(items=[]) for _ in range(n)]


def probe_plan_contract(original, module) -> dict:
    """How the installed ``_validate_global_plan`` answers: {'returns': 'list'|'bool', 'volume': ...}.

    Raises ValueError when it answers in a form this patch does not know.
    """
    valid = _plan_metadata({"t": ((4,), [((0,), (2,)), ((2,), (2,))])})
    hole = _plan_metadata({"t": ((4,), [((0,), (2,))])})
    with _quiet(module):
        ok = original(_plans(2), valid)
        hole_single, hole_multi = original(_plans(1), hole), original(_plans(2), hole)
    if ok is True:
        returns = "bool"
    elif isinstance(ok, list) and not ok:
        returns = "list"
    else:
        raise ValueError(f"_validate_global_plan answered {ok!r} for a valid plan")

    def flagged(answer):
        return bool(answer) if returns == "list" else answer is False

    if flagged(hole_single) and flagged(hole_multi):
        volume = "always"
    elif flagged(hole_multi):
        volume = "multi-rank plans"
    elif not flagged(hole_single):
        volume = "never"
    else:
        raise ValueError("_validate_global_plan checks the volume of single-rank plans only")
    return {"returns": returns, "volume": volume}


def _overlap_messages(key, chunks, size, offsets, sizes) -> list:
    """Overlap messages worded and ordered as torch's sweep line emits them.

    torch sorts chunks by (offset in the largest dimension, all offsets) and, for each chunk, names
    it first and every earlier chunk still open in that dimension second, ordered by (end, index).
    """
    pairs = shard_checks.overlapping_pairs(offsets, sizes)
    if not pairs:
        return []
    sweep = max(range(len(size)), key=lambda d: size[d])
    order = sorted(range(len(chunks)), key=lambda i: (offsets[i][sweep], *offsets[i]))
    rank = {idx: pos for pos, idx in enumerate(order)}
    oriented = []
    for i, j in pairs:
        current, other = (i, j) if rank[i] > rank[j] else (j, i)
        oriented.append((rank[current], offsets[other][sweep] + sizes[other][sweep], other, current))
    oriented.sort()
    return [f"key:{key} has overlapping chunks: {chunks[c]} {chunks[o]}" for _, _, o, c in oriented]


def _key_errors(key, value, plan_count, contract):
    """Errors for one tensor, or None when the layout needs torch's own function."""
    size = tuple(value.size)
    chunks = value.chunks
    offsets, sizes = _boxes(chunks)
    if not _same_rank(len(size), offsets, sizes):
        return None
    errors = []
    volume = 0
    for chunk, off, extent in zip(chunks, offsets, sizes):
        if any(o < 0 or s < 0 or o + s > limit for o, s, limit in zip(off, extent, size)):
            errors.append(f"key:{key} has out of bounds chunk: tensor-size:{value.size} chunk: {chunk}")
        volume += math.prod(extent)
    if len(chunks) > 1:
        errors.extend(_overlap_messages(key, chunks, size, offsets, sizes))
    tensor_volume = math.prod(size)
    checks_volume = contract["volume"] == "always" or (contract["volume"] != "never" and plan_count > 1)
    if checks_volume and volume != tensor_volume:
        errors.append(f"key:{key} invalid fill tensor-volume: {tensor_volume} chunks-volume: {volume}")
    return errors


def fast_plan_check(original, module, contract):
    bytes_type = module.BytesStorageMetadata
    log = getattr(module, "logger", None) or logging.getLogger(module.__name__)

    def _validate_global_plan(global_plan, metadata):
        errors = []
        for key, value in metadata.state_dict_metadata.items():
            if isinstance(value, bytes_type) or len(value.size) == 0:
                continue
            found = _key_errors(key, value, len(global_plan), contract)
            if found is None:
                return original(global_plan, metadata)
            for message in found:
                log.warning(message)
            errors.extend(found)
        return errors if contract["returns"] == "list" else not errors

    return _validate_global_plan


def skip_plan_check(original, contract):
    valid = [] if contract["returns"] == "list" else True

    def _validate_global_plan(global_plan, metadata):
        _log_skip_once("save-plan")
        return list(valid) if isinstance(valid, list) else valid

    return _validate_global_plan


# ---------------------------------------------------------------------------------------------
# Load side: torch.distributed._shard.sharding_spec._internals.validate_non_overlapping_shards_metadata


def fast_shard_check(original):
    def validate_non_overlapping_shards_metadata(shards):
        if not shards or len(shards) < 2:
            return original(shards)
        offsets, sizes = _boxes(shards, "shard_offsets", "shard_sizes")
        ndim = len(offsets[0])
        if not _same_rank(ndim, offsets, sizes):
            return original(shards)
        first_off, first_size = offsets[0], sizes[0]
        varying = [
            d for d in range(ndim)
            if any(o[d] != first_off[d] or s[d] != first_size[d] for o, s in zip(offsets, sizes))
        ]
        if len(varying) < 2:  # torch's own paths for 0 or 1 sharded dimension are n log n
            return original(shards)
        pair = shard_checks.overlapping_pairs(offsets, sizes, limit=1)
        if pair:
            i, j = pair[0]
            raise ValueError(f"Shards {shards[i]} and {shards[j]} overlap")
        return None

    return validate_non_overlapping_shards_metadata


def skip_shard_check(original):
    def validate_non_overlapping_shards_metadata(shards):
        _log_skip_once("shard-overlap")
        return None

    return validate_non_overlapping_shards_metadata


def _shard_list(boxes):
    from torch.distributed._shard.metadata import ShardMetadata

    return [ShardMetadata(shard_offsets=list(o), shard_sizes=list(s), placement=None) for o, s in boxes]


def _raises(func, shards) -> bool:
    try:
        func(shards)
    except ValueError:
        return True
    return False


SHARD_PROBES = (
    [((0, 0), (2, 2)), ((0, 2), (2, 2)), ((2, 0), (2, 2)), ((2, 2), (2, 2))],  # 2-D grid
    [((0, 0), (3, 2)), ((0, 2), (2, 2)), ((2, 0), (2, 2)), ((2, 2), (2, 2))],  # overlap
    [((0, 0, 0), (1, 2, 4)), ((0, 2, 0), (1, 2, 4)), ((1, 0, 0), (1, 4, 4))],  # expert stack
    [((0, 0, 0), (1, 2, 4)), ((0, 1, 0), (1, 2, 4)), ((1, 0, 0), (1, 4, 4))],  # overlap
    [((0, 0), (0, 2)), ((1, 0), (2, 2)), ((2, 2), (0, 0))],                  # empty chunks
)


def check_shard_replacement(original, replacement) -> None:
    """Raise ValueError unless ``replacement`` gives torch's verdicts on the probe layouts."""
    if not _raises(original, _shard_list(SHARD_PROBES[1])) or _raises(original, _shard_list(SHARD_PROBES[0])):
        raise ValueError("validate_non_overlapping_shards_metadata no longer rejects overlaps as expected")
    for layout in SHARD_PROBES:
        if _raises(original, _shard_list(layout)) != _raises(replacement, _shard_list(layout)):
            raise ValueError(f"fast shard check disagrees with torch on {layout}")


PLAN_PROBES = (
    {"w": ((4, 4), [((0, 0), (2, 4)), ((2, 0), (2, 4))])},
    {"w": ((4, 4), [((0, 0), (3, 4)), ((2, 0), (2, 4)), ((0, 0), (1, 1))]), "b": ((3,), [((1,), (3,))])},
    {"w": ((2, 8), [((0, 0), (2, 8)), ((0, 4), (2, 0)), ((1, 0), (1, 8))])},
)


def check_plan_replacement(original, replacement, module) -> None:
    for layout in PLAN_PROBES:
        for plans in (1, 2):
            with _quiet(module):
                want = original(_plans(plans), _plan_metadata(layout))
                got = replacement(_plans(plans), _plan_metadata(layout))
            if want != got:
                raise ValueError(f"fast global-plan check disagrees with torch on {layout}: {got!r} != {want!r}")


# ---------------------------------------------------------------------------------------------
# Load planning: torch.distributed.checkpoint.planner_helpers.create_read_items_for_chunk_list

READ_HELPERS = ("_shards_get_overlap_region_wrt_saved_tensor", "_create_read_item_for_tensor", "MetadataIndex")


def fast_read_items(original, module):
    def create_read_items_for_chunk_list(fqn, checkpoint_md, local_chunks):
        saved_chunks = checkpoint_md.chunks
        if not local_chunks or not saved_chunks:
            return original(fqn, checkpoint_md, local_chunks)
        local_off, local_size = _boxes(local_chunks)
        saved_off, saved_size = _boxes(saved_chunks)
        ndim = len(local_off[0])
        if not (_same_rank(ndim, local_off, local_size) and _same_rank(ndim, saved_off, saved_size)):
            return original(fqn, checkpoint_md, local_chunks)
        region = module._shards_get_overlap_region_wrt_saved_tensor
        make_item = module._create_read_item_for_tensor
        index = module.MetadataIndex
        items = []
        # Index order (local, then saved): the order torch <= 2.9 produced; readers group items
        # by file themselves, so the order carries no meaning.
        for local_idx, saved_idx in shard_checks.crossing_pairs(local_off, local_size, saved_off, saved_size):
            local_chunk, saved_chunk = local_chunks[local_idx], saved_chunks[saved_idx]
            narrows = region(saved_shard=saved_chunk, current_shard=local_chunk)
            items.append(
                make_item(
                    dest_index=index(fqn, local_chunk.offsets, local_idx),
                    dest_offsets=[n[2] for n in narrows],
                    storage_index=index(fqn, saved_chunk.offsets, saved_idx),
                    storage_offsets=[n[1] for n in narrows],
                    lengths=[n[3] for n in narrows],
                )
            )
        return items

    return create_read_items_for_chunk_list


def _read_key(item):
    return (item.dest_index.index, item.storage_index.index, tuple(item.dest_offsets),
            tuple(item.storage_offsets), tuple(item.lengths), repr(item))


def check_read_replacement(original, replacement) -> None:
    from torch import Size
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata

    def chunks(boxes):
        return [ChunkStorageMetadata(offsets=Size(o), sizes=Size(s)) for o, s in boxes]

    layout = {"w": ((4, 6), [((0, 0), (2, 6)), ((2, 0), (2, 3)), ((2, 3), (2, 3))])}
    saved = _plan_metadata(layout).state_dict_metadata["w"]
    for local in ([((1, 1), (3, 4))], [((0, 0), (4, 3)), ((0, 3), (4, 3))], [((0, 0), (4, 6))]):
        want = sorted(map(_read_key, original("w", saved, chunks(local))))
        got = sorted(map(_read_key, replacement("w", saved, chunks(local))))
        if want != got:
            raise ValueError(f"fast read planning disagrees with torch for local chunks {local}")


# ---------------------------------------------------------------------------------------------
# Installing a replacement everywhere a caller looks the function up


def mark(replacement, original, tag: str, mode: str):
    """Make ``replacement`` look like ``original`` (name, doc, ``__wrapped__``) and tag it."""
    functools.update_wrapper(replacement, original)
    marks.mark(replacement, tag)
    replacement.verl_ascend_mode = mode
    return replacement


def rebind(attr: str, original, replacement) -> list:
    """Point every loaded module's global ``attr`` that is ``original`` at ``replacement``.

    Callers that did ``from x import attr`` hold their own reference; modules imported later copy
    the already replaced attribute of the defining module. Returns the modules changed.
    """
    changed = []
    for mod in list(sys.modules.values()):
        if not isinstance(mod, types.ModuleType):
            continue
        try:
            held = vars(mod).get(attr)
        except TypeError:
            continue
        if held is original:
            setattr(mod, attr, replacement)
            changed.append(mod)
    return changed

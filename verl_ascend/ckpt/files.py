"""Is one checkpoint file whole? Cheap structural checks that never load a tensor.

A node that dies while writing, a full disk or an interrupted copy leaves a file that exists but is
short; verl then fails at resume inside ``torch.load`` ("PytorchStreamReader failed reading zip
archive: failed finding central directory") or reads garbage. Every check here reads a file's
index only -- at most a few KiB per file plus 30 bytes per archive member:

- torch ``.pt`` (``torch.save`` writes a zip archive since torch 1.6): the end-of-archive record
  and the central directory must be readable, and every member's data must end before the central
  directory starts (the writer puts it last, so any cut removes it or overlaps a member).
  The pre-1.6 pickle format has no index: only its length is checked.
- ``.safetensors``: the 8-byte header length, the JSON header, and the largest ``data_offsets``
  end must fit the file.
- ``.json``: must parse (verl and Megatron read these whole at resume).

Each function returns ``None`` for an intact file, else a short description of what is wrong.
DCP ``.distcp`` shards have no index of their own; ``scan.check_dist_ckpt`` compares them with the
byte ranges of the folder's ``.metadata``.
"""

import json
import struct
import zipfile
from pathlib import Path

_ZIP_LOCAL = b"PK\x03\x04"
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then (skipped fields), name length, extra length


def _nonempty(path: Path) -> tuple:
    """(size, None), or (None, what is wrong) for a file that is empty or cannot be read."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    return (size, None) if size else (None, "is empty (0 bytes)")


def torch_file(path: Path):
    size, wrong = _nonempty(path)
    if wrong:
        return wrong
    with open(path, "rb") as fh:
        if fh.read(4) != _ZIP_LOCAL:
            return None  # legacy pickle format (or another writer): nothing cheap to compare against
        try:
            archive = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            return f"is a cut-off zip archive ({size} bytes, no readable central directory: {exc})"
        with archive:
            # where the central directory begins; older zipfile without the attribute: the file end
            limit = getattr(archive, "start_dir", size)
            for info in archive.infolist():
                # bytes lost before the central directory shift it; zipfile then moves every member
                # offset by the loss, which can put one before the file's start
                if info.header_offset < 0:
                    return f"member {info.filename} starts before the file does: bytes are missing inside it"
                fh.seek(info.header_offset)
                raw = fh.read(_LOCAL_HEADER.size)
                if len(raw) < _LOCAL_HEADER.size or raw[:4] != _ZIP_LOCAL:
                    return f"member {info.filename} has no local header at byte {info.header_offset}"
                _, name_len, extra_len = _LOCAL_HEADER.unpack(raw)
                end = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len + info.compress_size
                if end > limit:
                    return (f"member {info.filename} needs bytes up to {end}, the data ends at {limit} "
                            f"({size} bytes on disk)")
    return None


def json_file(path: Path):
    size, wrong = _nonempty(path)
    if wrong:
        return wrong
    try:
        json.loads(path.read_bytes())
    except (ValueError, OSError) as exc:
        return f"is not valid JSON ({size} bytes: {exc})"
    return None


def safetensors_file(path: Path):
    size, wrong = _nonempty(path)
    if wrong:
        return wrong
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"is {size} bytes, shorter than the 8-byte header length"
        (length,) = struct.unpack("<Q", head)
        if 8 + length > size:
            return f"header says {length} bytes of JSON, the file is {size} bytes"
        try:
            header = json.loads(fh.read(length))
        except ValueError as exc:
            return f"header is not valid JSON: {exc}"
    ends = [entry["data_offsets"][1] for key, entry in header.items()
            if key != "__metadata__" and isinstance(entry, dict) and len(entry.get("data_offsets") or ()) == 2]
    need = 8 + length + max(ends, default=0)
    if need > size:
        return f"tensors need {need} bytes, the file is {size}"
    return None


def plain_file(path: Path):
    return _nonempty(path)[1]


_BY_SUFFIX = {".pt": torch_file, ".pth": torch_file, ".bin": torch_file, ".json": json_file,
              ".safetensors": safetensors_file}


def problem(path: Path):
    """What is wrong with the file at ``path`` (``None``: intact as far as its index says)."""
    return _BY_SUFFIX.get(path.suffix, plain_file)(path)

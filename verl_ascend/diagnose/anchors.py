"""The block scan: which lines of a block hold a scan anchor (a literal keyword) or an error code.

The search runs in RE2, Google's DFA regex engine, through ``pyarrow.compute`` (pyarrow is a dependency of
this package): one pass over each block, its cost nearly independent of the number of keywords, where Python's
backtracking ``re`` engine already costs some 4 x a plain line-by-line read of the file for a pattern that never
matches (numbers: docs/diagnose.md, bench/diagnose_speed.py). The pattern is the alternation of the anchors and
codes, ``anchor|anchor|...|E(?:[A-Z]\\d{4}|RR\\d{5})``. ``count_substring_regex`` counts its matches in the whole
block; a block without any (most of a log) is done. A block with some is split into its lines (``split_pattern``)
and ``match_substring_regex`` marks the lines holding a match; each marked line's place in the block follows from
the offsets of the split (a line starts after the lines and the one ``\\n`` each before it). (Splitting the block
at a whole-line pattern, ``[^\\n]*(?:...)[^\\n]*\\n?``, reads it once, but Arrow asks RE2 for the separator's
span, which RE2 then finds with its NFA over the line: 75 us a matched line, 60 x slower on the fixtures.)

Matching is byte for byte: the block is handed to Arrow as ``large_binary`` (RE2 then reads Latin-1, one byte a
character, so invalid UTF-8 cannot fail or shift a match), the anchors are ASCII and spelled with ``\\xHH``
escapes, case matters, ``\\d`` is an ASCII digit as in Python's ``re`` on bytes. A line is what lies between two
``\\n`` of the block (a ``\\r`` stays in it), as the scanner splits it; it selects exactly the lines that hold one of
the anchors or match one of the codes (tests/unit/test_diagnose_anchors.py).

pyarrow is imported only once the logs are large enough to repay it: ``import pyarrow.compute`` costs some 0.17 s
CPU, which ``diagnose`` of a small log or any other command should not pay. The first ``SMALL`` bytes a scan
reads go through Python's ``re`` with the plain alternation of the same anchors and codes (same lines, same test);
Arrow arrays are built from buffers (``Array.from_buffers``), not ``pa.array``, and no Python number goes into a
compute function: either imports pandas on first use (0.3-1 s CPU, measured with pyarrow 26).
"""

import re
import struct

SMALL = 1 << 20                # bytes scanned with Python's re (0.1 s CPU a MB) before RE2 is worth its import (0.17 s)

_compute = None


def _pc():
    global _compute
    if _compute is None:
        import pyarrow.compute

        _compute = pyarrow.compute
    return _compute


def _escape(literal: str) -> str:
    if not literal.isascii():
        raise ValueError(f"scan anchor {literal!r}: only ASCII is matched byte for byte")
    return "".join(c if c.isalnum() or c == "_" else f"\\x{ord(c):02x}" for c in literal)


def build(literals, codes: dict) -> tuple:
    """(RE2 pattern of any of ``literals`` or of the ``codes`` patterns, the same compiled by Python's re).

    ``codes`` maps a first character to the regex of the rest (``{"E": r"[A-Z]\\d{4}|RR\\d{5}"}``), written in the
    syntax RE2 and Python's ``re`` share (no look-around, no back-references)."""
    branches = sorted({_escape(lit) for lit in literals}) + [f"{_escape(c)}(?:{p})" for c, p in sorted(codes.items())]
    alternation = "|".join(branches)
    return alternation, re.compile(alternation.encode())


def select(data: bytes, pattern: str, regex, scanned: int = 0) -> list:
    """``lines`` of ``data``: with ``regex`` (Python's re) while the scan, ``scanned`` bytes so far, stays within
    ``SMALL`` bytes with this block and pyarrow is not imported yet, else with ``pattern`` (RE2)."""
    if _compute is None and scanned + len(data) <= SMALL:
        return lines_re(data, regex)
    return lines(data, pattern)


def lines_re(data: bytes, regex) -> list:
    """``lines`` with Python's re: the line around each match, then the search goes on after that line."""
    out = []
    pos = 0
    while m := regex.search(data, pos):
        start = data.rfind(b"\n", 0, m.start()) + 1
        end = data.find(b"\n", m.start())
        end = len(data) if end == -1 else end
        out.append((start, end))
        pos = end + 1
    return out


def lines(data: bytes, pattern: str) -> list:
    """(start, end) of each line of ``data`` that ``pattern`` (from ``build``) matches, in order; ``end`` is the
    index of the line's ``\\n`` or ``len(data)``."""
    pc = _pc()
    import pyarrow as pa

    block = pa.Array.from_buffers(pa.large_binary(), 1, [None, pa.py_buffer(struct.pack("<qq", 0, len(data))),
                                                         pa.py_buffer(data)])
    if not pc.count_substring_regex(block, pattern)[0].as_py():
        return []
    rows = pc.list_flatten(pc.split_pattern(block, "\n"))   # the block's lines, without their "\n"
    hit = pc.indices_nonzero(pc.match_substring_regex(rows, pattern))
    # where each line starts, the "\n" before it left out: the offsets buffer of the split, as an array
    offsets = pa.Array.from_buffers(pa.int64(), len(rows) + 1, [None, rows.buffers()[1]], offset=rows.offset)
    base = offsets[0].as_py()
    out = []
    # (no Python numbers into pyarrow.compute: converting one to an Arrow scalar imports pandas, 0.3-1 s CPU)
    for n, start, length in zip(hit.to_pylist(), pc.take(offsets, hit).to_pylist(),
                                pc.take(pc.binary_length(rows), hit).to_pylist()):
        out.append((start - base + n, start - base + n + length))
    return out

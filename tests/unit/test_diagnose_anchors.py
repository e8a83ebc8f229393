"""The block scan's built regex selects exactly the lines that hold a scan anchor or an error code.

anchors.build matches each literal from its rarest byte with a look-behind for the bytes before it (speed,
bench/diagnose_speed.py); the lines the scanner reads must be the same as a plain "any anchor in the line".
"""

import re
from pathlib import Path

import pytest

from verl_ascend.diagnose import anchors, table

pytestmark = pytest.mark.verl_agnostic
FIXTURES = Path(__file__).parents[1] / "fixtures"
CODES = re.compile("|".join(f"{c}(?:{p})" for c, p in table.SCAN_CODES.items()).encode())
ANCHORS = [a.encode() for a in table.SCAN_ANCHORS]


def plain(line: bytes) -> bool:
    return any(a in line for a in ANCHORS) or bool(CODES.search(line))


def built(line: bytes) -> bool:
    return bool(table.SCAN_REGEX.search(line)) or any(lit in line for lit in table.SCAN_LITERALS)


def test_every_fixture_line_is_selected_as_a_plain_search_would():
    lines = [line for path in sorted(FIXTURES.rglob("*")) if path.is_file()
             for line in path.read_bytes().split(b"\n")]
    assert len(lines) > 2_000
    differ = [line[:200] for line in lines if plain(line) != built(line)]
    assert differ == []
    assert sum(map(plain, lines)) > 200       # the fixtures do exercise the selection


@pytest.mark.parametrize("anchor", table.SCAN_ANCHORS)
def test_each_anchor_is_found_whole_and_not_when_cut(anchor):
    raw = anchor.encode()
    for line in (raw, b"(WorkerDict pid=1) x " + raw + b" y", raw + raw):
        assert built(line), line
    # one byte short at either end: selected only if what is left still holds another anchor
    for cut in (raw[1:], raw[:-1], raw[:len(raw) // 2] + b"#" + raw[len(raw) // 2 + 1:]):
        line = b"q " + cut + b" q"
        assert built(line) == plain(line), line


def test_literals_of_common_bytes_only_are_left_to_find():
    regex, left = anchors.build(["failed", "Watchdog caught", "size mismatch for"], {})
    assert left == (b"failed",)
    # a rare byte inside the literal starts its branch; the bytes before it are checked behind
    assert regex.pattern.startswith(b"W(?:") and b"z(?:(?<=siz)e" in regex.pattern
    assert regex.search(b"[rank0]: size mismatch for layer.0") and not regex.search(b"size mismatch fo")

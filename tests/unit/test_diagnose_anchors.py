"""The block scan selects exactly the lines that hold a scan anchor or an error code, in RE2 and in Python's re.

anchors.lines searches whole blocks with pyarrow's RE2 (speed, bench/diagnose_speed.py), anchors.lines_re the first
MB of a process with Python's re (no pyarrow import for a small log); the lines the scanner reads must be the same as
a plain "any anchor in the line", whatever the bytes around them, on either path.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ascend.diagnose import anchors, scan, table

pytestmark = pytest.mark.verl_agnostic
FIXTURES = Path(__file__).parents[1] / "fixtures"
CODES = re.compile("|".join(f"{re.escape(c)}(?:{p})" for c, p in table.SCAN_CODES.items()).encode())
ANCHORS = [a.encode() for a in table.SCAN_ANCHORS]


def plain(line: bytes) -> bool:
    return any(a in line for a in ANCHORS) or bool(CODES.search(line))


def select(data: bytes) -> list:
    """The lines both paths select, when they agree."""
    spans = anchors.lines(data, table.SCAN_PATTERN)
    assert anchors.lines_re(data, table.SCAN_REGEX) == spans, data[:200]
    return spans


def built(line: bytes) -> bool:
    return bool(select(line))


def plain_spans(data: bytes) -> list:
    out, start = [], 0
    for line in data.split(b"\n"):
        if plain(line):
            out.append((start, start + len(line)))
        start += len(line) + 1
    return out


def test_every_fixture_line_is_selected_as_a_plain_search_would():
    files = [path.read_bytes() for path in sorted(FIXTURES.rglob("*")) if path.is_file()]
    lines = [line for data in files for line in data.split(b"\n")]
    assert len(lines) > 2_000
    differ = [line[:200] for line in lines if plain(line) != built(line)]
    assert differ == []
    assert sum(map(plain, lines)) > 200       # the fixtures do exercise the selection
    # whole files as one block: the same lines, at the same offsets
    for data in files:
        assert select(data) == plain_spans(data)


@pytest.mark.parametrize("anchor", table.SCAN_ANCHORS)
def test_each_anchor_is_found_whole_and_not_when_cut(anchor):
    raw = anchor.encode()
    for line in (raw, b"(WorkerDict pid=1) x " + raw + b" y", raw + raw, raw.lower() + b" " + raw):
        assert built(line), line
    # one byte short at either end, or across a line end: selected only if what is left holds another anchor
    for cut in (raw[1:], raw[:-1], raw[:len(raw) // 2] + b"#" + raw[len(raw) // 2 + 1:],
                raw[:len(raw) // 2] + b"\n" + raw[len(raw) // 2:], raw.lower(), raw.upper()):
        line = b"q " + cut + b" q"
        assert select(line) == plain_spans(line), line


def test_bytes_around_a_line_do_not_change_what_is_selected():
    data = (b"\xff\xfe bad utf-8 \xc3 Error \x80\r\n"       # invalid UTF-8 and \r in a selected line
            b"\n\r\n"                                       # empty lines
            b"nothing here \xe2\x82\r\n"
            b"[rank3]: EI0006: timeout\n"                   # a code
            b"EZ999 is no code, ERR1234 neither\n"
            b"\x00\x01 Killed")                             # the last line, without its newline
    spans = select(data)
    assert spans == plain_spans(data)
    assert [data[s:e] for s, e in spans] == [b"\xff\xfe bad utf-8 \xc3 Error \x80\r", b"[rank3]: EI0006: timeout",
                                             b"\x00\x01 Killed"]
    assert select(b"") == [] and select(b"\n\n") == []


def test_pattern_escapes_literals_and_keeps_codes():
    pattern, regex = anchors.build(["port[", "a.b", "Job '"], {"E": r"[A-Z]\d{4}"})
    assert pattern == r"Job\x20\x27|a\x2eb|port\x5b|E(?:[A-Z]\d{4})"
    assert regex.pattern == pattern.encode()
    lines = (b"x port[1]", b"a.b", b"axb", b"EI0006", b"Job 'x'")
    assert [b for b in lines if anchors.lines(b, pattern)] == [b for b in lines if anchors.lines_re(b, regex)] == [
        b"x port[1]", b"a.b", b"EI0006", b"Job 'x'"]
    with pytest.raises(ValueError):
        anchors.build(["ü"], {})


def test_lines_cut_by_blocks_read_the_same(tmp_path, monkeypatch):
    """The scanner's blocks end at a line end; a line longer than 4 blocks is cut, and both parts are read."""
    text = b"".join(b"(WorkerDict pid=%d) INFO filler %s\n" % (i, b"x" * (i % 50)) for i in range(400))
    text += b"[rank1]: RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 1; 60 GiB total)\n" * 3
    log = tmp_path / "driver.log"
    log.write_bytes(text)
    whole = scan.scan([str(log)])
    monkeypatch.setattr(scan, "BLOCK", 97)
    small = scan.scan([str(log)])
    assert [(e.family, e.line, e.text) for e in small.events] == [(e.family, e.line, e.text) for e in whole.events]
    assert len(whole.events) == 3 and whole.lines == small.lines == 403
    monkeypatch.setattr(anchors, "SMALL", 0)          # RE2 from the first block on
    monkeypatch.setattr(scan, "BLOCK", 4 << 20)
    assert [(e.family, e.line, e.text) for e in scan.scan([str(log)]).events] == [
        (e.family, e.line, e.text) for e in whole.events]


def test_small_inputs_use_python_re_and_large_ones_re2(monkeypatch):
    calls = []
    monkeypatch.setattr(anchors, "lines", lambda data, pattern: calls.append("re2") or [])
    monkeypatch.setattr(anchors, "lines_re", lambda data, regex: calls.append("re") or [])
    monkeypatch.setattr(anchors, "_compute", None)
    scanned = 0  # what the scanner has read before each block (Scanner.bytes)
    for size in (1000, anchors.SMALL - 1000, 1, anchors.SMALL):
        anchors.select(b"x" * size, table.SCAN_PATTERN, table.SCAN_REGEX, scanned)
        scanned += size
    assert calls == ["re", "re", "re2", "re2"]


def test_pyarrow_is_imported_on_demand_and_pandas_never():
    """diagnose's start-up does not import pyarrow; the RE2 scan does not make pyarrow import pandas (1 s CPU)."""
    code = ("import sys\nfrom verl_ascend.diagnose import anchors, scan, table\nassert 'pyarrow' not in sys.modules\n"
            "assert anchors.lines(b'a\\n[rank0]: EI0006: x\\nb', table.SCAN_PATTERN) == [(2, 20)]\n"
            "assert 'pyarrow.compute' in sys.modules and 'pandas' not in sys.modules, sorted(sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]

"""The public corpus as a whole (#46 item 7): no failure excerpt answers exit 0, every healthy one does, on the tuned
excerpts (public/verbatim/, public/noise/, public/healthy/) and the held-out split (public/heldout_2026-12-05/).

The held-out split is measured, never tuned against: its misses are listed below as measured when the split was
drawn (docs/diagnose.md has both splits' scores); fixing one by a rule written from it would spoil the split.
"""

import re
from pathlib import Path

import pytest
from test_diagnose import diagnose

pytestmark = pytest.mark.verl_agnostic
PUBLIC = Path(__file__).parents[1] / "fixtures" / "diagnose" / "public"
SOURCES = (PUBLIC.parent / "SOURCES.md").read_text()
HELDOUT = PUBLIC / "heldout_2026-12-05"
FAILURES = sorted(PUBLIC.glob("verbatim/*.log"))
HEALTHY = sorted(PUBLIC.glob("noise/*.log")) + sorted(PUBLIC.glob("healthy/*.log"))
HELD_FAILURES = sorted(HELDOUT.glob("failures/*.log"))
HELD_HEALTHY = sorted(HELDOUT.glob("healthy/*.log"))
FAMILY = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w./-]+\.log)` \| `(\w+)` \|", SOURCES, re.M)}
# measured on the split when it was drawn (2026-12-05); no rule was written from it
HELD_OUT_SILENT = {"kuberay_gcs_wait_timeout.log"}  # only Ray's "Timed out while waiting for GCS", quoted in prose


def _name(path):
    return str(path.relative_to(PUBLIC))


def test_the_corpus_is_big_enough_and_every_file_has_its_source():
    assert len(FAILURES) + len(HELD_FAILURES) >= 79 and len(HEALTHY) + len(HELD_HEALTHY) >= 15
    assert len(HELD_FAILURES) * 3 >= 9 and HELD_HEALTHY  # a third of the excerpts collected for #46
    for path in FAILURES + HEALTHY + HELD_FAILURES + HELD_HEALTHY:
        assert f"`{_name(path)}`" in SOURCES, _name(path)


@pytest.mark.parametrize("path", FAILURES + HELD_FAILURES, ids=_name)
def test_no_failure_excerpt_exits_0(path):
    result = diagnose(path)
    if path.name in HELD_OUT_SILENT and path.parent.parent == HELDOUT:
        pytest.xfail("held-out miss, measured and left as is")
    assert result["exit_code"] == 1, "a failed run answered 'no known failure'"
    family = FAMILY.get(_name(path))
    if path.parent.parent == HELDOUT:
        return  # scored, not asserted: docs/diagnose.md
    assert result["findings"][0]["code"] == family, ([f["code"] for f in result["findings"]], family)


@pytest.mark.parametrize("path", HEALTHY + HELD_HEALTHY, ids=_name)
def test_every_healthy_excerpt_exits_0(path):
    result = diagnose(path)
    assert result["exit_code"] == 0, [f["where"]["text"] for f in result["findings"]]

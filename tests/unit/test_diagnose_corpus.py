"""The public corpus as a whole (#46 item 7): no failure excerpt answers exit 0, every healthy one does, on the tuned
excerpts (public/verbatim/, public/noise/, public/healthy/, and public/heldout_2026-12-05/, held out in the first
round and tuned since) and the held-out split of the second round (public/heldout_2026-12-05b/).

The held-out split is measured, never tuned against: its families are scored, not asserted (docs/diagnose.md has both
splits' scores); fixing a miss by a rule written from it would spoil the split. That none of it answers exit 0 is
asserted like everywhere else: a silent miss there fails here and is reported as measured, never tuned away.
"""

import re
from pathlib import Path

import pytest
from test_diagnose import diagnose

pytestmark = pytest.mark.verl_agnostic
PUBLIC = Path(__file__).parents[1] / "fixtures" / "diagnose" / "public"
SOURCES = (PUBLIC.parent / "SOURCES.md").read_text()
FIRST_ROUND = PUBLIC / "heldout_2026-12-05"  # held out in round 1; tuned since (docs/diagnose.md says why)
HELDOUT = PUBLIC / "heldout_2026-12-05b"
FAILURES = sorted(PUBLIC.glob("verbatim/*.log")) + sorted(FIRST_ROUND.glob("failures/*.log"))
HEALTHY = sorted(PUBLIC.glob("noise/*.log")) + sorted(PUBLIC.glob("healthy/*.log")) + sorted(FIRST_ROUND.glob("healthy/*.log"))
HELD_FAILURES = sorted(HELDOUT.glob("failures/*.log"))
HELD_HEALTHY = sorted(HELDOUT.glob("healthy/*.log"))
FAMILY = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w./-]+\.log)` \| `(\w+)` \|", SOURCES, re.M)}


def _name(path):
    return str(path.relative_to(PUBLIC))


def test_the_corpus_is_big_enough_and_every_file_has_its_source():
    assert len(FAILURES) + len(HELD_FAILURES) >= 88 and len(HEALTHY) + len(HELD_HEALTHY) >= 15
    assert len(HELD_FAILURES) * 3 >= 9  # a third of the nine excerpts collected for round 2
    for path in FAILURES + HEALTHY + HELD_FAILURES + HELD_HEALTHY:
        assert f"`{_name(path)}`" in SOURCES, _name(path)
    for path in HELD_FAILURES + sorted(FIRST_ROUND.glob("failures/*.log")):
        assert _name(path) in FAMILY, _name(path)  # the expected family, written down when the split was drawn


@pytest.mark.parametrize("path", FAILURES + HELD_FAILURES, ids=_name)
def test_no_failure_excerpt_exits_0(path):
    result = diagnose(path)
    assert result["exit_code"] == 1, "a failed run answered 'no known failure'"
    if path.parent.parent in (FIRST_ROUND, HELDOUT):
        return  # families scored, not asserted: docs/diagnose.md
    family = FAMILY.get(_name(path))
    assert result["findings"][0]["code"] == family, ([f["code"] for f in result["findings"]], family)


@pytest.mark.parametrize("path", HEALTHY + HELD_HEALTHY, ids=_name)
def test_every_healthy_excerpt_exits_0(path):
    result = diagnose(path)
    assert result["exit_code"] == 0, [f["where"]["text"] for f in result["findings"]]

"""The public corpus as a whole (#46 item 7): no failure excerpt answers exit 0, every healthy one does, on the tuned
excerpts (public/verbatim/, public/noise/, public/healthy/, and public/heldout_2026-12-05/, held out in the first
round and tuned since; public/heldout_2026-12-05c/, the healthy runs held out in the third round and tuned since the
fourth, one of them since unscored), the held-out split of the second round (public/heldout_2026-12-05b/) and the
fourth round's held-out split of failures and healthy runs (public/heldout_2026-12-05d/, scored in docs/diagnose.md
before any rule was changed after it was drawn).

The held-out split is measured, never tuned against: its families are scored, not asserted (docs/diagnose.md has both
splits' scores); fixing a miss by a rule written from it would spoil the split. That none of it answers exit 0 is
asserted like everywhere else: a silent miss there fails here and is reported as measured, never tuned away.

A healthy run called failed is a false alarm. The ones no general rule can answer (the evidence that the line was
harmless is not in the excerpt: no progress or end mark of the run around it) are listed in FALSE_ALARMS as measured,
strict xfail: they are not tuned away by a list of harmless lines (#46 item 2), and a change that answers one of them
shows here as an unexpected pass, to be looked at and moved out of the list.

An excerpt whose text holds nothing of the run that would make it healthy (a lone error line the thread says a
graceful stop printed; a worker's death followed by nothing that proves it harmless) cannot be judged from its text
(#46 item 1: evidence of failure not proven harmless where it stands is a finding; item 7: where a thread does not
show the cause, leave it out): it is kept in public/unscored/, named in SOURCES.md with the reason, counted in
neither set, and must still exit 1.
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
THIRD_ROUND = PUBLIC / "heldout_2026-12-05c"  # held out in round 3; tuned since round 4 (docs/diagnose.md says why)
FOURTH_ROUND = PUBLIC / "heldout_2026-12-05d"  # the fourth round's held-out split: failures and healthy runs
FAILURES = sorted(PUBLIC.glob("verbatim/*.log")) + sorted(FIRST_ROUND.glob("failures/*.log"))
HEALTHY = (sorted(PUBLIC.glob("noise/*.log")) + sorted(PUBLIC.glob("healthy/*.log")) + sorted(FIRST_ROUND.glob("healthy/*.log"))
           + sorted(THIRD_ROUND.glob("healthy/*.log")))
HELD_FAILURES = sorted(HELDOUT.glob("failures/*.log")) + sorted(FOURTH_ROUND.glob("failures/*.log"))
HELD_HEALTHY = sorted(HELDOUT.glob("healthy/*.log")) + sorted(FOURTH_ROUND.glob("healthy/*.log"))
RUNS = sorted(PUBLIC.glob("healthy/*.log")) + sorted(PUBLIC.glob("heldout_*/healthy/*.log"))  # excerpts of runs, not noise/
# healthy runs answered exit 1, as measured: why no general rule answers each (none now: Ray#2481, the last one, is
# unscored since 2026-12-06, docs/diagnose.md says why)
FALSE_ALARMS = {}
# excerpts kept but not scored (SOURCES.md says why each): the thread calls the run healthy, but nothing in the excerpt
# shows it (no run, no end, no sign of the stop), and its text is word for word what a real failure prints
UNSCORED = sorted(PUBLIC.glob("unscored/*.log"))
TUNE_WORKER_DIED = ("unscored", "ray_tune_extraneous_worker_died.log")  # held out in round 3 (Ray#2481)
FAMILY = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w./-]+\.log)` \| `(\w+)` \|", SOURCES, re.M)}


def _name(path):
    return str(path.relative_to(PUBLIC))


def test_the_corpus_is_big_enough_and_every_file_has_its_source():
    assert len(FAILURES) + len(HELD_FAILURES) >= 88 and len(HEALTHY) + len(HELD_HEALTHY) >= 15
    assert len(RUNS) >= 15  # #46 item 7: healthy-but-noisy runs, the lines around failures (noise/) not counted
    # a third of the ten runs of round 3 (3rd, 6th, 9th by name); the 6th, Ray#2481's, unscored since
    assert len(sorted(THIRD_ROUND.glob("healthy/*.log"))) == 2 and PUBLIC.joinpath(*TUNE_WORKER_DIED).is_file()
    assert set(FALSE_ALARMS) <= {_name(path) for path in HEALTHY + HELD_HEALTHY}
    assert len(sorted(HELDOUT.glob("failures/*.log"))) * 3 >= 9  # a third of the nine excerpts collected for round 2
    assert len(sorted(FOURTH_ROUND.glob("*/*.log"))) >= 6  # round 4: at least six new excerpts, all held out
    for path in FAILURES + HEALTHY + HELD_FAILURES + HELD_HEALTHY + UNSCORED:
        assert f"`{_name(path)}`" in SOURCES, _name(path)
    for path in HELD_FAILURES + sorted(FIRST_ROUND.glob("failures/*.log")):
        assert _name(path) in FAMILY, _name(path)  # the expected family, written down when the split was drawn


@pytest.mark.parametrize("path", FAILURES + HELD_FAILURES, ids=_name)
def test_no_failure_excerpt_exits_0(path):
    result = diagnose(path)
    assert result["exit_code"] == 1, "a failed run answered 'no known failure'"
    if path.parent.parent in (FIRST_ROUND, HELDOUT, FOURTH_ROUND):
        return  # families scored, not asserted: docs/diagnose.md
    family = FAMILY.get(_name(path))
    assert result["findings"][0]["code"] == family, ([f["code"] for f in result["findings"]], family)


def _healthy(path):
    reason = FALSE_ALARMS.get(_name(path))
    return pytest.param(path, id=_name(path),
                        marks=[pytest.mark.xfail(reason=reason, strict=True)] if reason else [])


@pytest.mark.parametrize("path", [_healthy(path) for path in HEALTHY + HELD_HEALTHY])
def test_every_healthy_excerpt_exits_0(path):
    result = diagnose(path)
    assert result["exit_code"] == 0, [f["where"]["text"] for f in result["findings"]]


@pytest.mark.parametrize("path", UNSCORED, ids=_name)
def test_an_unscored_excerpt_is_answered_as_the_failure_its_text_reports(path):
    """Alone, a line that a healthy teardown printed is the same evidence as a real death (#46 item 1): the excerpt
    cannot be judged healthy from its text, so it is not scored, and no rule may make it exit 0 by what it says."""
    assert diagnose(path)["exit_code"] == 1

"""`verl-ascend logs`' parser and throughput, in this process, on a fixture holding the 235B field report's real
step line. The CLI runs are in tests/process/test_logs.py."""

from pathlib import Path

import pytest

from verl_ascend.logs import parse, throughput

pytestmark = pytest.mark.verl_agnostic
FIXTURE = Path(__file__).parents[1] / "fixtures" / "verl_steps.log"
FIELD_REPORT_LINE = FIXTURE.read_text(encoding="utf-8").splitlines()[2]  # the 235B field report's step-1 line, ESC byte lost


def test_the_235b_field_report_step_line_parses_to_its_values():
    step, m = parse.parse_line(FIELD_REPORT_LINE)
    assert step == 1
    assert m["timing_s/step"] == 2814.4491687440313
    assert m["response_length/mean"] == 1329.1591796875
    assert m["actor/lr"] == 1e-06 and m["training/global_step"] == 1.0
    assert m["perf/throughput"] == 8.035425590966435
    assert len(m) == FIELD_REPORT_LINE.split("step:1 - ", 1)[1].count(" - ") + 1  # every field, none lost


@pytest.mark.parametrize("prefix", ["", "(TaskRunner pid=11069) ", "\x1b[36m(TaskRunner pid=11069)\x1b[0m ",
                                    "[36m(TaskRunner pid=11069)[0m ", "/tmp/ray/session_latest/logs/driver.log:812:"])
def test_prefixes_and_colours_give_the_same_step(prefix):
    body = FIELD_REPORT_LINE.split(") ", 1)[1]
    assert parse.parse_line(prefix + body + "\x1b[0m\n") == parse.parse_line(FIELD_REPORT_LINE)


def test_value_forms_verl_prints():
    step, m = parse.parse_line("step:7 - a:np.float64(0.5) - b:nan - c:True - d:-3 - e:numpy.int64(12) - f:inf")
    assert step == 7 and m["a"] == 0.5 and m["b"] != m["b"] and m["c"] == 1.0 and m["d"] == -3 and m["e"] == 12
    assert m["f"] == float("inf")
    assert parse.parse_line("training/global_step:3 - x:1") is None  # a key ending in step is no step line
    with pytest.raises(ValueError):
        parse.parse_line("step:8 - a:1 - b")


def test_fixture_steps_malformed_lines_counted_and_repeats_replaced(tmp_path):
    parsed = parse.parse_files([str(FIXTURE)])
    assert list(parsed.steps) == [1, 2, 3]
    assert [(bad.line, bad.reason.split(":")[0]) for bad in parsed.malformed] == [(7, "field 'timing_s/st' is not key"),
                                                                                  (8, "critic/rewards/mean")]
    assert parsed.steps[3]["response_length/mean"] == 1200.5
    resumed = tmp_path / "resumed.log"
    resumed.write_text("step:3 - critic/rewards/mean:0.75\nstep:4 - critic/rewards/mean:0.8\n")
    both = parse.parse_files([str(FIXTURE), str(resumed)])
    assert list(both.steps) == [1, 2, 3, 4] and both.duplicates == 1
    assert both.steps[3] == {"critic/rewards/mean": 0.75}  # the later file wins, whole step


def test_throughput_matches_the_235b_field_report_formulas_by_hand():
    _, m = parse.parse_line(FIELD_REPORT_LINE)
    # the 235B field report's recipe: train_batch_size 128, rollout.n 16, 16 nodes x 8 NPUs
    tokens = (1329.1591796875 + 84.296875) * 128 * 16
    assert tokens == m["perf/total_num_tokens"]  # verl logs exactly this numerator
    expected = {"throughput/e2e_tps": tokens / 128 / 2814.4491687440313,
                "throughput/update_tps": tokens / 128 / 644.0539472099626,
                "throughput/rollout_tps": tokens / 128 / 1549.5419146210188}
    got = throughput.for_step(m, world_size=128)
    assert got == pytest.approx(expected, rel=1e-12)
    assert got["throughput/e2e_tps"] == pytest.approx(m["perf/throughput"], rel=1e-12)  # verl's own per-card figure
    assert round(got["throughput/e2e_tps"], 3) == 8.035 and round(got["throughput/update_tps"], 2) == 35.11
    assert throughput.inferred_world_size(m) == 128
    assert throughput.for_step(m) == pytest.approx(expected, rel=1e-12)  # world size inferred
    bare = {k: v for k, v in m.items() if not k.startswith("perf/")}
    assert throughput.for_step(bare) == {}  # neither tokens nor world size known: nothing invented
    assert throughput.for_step(bare, world_size=128, samples_per_step=128 * 16) == pytest.approx(expected, rel=1e-12)

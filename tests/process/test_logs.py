"""`verl-ascend logs` on a fixture holding the 235B field report's real step line (docs/field-reports.md) plus synthetic steps."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from subproc import clean_env, run_cli

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


def _quadrant_has_colour(image, box, rgb, tol=30, need=40):
    import numpy as np

    region = np.asarray(image.crop(box).convert("RGB"), dtype=int)
    hits = int((np.abs(region - np.array(rgb)) <= tol).all(axis=-1).sum())
    return hits >= need


def test_cli_writes_csv_and_plot_and_summarizes_last_step(tmp_path):
    from PIL import Image

    log = tmp_path / "run.log"
    shutil.copy(FIXTURE, log)
    out_csv, out_png = tmp_path / "steps.csv", tmp_path / "steps.png"
    proc = run_cli("logs", str(log), "--csv", str(out_csv), "--plot", str(out_png), timeout=120)
    assert proc.returncode == 1, proc.stderr  # malformed lines were skipped
    out = proc.stdout
    assert "parsed 3 step(s) (1..3)" in out and "skipped 2 malformed step line(s)" in out
    assert "last step 3:" in out and "reward mean       0.625" in out and "mean 1200.5  max 3900" in out
    e2e = 2808000 / 128 / 2200.0
    assert f"e2e {e2e:.4g}" in out and "world size 128, inferred" in out
    rows = list(csv.DictReader(out_csv.open()))
    assert [r["step"] for r in rows] == ["1", "2", "3"]
    assert float(rows[0]["timing_s/step"]) == 2814.4491687440313
    assert float(rows[2]["throughput/e2e_tps"]) == pytest.approx(e2e)
    assert rows[2]["global_seqlen/min"] == ""  # absent in step 3: empty, not zero
    image = Image.open(out_png)
    assert image.size == (1200, 800)
    assert "reward mean; response length; time per step by phase; throughput per card" in image.info["Description"]
    w, h = image.size
    blue = (31, 119, 180)  # matplotlib's first colour: the first series of every panel
    for box in [(0, 0, w // 2, h // 2), (w // 2, 0, w, h // 2), (0, h // 2, w // 2, h), (w // 2, h // 2, w, h)]:
        assert _quadrant_has_colour(image, box, blue), f"panel {box} is blank"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # temp files renamed or removed
    umask = os.umask(0)
    os.umask(umask)
    for written in (out_csv, out_png):  # like any file the user creates, not mkstemp's 0600
        assert written.stat().st_mode & 0o777 == 0o666 & ~umask


def test_plot_format_follows_the_file_name_or_is_refused(tmp_path):
    log = tmp_path / "run.log"
    shutil.copy(FIXTURE, log)
    pdf = run_cli("logs", str(log), "--plot", str(tmp_path / "steps.pdf"), timeout=120)
    assert pdf.returncode == 1, pdf.stderr
    assert (tmp_path / "steps.pdf").read_bytes().startswith(b"%PDF")
    jpg = run_cli("logs", str(log), "--plot", str(tmp_path / "steps.jpg"), timeout=60)
    assert jpg.returncode == 2 and ".png, .pdf, .svg" in jpg.stderr and not (tmp_path / "steps.jpg").exists()


def test_output_that_cannot_be_written_exits_2_without_a_traceback(tmp_path):
    log = tmp_path / "run.log"
    shutil.copy(FIXTURE, log)
    folder = run_cli("logs", str(log), "--csv", str(tmp_path), timeout=60)
    assert folder.returncode == 2 and "is a directory" in folder.stderr and "Traceback" not in folder.stderr
    locked = tmp_path / "locked"
    locked.mkdir()
    # a folder this process cannot write to, even as root: read-only in a bubblewrap mount namespace
    for option, name in (("--csv", "x.csv"), ("--plot", "x.png")):
        proc = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(locked), str(locked),
                               sys.executable, "-m", "verl_ascend", "logs", str(log), option, str(locked / name)],
                              env=clean_env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "not writable" in proc.stderr and "Traceback" not in proc.stderr
    assert list(locked.iterdir()) == []


def test_clean_log_exits_0_and_bad_input_exits_2(tmp_path):
    clean = tmp_path / "clean.log"
    clean.write_text("\n".join(FIXTURE.read_text(encoding="utf-8").splitlines()[:6]) + "\n")
    ok = run_cli("logs", str(clean), "--world-size", "128", timeout=60)
    assert ok.returncode == 0 and "world size 128, given" in ok.stdout
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    none = run_cli("logs", str(empty), timeout=60)
    assert none.returncode == 2 and "no verl step lines" in none.stderr
    missing = run_cli("logs", str(tmp_path / "nope.log"), timeout=60)
    assert missing.returncode == 2 and "nope.log" in missing.stderr
    zero = run_cli("logs", str(clean), "--world-size", "0", timeout=60)
    assert zero.returncode == 2 and "'0'" in zero.stderr
    nodir = run_cli("logs", str(clean), "--plot", str(tmp_path / "no" / "x.png"), timeout=60)
    assert nodir.returncode == 2 and "does not exist" in nodir.stderr

"""`verl-ascend logs` on a fixture holding the 235B field report's real step line (docs/field-reports.md) plus synthetic steps."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from subproc import clean_env, run_cli

pytestmark = pytest.mark.verl_agnostic
FIXTURE = Path(__file__).parents[1] / "fixtures" / "verl_steps.log"


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

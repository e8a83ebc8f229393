"""`verl-ascend patches check` on pristine, patched and unsupported trees; the supported-range warning."""

import json
import shutil

import pytest
from subproc import run_cli
from upstream_trees import apply, copy_tree, installed_version, verl_tree

from verl_ascend.diffs.check import load_diffs

VERL_DIFFS = [d for d in load_diffs() if d.project == "verl"]
VERSIONS = sorted({d.version for d in VERL_DIFFS})


def check(*args):
    proc = run_cli("patches", "check", "--json", *args, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    assert data["command"] == "patches check" and data["exit_code"] == proc.returncode, data
    return proc.returncode, {r["project"]: r for r in data["trees"]}


def states(report):
    return {(row["for_version"], row["fix"]): row["state"] for row in report["diffs"]}


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("version", VERSIONS)
def test_pristine_tree_every_diff_applies(version, tmp_path):
    code, reports = check("--source", str(verl_tree(version)))
    report = reports["verl"]
    assert code == 0 and report["supported"] and report["version"] == version
    expected = {(version, d.fix): "applies" for d in VERL_DIFFS if d.version == version}
    assert states(report) == expected


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("version", VERSIONS)
def test_patched_tree_reads_already_applied(version, tmp_path):
    root = copy_tree(version, tmp_path)
    mine = [d for d in VERL_DIFFS if d.version == version]
    apply(mine[0].path, root)
    code, reports = check("--source", str(root / "verl"))  # the package dir itself is accepted too
    got = states(reports["verl"])
    assert got[(version, mine[0].fix)] == "already applied"
    assert all(got[(version, d.fix)] == "applies" for d in mine[1:])
    assert code == 0


@pytest.mark.verl_agnostic
def test_half_applied_diff_does_not_apply(tmp_path):
    # A tree someone hand-edited (as the 235B field report did: `is_cuda_available = False`): neither applies nor reverts.
    root = copy_tree("0.6.1", tmp_path)
    device = root / "verl" / "utils" / "device.py"
    device.write_text(device.read_text().replace("is_cuda_available = torch.cuda.is_available()", "is_cuda_available = False"))
    code, reports = check("--source", str(root))
    got = {row["fix"]: row for row in reports["verl"]["diffs"]}
    assert got["device"]["state"] == "obsolete"  # the line it fixes is gone: the hand edit replaced it
    assert "is_cuda_available = torch.cuda.is_available()" in got["device"]["detail"]
    device.write_text(device.read_text().replace("import logging\n", "import logging  # local\n", 1)
                      .replace("is_cuda_available = False", "is_cuda_available = torch.cuda.is_available()"))
    code, reports = check("--source", str(root))
    got = {row["fix"]: row for row in reports["verl"]["diffs"]}
    assert got["device"]["state"] == "does not apply" and code == 1
    assert "device.py" in got["device"]["detail"]


@pytest.mark.verl_agnostic
def test_unsupported_version_tree_warns_and_tries_every_diff():
    proc = run_cli("patches", "check", "--source", str(verl_tree("0.5.0")), timeout=120)
    assert proc.returncode == 1
    assert "WARNING: verl 0.5.0 is not a version these diffs were made for (0.6.1, 0.9.1)" in proc.stdout
    for diff in VERL_DIFFS:
        assert f"{diff.fix} ({diff.version})" in proc.stdout
    assert "files not in this tree: verl/plugin/platform" in proc.stdout  # the 0.9 layout does not exist yet
    # a file a diff creates (rollout_order adds verl/utils/rollout_order.py) is never "missing"
    assert "rollout_order.py" not in proc.stdout


@pytest.mark.verl_agnostic
def test_code_defined_in_another_file_is_not_obsolete(tmp_path):
    """verl 0.5.0 defines MegatronWorker._init_hf_config_and_tf_config in
    single_controller/base/megatron/worker.py, not in workers/megatron_workers.py, which the 0.6.1
    mindspeed diff edits: the code is there, so the diff does not apply (another layout), never "obsolete".
    Removed from every file of the tree, it is obsolete."""
    diff = next(d for d in VERL_DIFFS if d.version == "0.6.1" and d.fix == "mindspeed")
    rel, text = diff.header["Obsolete-if-missing"][0].split(": ", 1)
    tree = verl_tree("0.5.0")
    holders = sorted(p.relative_to(tree).as_posix() for p in (tree / "verl").rglob("*.py") if text in p.read_text())
    assert holders and rel not in holders, holders  # what makes this the case under test
    _, reports = check("--source", str(tree))
    row = next(r for r in reports["verl"]["diffs"] if (r["for_version"], r["fix"]) == ("0.6.1", "mindspeed"))
    assert row["state"] == "does not apply" and all(h in row["detail"] for h in holders), row
    gone = tmp_path / "tree"
    shutil.copytree(tree, gone)
    for holder in holders:
        path = gone / holder
        path.write_text(path.read_text().replace(text, "def _renamed_upstream("))
    _, reports = check("--source", str(gone))
    row = next(r for r in reports["verl"]["diffs"] if (r["for_version"], r["fix"]) == ("0.6.1", "mindspeed"))
    assert row["state"] == "obsolete" and "no file under verl/" in row["detail"], row


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("version", ["0.7.1", "0.8.0"])
def test_matrix_versions_between_the_pinned_ones(version):
    # verl 0.7.0 shipped auto_set_device: the trainer_device diff is obsolete there.
    code, reports = check("--source", str(verl_tree(version)))
    report = reports["verl"]
    assert code == 1 and not report["supported"] and report["version"] == version
    got = states(report)
    assert got[("0.6.1", "trainer_device")] == "obsolete"


@pytest.mark.verl_agnostic
def test_bad_source_is_exit_2_with_the_fix(tmp_path):
    proc = run_cli("patches", "check", "--source", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    proc = run_cli("patches", "check", "--source", str(tmp_path))
    assert proc.returncode == 2 and "holds neither verl/ nor torch/" in proc.stderr
    assert run_cli("patches").returncode == 2


def test_installed_tree_text_report():
    if installed_version() not in {d.version for d in VERL_DIFFS}:
        pytest.skip(f"no diffs for the installed verl {installed_version()} (made for the CI versions)")
    proc = run_cli("patches", "check", "--project", "verl", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"verl {installed_version()} at " in proc.stdout
    assert "applies" in proc.stdout and "git apply" in proc.stdout

"""The `verl-ascend` entry point itself, in a fresh interpreter: --version, errors in the words of the
subcommand used, bad input said once with exit 2 (through the console script and through scripts/*.py),
and a crash that keeps its traceback and a code other than 2. Every subcommand's bad input is checked in
process by tests/unit/test_cli_bad_input.py."""

import sys

import pytest
from subproc import ROOT, clean_env, run_cli, run_python


@pytest.mark.verl_agnostic
def test_version():
    from verl_ascend import __version__

    proc = run_cli("--version", timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"verl-ascend {__version__}"


@pytest.mark.verl_agnostic
def test_unknown_flag_shows_the_subcommands_usage():
    proc = run_cli("logs", "some-input", "--no-such-flag", timeout=60)
    assert proc.returncode == 2
    assert "usage: verl-ascend logs " in proc.stderr
    assert "unrecognized arguments: --no-such-flag" in proc.stderr


@pytest.mark.verl_agnostic
def test_bad_input_is_said_once_in_the_commands_words_and_exits_2(tmp_path):
    missing = tmp_path / "no-such.log"
    proc = run_cli("diagnose", str(missing), timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verl-ascend diagnose: ") and str(missing) in lines[0], lines


@pytest.mark.verl_agnostic
def test_a_script_says_bad_input_in_its_own_name(tmp_path):
    import subprocess

    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gsm8k.py"), "--sample", "--local_dataset_path",
                           str(tmp_path)], capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "gsm8k.py: --sample and --local_dataset_path both name the source. Fix: give one of them."]


@pytest.mark.verl_agnostic
def test_a_crash_keeps_its_traceback_and_is_not_exit_2():
    # what a RuntimeError deep inside Hydra or verl looks like to cli.main: not bad input
    proc = run_python("import sys\nfrom verl_ascend import cli\nfrom verl_ascend.diagnose import report\n"
                      "def crash(*a, **k):\n    raise RuntimeError('inside hydra')\n"
                      "report.run = crash\nsys.exit(cli.main(['diagnose', 'x.log']))\n", timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" in proc.stderr and "RuntimeError: inside hydra" in proc.stderr
    assert "verl-ascend diagnose:" not in proc.stderr

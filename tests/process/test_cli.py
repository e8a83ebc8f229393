"""The `verl-ascend` entry point itself: --version, and errors in the words of the subcommand used."""

import pytest
from subproc import run_cli


@pytest.mark.verl_agnostic
def test_version():
    from verl_ascend import __version__

    proc = run_cli("--version", timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"verl-ascend {__version__}"


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("command", ["logs", "check", "diagnose"])
def test_unknown_flag_shows_the_subcommands_usage(command):
    proc = run_cli(command, "some-input", "--no-such-flag", timeout=60)
    assert proc.returncode == 2
    assert f"usage: verl-ascend {command} " in proc.stderr
    assert "unrecognized arguments: --no-such-flag" in proc.stderr


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("command", ["logs", "diagnose"])
def test_bad_input_is_said_once_in_the_commands_words_and_exits_2(command, tmp_path):
    missing = tmp_path / "no-such.log"
    proc = run_cli(command, str(missing), timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"verl-ascend {command}: ") and str(missing) in lines[0], lines

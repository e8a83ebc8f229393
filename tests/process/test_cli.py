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

"""Bad input of every subcommand, in this process through ``cli.main``: one line on stderr in the shape
``verl-ascend COMMAND: <message>`` naming the bad value, exit 2, nothing on stdout; and a crash inside a
command is never turned into that (it keeps its exception and traceback)."""

import pytest

from verl_ascend import cli
from verl_ascend.core.findings import BadInput


def _cases(tmp):
    missing = str(tmp / "no-such")
    binary = tmp / "bin"
    binary.mkdir()
    (binary / "core.log").write_bytes(b"\x00\x01\x02" * 100)
    recipe = tmp / "r.sh"
    recipe.write_text("python3 -m verl.trainer.main_ppo\n")
    return {
        "status --patch": (["status", "--patch", "no_such_patch"], "no_such_patch"),
        "check recipe": (["check", missing], missing),
        "bridge": (["bridge", "nobridge"], "no bridge 'nobridge'"),
        "check --set": (["check", str(recipe), "--set", "trainer.nnodes"], "'trainer.nnodes' is not KEY=VALUE"),
        "check --verl-src": (["check", str(recipe), "--verl-src", missing], missing),
        "doctor --hccn-conf": (["doctor", "--hccn-conf", missing], missing),
        "logs file": (["logs", missing], missing),
        "logs --plot": (["logs", str(recipe), "--plot", str(tmp / "steps.bmp")], "steps.bmp"),
        "diagnose path": (["diagnose", missing], missing),
        "diagnose binary": (["diagnose", str(binary)], "nothing to read"),
        "ckpt check dir": (["ckpt", "check", missing], missing),
        "ckpt check --recipe": (["ckpt", "check", str(tmp), "--recipe", missing], missing),
        "ckpt sync relative": (["ckpt", "sync", "ckpt", "--nodes", "a"], "'ckpt' is relative"),
        "ckpt sync node": (["ckpt", "sync", "/ckpt", "--nodes", "a b"], "'a b' is not [user@]host[:port]"),
        "ckpt sync twice": (["ckpt", "sync", "/ckpt", "--nodes", "a", "a"], "names a node twice"),
        "convert": (["convert", "--hf_model_path", missing, "--output_path", str(tmp / "out")], missing),
        "gsm8k": (["gsm8k", "--sample", "--local_dataset_path", missing], "--sample and --local_dataset_path"),
        "patches check": (["patches", "check", "--source", missing], missing),
        # a verl without a platform registry (0.5-0.8) is refused first, by name, before the recipe is read
        "rehearse": (["rehearse", missing], missing if _rehearsal_supported() else "no platform registry"),
        "supervise": (["supervise"], "no command given"),
    }


def _rehearsal_supported() -> bool:
    from verl_ascend.rehearse import rehearsal

    return not rehearsal.support_problem()


IDS = ["status --patch", "check recipe", "bridge", "check --set", "check --verl-src", "doctor --hccn-conf", "logs file",
       "logs --plot", "diagnose path", "diagnose binary", "ckpt check dir", "ckpt check --recipe",
       "ckpt sync relative", "ckpt sync node", "ckpt sync twice", "convert", "gsm8k", "patches check", "rehearse",
       "supervise"]


def test_every_subcommand_has_a_bad_input_case(tmp_path):
    cases = _cases(tmp_path)
    commands = {argv[0] for argv, _ in cases.values()}
    assert commands == set(cli.COMMANDS), set(cli.COMMANDS) ^ commands
    assert sorted(IDS) == sorted(cases)


@pytest.mark.parametrize("case", IDS)
def test_bad_input_is_one_line_in_the_commands_words_and_exit_2(case, tmp_path, capsys):
    argv, named = _cases(tmp_path)[case]
    args = cli.build_parser().parse_args(argv)
    with pytest.raises(BadInput):  # raised, not said by the command itself: cli.main is the one place
        args.func(args)
    capsys.readouterr()
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith(f"verl-ascend {argv[0]}: "), err
    assert named in err, err
    assert "Traceback" not in err and out == "", (out, err)


def test_argparse_errors_keep_argparses_shape_and_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["doctor", "--skip", "nonsense"])
    assert stop.value.code == 2
    assert "unknown check group(s) nonsense" in capsys.readouterr().err


@pytest.mark.parametrize("argv, where", [
    (["check", "r.sh"], "verl_ascend.check.report.check"),
    (["diagnose", "x.log"], "verl_ascend.diagnose.report.run"),
    (["ckpt", "check", "d"], "verl_ascend.ckpt.report.run"),
    (["gsm8k", "--sample"], "verl_ascend.data.gsm8k.write.run"),
])
def test_a_crash_inside_a_command_is_not_bad_input(argv, where, monkeypatch, capsys):
    def crash(*args, **kwargs):
        raise RuntimeError("hydra blew up")

    monkeypatch.setattr(where, crash)
    with pytest.raises(RuntimeError, match="hydra blew up"):
        cli.main(argv)
    assert "verl-ascend" not in capsys.readouterr().err


def test_bad_input_is_one_exception_type():
    from verl_ascend.check.report import BadCheckInput
    from verl_ascend.ckpt.recipe import BadRecipe
    from verl_ascend.ckpt.report import NoSuchFolder
    from verl_ascend.ckpt.sync import BadSyncInput
    from verl_ascend.convert.hf_source import ConvertError
    from verl_ascend.data.gsm8k import InputError

    for kind in (BadRecipe, NoSuchFolder, BadSyncInput, BadCheckInput, ConvertError, InputError):
        assert issubclass(kind, BadInput) and not issubclass(kind, RuntimeError), kind

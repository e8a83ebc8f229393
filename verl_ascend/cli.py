"""``verl-ascend``: command-line entry. Parses arguments and hands over to the features.

Each subcommand is one module in ``verl_ascend/commands/`` providing ``register(subparsers)``; the
subparser's ``func(args) -> int`` is the exit code (0 ok, 1 warnings / problems found, 2 errors found
or bad input; 130 after Ctrl-C).
"""

import argparse
import importlib
import os
import sys

from verl_ascend.core import findings

# Subcommand modules under verl_ascend/commands/, in the order of `verl-ascend --help`.
COMMANDS = (
    "status",    # what the plugin did in this environment
    "check",     # check RECIPE.sh
    "bridge",    # bridge NAME: the overrides selecting a Megatron bridge on this verl
    "doctor",    # is this node ready
    "logs",      # logs LOGFILE...
    "diagnose",  # diagnose PATH...
    "ckpt",      # ckpt check DIR
    "convert",   # HF -> Megatron (also scripts/converter_hf_to_mcore.py)
    "gsm8k",     # data (also scripts/gsm8k.py)
    "patches",   # patches check: the upstream-ready diffs in patches/
    "rehearse",  # rehearse RECIPE.sh on CPU
    "supervise",  # supervise -- COMMAND: keep a long run going
)


def build_parser(only=None) -> argparse.ArgumentParser:
    """The whole CLI, or with ``only`` (a name in COMMANDS) that one subcommand: each subcommand module imports
    what its options need, and ``verl-ascend diagnose`` on a small log spent more time importing the other ten
    than reading it."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="verl-ascend",
        description="Run verl on Huawei Ascend NPU clusters: runtime patch status, recipe checks, "
        "node diagnosis, log analysis, checkpoint conversion, data preparation.",
    )
    parser.add_argument("--version", action="version", version=f"verl-ascend {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"verl_ascend.commands.{name}").register(sub)
    parser.subcommands = sub.choices  # name -> its parser, for errors in that subcommand's words
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(only=argv[0] if argv and argv[0] in COMMANDS else None)
    # parse_args would blame an unknown flag on the top-level parser and print its usage; a flag the
    # subcommand does not know should show that subcommand's usage instead.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.subcommands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return _run(f"verl-ascend {args.command}", args)


def script(command: str, argv=None) -> int:
    """``scripts/<x>.py``: that subcommand's own parser (``build_parser()`` of its module, under the script's
    name) and the same error handling and exit codes as ``verl-ascend <command>``."""
    args = importlib.import_module(f"verl_ascend.commands.{command}").build_parser().parse_args(argv)
    return _run(os.path.basename(sys.argv[0]) or command, args)


def _run(prog: str, args) -> int:
    # The one place bad input is said: every feature raises a BadInput subclass, no command catches it. Any
    # other exception is a crash and keeps its traceback (and exit 1), so a bug never reads as "bad input".
    try:
        return args.func(args)
    except findings.BadInput as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""``verl-ascend``: command-line entry. Parses arguments and hands over to the features.

Each subcommand lives in its feature module, which provides ``register(subparsers)``; the
subparser's ``func(args) -> int`` is the exit code (0 ok, 1 findings/warnings, 2 bad input).
"""

import argparse
import importlib
import sys

# (module, what it adds) — the order is the order of `verl-ascend --help`.
COMMAND_MODULES = (
    "verl_ascend.status",          # status
    "verl_ascend.check.command",   # check RECIPE.sh
    "verl_ascend.doctor",          # doctor
    "verl_ascend.logs.command",    # logs LOGFILE...
    "verl_ascend.diagnose.command",  # diagnose PATH...
    "verl_ascend.ckpt.command",    # ckpt check DIR
    "verl_ascend.convert.command",  # convert (also scripts/converter_hf_to_mcore.py)
    "verl_ascend.data.command",    # gsm8k (also scripts/gsm8k.py)
    "verl_ascend.upstream",        # patches check
    "verl_ascend.rehearse.command",  # rehearse RECIPE.sh
)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="verl-ascend",
        description="Run verl on Huawei Ascend NPU clusters: runtime patch status, recipe checks, "
        "node diagnosis, log analysis, checkpoint conversion, data preparation.",
    )
    parser.add_argument("--version", action="version", version=f"verl-ascend {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):  # feature not built yet
                continue
            raise
        module.register(sub)
    parser.subcommands = sub.choices  # name -> its parser, for errors in that subcommand's words
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    # parse_args would blame an unknown flag on the top-level parser and print its usage; a flag the
    # subcommand does not know should show that subcommand's usage instead.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.subcommands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

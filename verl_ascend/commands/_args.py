"""argparse value types shared by the subcommands (argparse turns their errors into exit 2)."""

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def comma_names(text: str) -> list:
    """``a, b,,c`` -> ``["a", "b", "c"]``: a comma-separated list of names (empty items dropped)."""
    return [name.strip() for name in text.split(",") if name.strip()]

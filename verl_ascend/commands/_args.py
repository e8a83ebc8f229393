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


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def non_negative_int(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def learning_rate(text: str) -> str:
    """A positive finite number, kept as written (``1e-2`` reaches Hydra as ``1e-2``)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive learning rate (e.g. 1e-3)")
    return text.strip()

"""Progress on long reads: one tqdm bar on stderr (hidden when stderr is not a terminal)."""

import sys


def bytes_bar(total: int, name: str):
    """A bar counting bytes of ``name``; the tools read multi-GB logs, so the user sees it move."""
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=name, leave=False, disable=None, file=sys.stderr)

"""Output files of the tools: checked before the work starts, written whole or not at all.

Every tool that writes a file (``logs --csv/--plot``, ``gsm8k``, ``convert``) promises the same: a
bad output path is exit 2 with the path and the fix before any work, a file appears only complete
(temp file in the same folder, then rename), and with the permissions any new file of the user gets
(umask applied; ``mkstemp`` alone would leave 0600).
"""

import contextlib
import os
import tempfile


def problem(option: str, path: str):
    """Why ``path`` cannot be written as ``option``'s output file, or None."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"{option} {path}: is a directory; give a file name, e.g. {os.path.join(path, 'out')}"
    if not os.path.isdir(folder):
        return f"{option} {path}: directory {folder} does not exist; create it or choose another path"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{option} {path}: directory {folder} is not writable by this user; choose another path"
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic(path: str, suffix: str = ""):
    """Yields a temp path beside ``path``; on success it becomes ``path`` (mode 0666 & ~umask)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=suffix + ".tmp", dir=folder)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

#!/usr/bin/env python3
"""Print a git-style unified diff between two copies of a source tree (for patches/<project>/...).

    dev/diff-trees.py PRISTINE_ROOT EDITED_ROOT > patches/verl/0.9.1/fix.patch.body

Only files present in EDITED_ROOT are compared (copy the files you edit, keeping their paths under
the root, e.g. ``verl/utils/device.py``), so the edited root may hold just those files. Paths in the
output are relative to the roots with ``a/`` and ``b/`` prefixes: apply with ``git apply`` or
``patch -p1`` from the directory that holds ``verl/`` (site-packages or a checkout).
"""

import difflib
import sys
from pathlib import Path


def tree_diff(old_root: Path, new_root: Path) -> str:
    out = []
    for new in sorted(p for p in new_root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = new.relative_to(new_root).as_posix()
        old = old_root / rel
        before = old.read_text().splitlines(keepends=True) if old.exists() else []
        after = new.read_text().splitlines(keepends=True)
        if before == after:
            continue
        out.append(f"diff --git a/{rel} b/{rel}\n")
        if not old.exists():
            out.append("new file mode 100644\n")
        lines = difflib.unified_diff(before, after, f"a/{rel}" if old.exists() else "/dev/null", f"b/{rel}", n=3)
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.stdout.write(tree_diff(Path(sys.argv[1]), Path(sys.argv[2])))

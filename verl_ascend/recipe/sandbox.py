"""Run a recipe script where it cannot touch the host: the OS's namespaces, nothing hand-made.

Why: a recipe is someone else's script. Launchers in the wild begin with ``pkill -9 python; ray stop
--force; rm -rf /tmp/ray``, install packages, or truncate log files. ``check`` must read such a
script's trainer call without any of that happening on the machine it runs on (often a shared login
node).

How, in two steps, both standard Linux tools:

1. ``unshare --mount`` (util-linux; with ``--user --map-root-user`` when not root) gives a private
   mount table in which ``/tmp``, ``/var/tmp``, ``$HOME``, the caller's working directory and the
   recipe's folder each get an overlay whose upper layer is a tmpfs: the recipe reads the real files
   (``source ./common.sh``, ``source ~/env.sh``), ``mkdir -p logs`` and ``> train.log`` work as on
   the cluster, and every write vanishes with the namespace. Where the kernel refuses an overlay,
   ``/tmp``, ``/var/tmp`` and ``$HOME`` are empty instead and the other two read-only (the report says so).
2. ``bwrap`` (bubblewrap) then runs ``bash RECIPE.sh`` in new user, PID, network, IPC and UTS
   namespaces with every capability dropped: the rest of the host file system read-only, those
   private views, an empty ``/run``, a fresh ``/proc`` and ``/dev``, only the loopback network.
   No process outside can be seen or signalled; when the sandbox's first process dies, the kernel
   ends every process inside (a timeout kills the whole tree, ``sleep`` children included).
   Where no ``bwrap`` is on PATH (a fresh machine after ``pip install verl-ascend`` alone, a login
   node without root), :mod:`.kernel_jail` makes the same namespaces and mounts with the kernel's calls
   (unshare(2), mount(2), prctl(2), capset(2)), from the standard library; docs/check.md says why this
   and not a bwrap binary shipped in a wheel.

Where ``unshare`` is missing or the kernel forbids user namespaces, :class:`Unavailable` is raised
with the fix; ``check`` then refuses (exit 2) rather than run the script unprotected.
"""

import os
import shutil
import subprocess
from pathlib import Path

from verl_ascend.core.findings import BadInput

# Step 1, run by bash inside `unshare`: give each listed host directory a throw-away writable view
# at $scratch/m<i> (an overlay: the host files below, writes into a tmpfs above), then exec bwrap,
# which binds each view over its host path. The host paths themselves are never covered here, so
# the capture folder stays a real host folder.
# argv: scratch  n  (dir fallback)...  --  bwrap-args...   fallback: tmpfs (empty) or ro (read-only)
_OUTER = r"""
set -u
scratch=$1; n=$2; shift 2
mount -t tmpfs va-check "$scratch" || exit 97
i=0
while [ "$n" -gt 0 ]; do
  d=$1; fallback=$2; shift 2; n=$((n - 1)); i=$((i + 1))
  m="$scratch/m$i"; mkdir -p "$m" "$scratch/$i/u" "$scratch/$i/w"
  # userxattr: the form an unprivileged user namespace may mount (Linux >= 5.11)
  mount -t overlay va-check -o "lowerdir=$d,upperdir=$scratch/$i/u,workdir=$scratch/$i/w,userxattr" "$m" 2>/dev/null \
    || mount -t overlay va-check -o "lowerdir=$d,upperdir=$scratch/$i/u,workdir=$scratch/$i/w" "$m" 2>/dev/null \
    || { echo "$d $fallback" >> "$VA_CHECK_CAPTURE/no-overlay"
         if [ "$fallback" = tmpfs ]; then mount -t tmpfs va-check "$m" || exit 97
         else { mount --bind "$d" "$m" && mount -o remount,bind,ro "$m"; } || exit 97; fi; }
done
shift  # the "--"
exec "$@"
"""

# First thing inside: mark that the sandbox is up (so a failure after this is the recipe's), then
# become the recipe's bash with $0 = its path, as `bash RECIPE.sh` would.
_STARTED = ': > "$VA_CHECK_CAPTURE/started" && exec bash "$0"'
STARTED = "started"

FIX = ("allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0; Ubuntu 24.04+: "
       "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap) and keep util-linux's "
       "unshare on PATH; a bubblewrap on PATH is used when present (a broken one is not bypassed: fix or remove it; "
       "Debian/Ubuntu: apt install bubblewrap, RHEL/openEuler: yum install bubblewrap), without one check makes the "
       "same namespaces itself; or run check on a machine that allows them, e.g. a laptop or a CI runner")


class Unavailable(BadInput, RuntimeError):
    """No safe way to run a recipe here; the message names the fix. Bad input for every tool that reads
    recipes (check, rehearse): ``cli.main`` says it and exits 2, nothing of the recipe ran."""


def tools() -> tuple:
    """(unshare, bwrap) paths, bwrap None where none is on PATH (then :mod:`.kernel_jail` makes the same
    namespaces); raise Unavailable when ``unshare`` is missing."""
    unshare, bwrap = shutil.which("unshare"), shutil.which("bwrap")
    if not unshare:
        raise Unavailable("cannot sandbox the recipe: unshare (util-linux) not found on PATH; "
                          f"check never runs a recipe unprotected. Fix: {FIX}")
    return unshare, bwrap


def _bwrap_args(bwrap, views, scratch, readonly, capture, cwd, masks=()) -> list:
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
    for i, (d, _) in enumerate(views, 1):
        args += ["--bind", f"{scratch}/m{i}", d]
    for d in readonly:
        args += ["--ro-bind", str(d), str(d)]
    for source, target in masks:
        args += ["--ro-bind", str(source), str(target)]
    return args + ["--bind", str(capture), str(capture), "--chdir", str(cwd), "--"]


def _kernel_jail_args(views, scratch, readonly, capture, cwd, masks=()) -> list:
    """The same sandbox without bwrap: :mod:`.kernel_jail` run as a file by this interpreter, isolated (-I) and
    without site-packages (-S): it needs the standard library only."""
    import json
    import sys

    spec = {"views": [(f"{scratch}/m{i}", d) for i, (d, _) in enumerate(views, 1)],
            "read_only": [str(d) for d in readonly], "read_write": [str(capture)], "chdir": str(cwd),
            "masks": [[str(source), str(target)] for source, target in masks]}
    return [sys.executable, "-I", "-S", str(Path(__file__).with_name("kernel_jail.py")), json.dumps(spec), "--"]


def _views(cwd: Path, extra: list) -> list:
    """[(host dir, fallback)] given a throw-away writable view: scratch space and the user's home
    (empty if no overlay), the launch directory and the recipe's folder (read-only if no overlay)."""
    views = [(d, "tmpfs") for d in ("/tmp", "/var/tmp") if os.path.isdir(d)]
    home = os.environ.get("HOME", "")
    if home and os.path.isabs(home) and os.path.isdir(home):
        views.append((str(Path(home).resolve()), "tmpfs"))
    views += [(str(Path(d).resolve()), "ro") for d in [cwd, *extra] if d and os.path.isdir(d)]
    seen, out = set(), []
    for d, fallback in views:
        if d != "/" and d not in seen:
            seen.add(d)
            out.append((d, fallback))
    return sorted(out, key=lambda v: len(v[0]))  # bound parents first


def command(script: Path, cwd: Path, extra: list, capture: Path, readonly: list, scratch: Path, masks=()) -> list:
    """argv that runs ``bash script`` in the sandbox, from ``cwd``.

    extra: more directories with a throw-away writable view (the recipe's folder); readonly: our
    recorders, bound read-only; capture: bound read-write, the only host path a recipe can write to
    (it holds the recorded calls); scratch: an empty host directory, a tmpfs is mounted on it inside
    to hold the overlay layers; masks: (file, host file) pairs, the file bound read-only over the host file
    (the recorder over an interpreter the script names by its absolute path).
    """
    unshare, bwrap = tools()
    views = _views(cwd, extra)
    args = (_bwrap_args(bwrap, views, scratch, readonly, capture, cwd, masks) if bwrap
            else _kernel_jail_args(views, scratch, readonly, capture, cwd, masks))
    args += ["bash", "-c", _STARTED, str(script)]
    # real root needs no user namespace to mount (and old kernels allow overlays only to it)
    userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    pairs = [x for view in views for x in view]
    return [unshare, *userns, "--mount", "--", "bash", "-c", _OUTER, "va-check-sandbox",
            str(scratch), str(len(views)), *pairs, "--", *args]


def kill_tree(proc: subprocess.Popen) -> None:
    """End the sandbox: its process group on the host; the PID namespace takes the rest with it."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()

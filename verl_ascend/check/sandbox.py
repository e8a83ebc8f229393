"""Run a recipe script where it cannot touch the host: the OS's namespaces, nothing hand-made.

Why: a recipe is someone else's script. Launchers in the wild begin with ``pkill -9 python; ray stop
--force; rm -rf /tmp/ray``, install packages, or truncate log files. ``check`` must read such a
script's trainer call without any of that happening on the machine it runs on (often a shared login
node).

How, in two steps, both standard Linux tools:

1. ``unshare --user --map-root-user --mount`` (util-linux) gives a private mount table in which the
   caller's working directory and the recipe's directory are covered by an overlay whose upper layer
   is a tmpfs: ``mkdir -p logs``, ``> train.log`` and ``source ./common.sh`` work as on the cluster,
   and every write vanishes with the namespace. Where the kernel refuses the overlay, those
   directories are read-only instead (the report says so).
2. ``bwrap`` (bubblewrap) then runs ``bash RECIPE.sh`` in new user, PID, network, IPC and UTS
   namespaces with every capability dropped: the host file system read-only, private ``/tmp``,
   ``/var/tmp``, ``/run`` and ``$HOME``, a fresh ``/proc`` and ``/dev``, only the loopback network.
   No process outside can be seen or signalled; when the sandbox's first process dies, the kernel
   ends every process inside (a timeout kills the whole tree, ``sleep`` children included).

Where either tool is missing or the kernel forbids user namespaces, :class:`Unavailable` is raised
with the fix; ``check`` then refuses (exit 2) rather than run the script unprotected.
"""

import os
import shutil
import subprocess
from pathlib import Path

# Step 1, run by bash inside `unshare`: overlay each writable directory, then exec bwrap.
# argv: scratch-dir  cwd  n-dirs  dir...  --  bwrap-args...
_OUTER = r"""
set -u
scratch=$1; cwd=$2; n=$3; shift 3
mount -t tmpfs va-check "$scratch" || exit 97
i=0
while [ "$n" -gt 0 ]; do
  d=$1; shift; n=$((n - 1)); i=$((i + 1))
  mkdir -p "$scratch/$i/u" "$scratch/$i/w"
  # userxattr: the form an unprivileged user namespace may mount (Linux >= 5.11)
  mount -t overlay va-check -o "lowerdir=$d,upperdir=$scratch/$i/u,workdir=$scratch/$i/w,userxattr" "$d" 2>/dev/null \
    || mount -t overlay va-check -o "lowerdir=$d,upperdir=$scratch/$i/u,workdir=$scratch/$i/w" "$d" 2>/dev/null \
    || echo "$d" >> "$VA_CHECK_CAPTURE/read-only-dirs"
done
shift  # the "--"
cd "$cwd" 2>/dev/null || cd /
exec "$@"
"""

# First thing inside: mark that the sandbox is up (so a failure after this is the recipe's), then
# become the recipe's bash with $0 = its path, as `bash RECIPE.sh` would.
_STARTED = ': > "$VA_CHECK_CAPTURE/started" && exec bash "$0"'
STARTED = "started"

FIX = ("install bubblewrap (Debian/Ubuntu: apt install bubblewrap; RHEL/openEuler: yum install bubblewrap) and "
       "allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0; Ubuntu 24.04+: "
       "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap), or run check on "
       "a machine that has both, e.g. a laptop or a CI runner")


class Unavailable(RuntimeError):
    """No safe way to run a recipe here; the message names the fix."""


def tools() -> tuple:
    """(unshare, bwrap) paths, or raise Unavailable naming what is missing."""
    unshare, bwrap = shutil.which("unshare"), shutil.which("bwrap")
    missing = [name for name, path in (("unshare (util-linux)", unshare), ("bwrap (bubblewrap)", bwrap)) if not path]
    if missing:
        raise Unavailable(f"cannot sandbox the recipe: {' and '.join(missing)} not found on PATH; "
                          f"check never runs a recipe unprotected. Fix: {FIX}")
    return unshare, bwrap


def _private_dirs() -> list:
    """Host directories replaced by empty tmpfs inside: scratch space and the user's home."""
    dirs = ["/tmp", "/var/tmp", "/run"]
    home = os.environ.get("HOME", "")
    if home and os.path.isabs(home) and os.path.isdir(home) and Path(home).resolve() != Path("/"):
        dirs.append(str(Path(home).resolve()))
    return [d for d in dirs if os.path.isdir(d)]


def command(script: Path, cwd: Path, writable: list, capture: Path, readonly: list, scratch: Path) -> list:
    """argv that runs ``bash script`` in the sandbox.

    writable: directories visible with a throw-away writable layer (cwd, the recipe's folder);
    readonly: extra directories bound read-only (our recorders); capture: bound read-write, the only
    host path a recipe can write to (it holds the recorded calls); scratch: an empty host directory
    used as the mount point of the overlay layers (a tmpfs is mounted on it inside).
    """
    unshare, bwrap = tools()
    writable = sorted({str(Path(d).resolve()) for d in writable if d and Path(d).resolve() != Path("/")}, key=len)
    # a folder inside another one is already covered by the outer overlay
    writable = [d for d in writable if not any(d.startswith(o.rstrip("/") + "/") for o in writable if o != d)]
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for d in _private_dirs():
        args += ["--tmpfs", d]
    for d in writable:  # after the tmpfs mounts: a recipe under /tmp or $HOME stays visible
        args += ["--bind", d, d]
    for d in readonly:
        args += ["--ro-bind", str(d), str(d)]
    args += ["--bind", str(capture), str(capture), "--chdir", str(cwd), "--",
             "bash", "-c", _STARTED, str(script)]
    return [unshare, "--user", "--map-root-user", "--mount", "--", "bash", "-c", _OUTER, "va-check-sandbox",
            str(scratch), str(cwd), str(len(writable)), *writable, "--", *args]


def kill_tree(proc: subprocess.Popen) -> None:
    """End the sandbox: its process group on the host; the PID namespace takes the rest with it."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()

"""The sandbox's second step where no ``bwrap`` is on PATH: the same namespaces, made with the kernel's calls.

Run as a file by a bare interpreter (``python -I -S kernel_jail.py SPEC -- COMMAND...``) inside the private mount
table that ``unshare --mount`` made (:mod:`.sandbox`, step 1); standard library only (``ctypes`` for
unshare(2), mount(2), prctl(2), capset(2)), nothing of verl-ascend or site-packages is imported.

What it does, in the order bubblewrap does it for the arguments :mod:`.sandbox` gives it:

1. unshare(2) new user, mount, PID, network, IPC and UTS namespaces; map this user to root inside.
2. fork: the child is PID 1 of the new PID namespace; it gets SIGKILL when its parent dies
   (``--die-with-parent``), and when it exits the kernel kills every process left in the namespace. The
   parent waits and exits with its status.
3. In the child, with the mount table made private: the throw-away views, the read-only and read-write
   binds of SPEC over their host paths (sources opened before anything is covered, mounted through
   ``/proc/self/fd``); an empty ``/run``; a fresh ``/dev`` (tmpfs with the host's null, zero, full,
   random, urandom and tty bound in, ``/dev/shm`` a tmpfs); a fresh ``/proc`` of the new PID namespace
   with ``/proc/sys``, ``sysrq-trigger``, ``irq`` and ``bus`` read-only. Then every other mount reachable
   in the table is remounted read-only (keeping the flags the kernel locks: nosuid, nodev, noexec, atime);
   a mount that cannot be made read-only ends the jail before anything of the recipe runs.
4. The loopback interface up (the only network); a new session (``--new-session``); no-new-privileges;
   every capability dropped from the bounding, ambient, inheritable, permitted and effective sets
   (``--cap-drop ALL``); then exec the command from SPEC's directory.

Any failure before the exec prints one line to stderr and exits 97: the command never starts, so the
caller's "started" mark is missing and it refuses to read the recipe.
"""

import ctypes
import errno
import json
import os
import signal
import socket
import struct
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
FRESH = ("/proc", "/dev", "/run")  # mounted here anew: not the host's, left as made
FAILED = 97

_libc = ctypes.CDLL(None, use_errno=True)


class JailError(Exception):
    pass


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(err)}") from OSError(err, os.strerror(err))


def _enc(value):
    return None if value is None else os.fsencode(value)


def _mount(source, target, fstype, flags, data=None, what=""):
    _check(_libc.mount(_enc(source), _enc(target), _enc(fstype), ctypes.c_ulong(flags), _enc(data)),
           what or f"mount {source} on {target}")


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _unshare(uid, gid):
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS),
           "unshare(user, mount, pid, net, ipc, uts) (user namespaces disabled?)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")


def _unescape(field):
    """A mountinfo path: spaces, tabs, newlines and backslashes are octal escapes."""
    return field.encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "surrogateescape")


def mounts():
    """[(mount point, per-mount options)] of this mount table, in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            out.append((_unescape(fields[4]), fields[5].split(",")))
    return out


def _flags(options):
    """The per-mount flags a read-only remount must keep (the kernel refuses to clear locked ones)."""
    flags = 0
    for name, bit in (("nosuid", MS_NOSUID), ("nodev", MS_NODEV), ("noexec", MS_NOEXEC),
                      ("noatime", MS_NOATIME), ("nodiratime", MS_NODIRATIME), ("relatime", MS_RELATIME)):
        if name in options:
            flags |= bit
    if not flags & (MS_NOATIME | MS_RELATIME):
        flags |= MS_STRICTATIME
    return flags


def _under(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def read_only_all(writable):
    """Remount read-only every mount point of this table but the writable binds and the fresh mounts.
    A mount hidden under another (ENOENT, EINVAL: not a mount point at that path any more) or on a path
    this user cannot reach (EACCES) cannot be written through either; any other refusal is fatal."""
    done = set()
    for point, options in mounts():
        if point in done or _under(point, writable) or _under(point, FRESH):
            continue
        done.add(point)
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | _flags(options)
        if _libc.mount(None, os.fsencode(point), None, ctypes.c_ulong(flags), None) != 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.EINVAL, errno.EACCES, errno.ENOTDIR):
                continue
            raise JailError(f"cannot make {point} read-only: {os.strerror(err)}")


def _bind_fd(fd, target, read_only=False):
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC, what=f"bind over {target}")
    if read_only:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
               what=f"make {target} read-only")


def _fresh_dev(node_fds):
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=0755", what="tmpfs on /dev")
    for name, fd in node_fds.items():
        open(f"/dev/{name}", "w").close()
        _bind_fd(fd, f"/dev/{name}")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2"), ("ptmx", "pts/ptmx")):
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm")
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", what="tmpfs on /dev/shm")
    os.mkdir("/dev/pts")
    try:  # a private pty instance, as bwrap makes; a host that refuses it only loses ptys inside
        _mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    except JailError:
        pass


def _fresh_proc():
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, what="a new /proc (a host /proc with "
           "masked paths, as in some containers, refuses it)")
    for name in PROC_READ_ONLY:
        path = f"/proc/{name}"
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC, what=f"bind {path}")
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   what=f"make {path} read-only")


def _loopback_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        import fcntl

        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges():
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on kernels before 4.3: none to clear
    header, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "clear the capability sets")


def setup(spec):
    """The file system view, in the new mount namespace. Every source is opened first, while no path is
    covered yet (a view over /tmp hides the overlay layers under it); a bind needs a source mount of this
    namespace, so they are opened here, after unshare, and not before."""
    node_fds = {name: fd for name, fd in zip(DEV_NODES, _open_paths(f"/dev/{n}" for n in DEV_NODES))}
    view_fds = _open_paths(src for src, _ in spec["views"])
    ro_fds, rw_fds = _open_paths(spec["read_only"]), _open_paths(spec["read_write"])
    masks = spec.get("masks", [])
    mask_fds = _open_paths(source for source, _ in masks)
    _mount(None, "/", None, MS_REC | MS_PRIVATE, what="make the mount table private")
    for (_, target), fd in zip(spec["views"], view_fds):
        _bind_fd(fd, target)
    for path, fd in zip(spec["read_only"], ro_fds):
        _bind_fd(fd, path, read_only=True)
    for path, fd in zip(spec["read_write"], rw_fds):
        _bind_fd(fd, path)
    for (_, target), fd in zip(masks, mask_fds):  # a file over a file: what the script runs there is ours
        _bind_fd(fd, target, read_only=True)
    _mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", what="tmpfs on /run")
    _fresh_dev(node_fds)
    _fresh_proc()
    read_only_all([target for _, target in spec["views"]] + list(spec["read_write"]))
    for fd in [*node_fds.values(), *view_fds, *ro_fds, *rw_fds, *mask_fds]:
        os.close(fd)
    _loopback_up()
    os.chdir(spec["chdir"])


def _open_paths(paths):
    return [os.open(p, os.O_PATH | os.O_CLOEXEC) for p in paths]


def main(argv) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: kernel_jail.py SPEC-JSON -- COMMAND...", file=sys.stderr)
        return 2
    spec, command = json.loads(argv[0]), argv[2:]
    try:
        _unshare(os.getuid(), os.getgid())
    except (JailError, OSError) as exc:
        print(f"va-check sandbox: {exc}", file=sys.stderr)
        return FAILED
    alive_r, alive_w = os.pipe()  # the parent holds the write end until it dies (both close-on-exec)
    child = os.fork()
    if child == 0:  # PID 1 of the new PID namespace (its parent, outside, has no pid here: getppid() is 0)
        try:
            os.close(alive_w)
            _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "die with the parent")
            import select

            if select.select([alive_r], [], [], 0)[0]:  # end of file: the parent died before the line above
                os._exit(FAILED)
            os.close(alive_r)
            setup(spec)
            os.setsid()
            drop_privileges()
            os.execvp(command[0], command)
        except (JailError, OSError) as exc:
            print(f"va-check sandbox: {exc}", file=sys.stderr)
        os._exit(FAILED)
    os.close(alive_r)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

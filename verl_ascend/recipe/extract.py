"""Find the trainer launch in a recipe script without running the trainer, or anything else of it.

The script runs under bash, as the user would run it, so its own variables, ``${VAR:-default}``
env defaults, arithmetic, arrays, heredocs and sourced files resolve exactly as on the cluster —
but inside the sandbox of :mod:`.sandbox` (no host process visible, host files read-only, private
``/tmp`` and ``$HOME``, no network), from the caller's working directory, with stdin closed and a
timeout. On top of that:

- ``python``/``python3``/``torchrun`` are recorders: each call writes its argv, working directory
  and environment to a capture directory and exits 0, so no Python program of the script runs; an
  interpreter the script names by its absolute path (``/opt/venv/bin/python -m ...``, also behind ``env``)
  has the recorder bound over it inside the sandbox, so it is recorded the same way;
  ``ray job submit ... -- python3 -m ...`` runs what follows ``--`` (a recorder again).
- Commands with side effects outside the script (``pkill``, ``kill``, ``rm``, ``pip``, ``curl``,
  ``ray stop``, ``ulimit``, ``sleep``, ...) are skipped: recorded and answered with exit 0, both as
  bash functions (which also shadow the ``kill``/``ulimit`` builtins) and as commands on PATH. The
  report lists them. The sandbox is what makes this safe; the skip list only keeps the report
  honest and the script fast (``sleep 600``, host limits that are not the recipe's error).
"""

import dataclasses
import os
import re
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from verl_ascend.core.findings import ERROR, INFO, WARNING, finding

from . import sandbox

# Recorder for python/python3/torchrun: argv NUL-separated, then cwd and environment.
_RECORDER = r"""#!/usr/bin/env bash
out="$VA_CHECK_CAPTURE/$(date +%s%N)-$$-call"
{ printf '%s\0' "$(basename "$0")" "$@"; } > "$out.argv"
pwd > "$out.cwd"
env -0 > "$out.env"
exit 0
"""
# A skipped command: argv recorded, exit 0.
_SKIP = r"""#!/usr/bin/env bash
{ printf '%s\0' "$(basename "$0")" "$@"; } > "$VA_CHECK_CAPTURE/$(date +%s%N)-$$-skip.argv"
exit 0
"""
# `ray job submit ... -- python3 -m ...`: run what follows `--`; any other ray call is skipped.
_RAY = r"""#!/usr/bin/env bash
if [ "${1:-}" = job ] && [ "${2:-}" = submit ]; then
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
  [ $# -gt 1 ] && shift && exec "$@"
fi
{ printf '%s\0' ray "$@"; } > "$VA_CHECK_CAPTURE/$(date +%s%N)-$$-skip.argv"
exit 0
"""
_RECORDED = ("python", "python3", "torchrun") + tuple(f"python3.{m}" for m in range(8, 15))
# Side effects on processes, files outside the script's own, packages, the network, or time.
SKIPPED = ("pkill", "killall", "kill", "rm", "pip", "pip3", "uv", "conda", "apt", "apt-get", "yum", "dnf",
           "curl", "wget", "git", "ssh", "scp", "rsync", "sudo", "docker", "systemctl", "sleep", "ulimit",
           "huggingface-cli", "hf", "modelscope")
# Sourced by every non-interactive bash of the script (BASH_ENV): functions beat builtins and PATH.
_PRELUDE = "\n".join(
    ["_va_skip() { { printf '%s\\0' \"$@\"; } > \"$VA_CHECK_CAPTURE/$(date +%s%N)-$$-skip.argv\"; return 0; }"]
    + [f'{name}() {{ _va_skip {name} "$@"; }}' for name in SKIPPED]
) + "\n"

# CANN's (and NNAL's) environment scripts, which every Ascend launch script sources first (verl's Ascend examples:
# `source /usr/local/Ascend/ascend-toolkit/set_env.sh`). Where CANN is not installed (a CPU host, a login node) the
# script would stop at that line under `set -e`; these wrappers skip exactly such a missing script, record it, and
# source everything else as bash does. Added only to scripts that source one, and only when it is missing here:
# a function runs `builtin source` in its own scope, where a sourced file's plain `declare` would be local.
CANN_ENV = re.compile(r"^\s*(?:source|\.)\s+[\"']?(\S*/Ascend/\S*set_env\.sh)", re.MULTILINE)
_CANN_PRELUDE = (
    'source() { if [ ! -e "${1:-}" ] && [[ "${1:-}" == */Ascend/*set_env.sh ]]; then '
    '_va_skip source "$@"; return 0; fi; builtin source "$@"; }\n'
    '.() { source "$@"; }\n')

TRAINER_MODULE_HINTS = ("main_ppo", "main_dapo", "main_grpo")


@dataclasses.dataclass
class Launch:
    """The trainer call the script makes: entry module (or .py file), Hydra options, overrides."""

    module: str
    config_path: str
    config_name: str
    overrides: list
    cwd: str
    env: dict

    @property
    def is_dapo(self) -> bool:
        return "dapo" in self.module.rsplit(".", 1)[-1] or "dapo" in self.config_name


def _write_bins(folder: Path, cann_missing: bool = False) -> None:
    for names, text in ((_RECORDED, _RECORDER), (SKIPPED, _SKIP), (("ray",), _RAY)):
        for name in names:
            (folder / name).write_text(text)
            (folder / name).chmod(0o755)
    (folder / "prelude.sh").write_text(_PRELUDE + (_CANN_PRELUDE if cann_missing else ""))


# An interpreter named by its absolute path in the script's text (a variable's value included).
_ABSOLUTE = re.compile(r"(?<![\w$}])(/[^\s'\"`;|&<>()$]*/(?:python(?:[23](?:\.\d+)?)?|torchrun))(?![\w.-])")


def interpreter_masks(text: str, bins: Path) -> list:
    """(recorder, host file) for each interpreter the script names by an absolute path that exists here."""
    out = {}
    for path in _ABSOLUTE.findall(text):
        real = os.path.realpath(path)
        if os.path.isfile(real) and real not in out:
            out[real] = bins / ("torchrun" if path.endswith("torchrun") else "python")
    return [(recorder, real) for real, recorder in out.items()]


def cann_env_missing(text: str) -> list:
    """The CANN environment scripts ``text`` sources that do not exist on this machine."""
    return [path for path in CANN_ENV.findall(text) if "$" not in path and not os.path.exists(path)]


def _read_env(path: Path) -> dict:
    env = {}
    for item in path.read_bytes().split(b"\0"):
        key, sep, value = item.decode(errors="replace").partition("=")
        if sep:
            env[key] = value
    return env


def _parse(argv: list, cwd: str, env: dict):
    """Split a recorded python argv into a Launch, or None if it is not a trainer call."""
    args = argv[1:]
    module = None
    i = 0
    while i < len(args):  # interpreter options come before -m / the script
        arg = args[i]
        if arg == "-m" and i + 1 < len(args):
            module, i = args[i + 1], i + 2
            break
        if arg.startswith("-m") and len(arg) > 2:
            module, i = arg[2:], i + 1
            break
        if arg.endswith(".py"):
            module, i = arg, i + 1
            break
        if arg == "-c":
            return None
        i += 1
    if module is None or not any(h in module for h in TRAINER_MODULE_HINTS):
        return None
    config_path, config_name, overrides = "config", "", []
    rest = args[i:]
    j = 0
    while j < len(rest):
        arg = rest[j]
        for long, short in (("--config-path", "-cp"), ("--config-name", "-cn")):
            if arg in (long, short) and j + 1 < len(rest):
                value, j = rest[j + 1], j + 1
            elif arg.startswith(long + "="):
                value = arg.split("=", 1)[1]
            else:
                continue
            if long == "--config-path":
                config_path = value
            else:
                config_name = value
            break
        else:
            if arg.strip():
                overrides.append(arg)
        j += 1
    if config_name.endswith(".yaml"):
        config_name = config_name[: -len(".yaml")]
    return Launch(module, config_path, config_name, overrides, cwd, env)


@dataclasses.dataclass
class Extracted:
    launch: object      # Launch or None
    findings: list
    stderr: str
    skipped: list       # the commands that were not run, as shell-quoted strings, in order


def _argv(path: Path) -> list:
    return [a.decode(errors="replace") for a in path.read_bytes().split(b"\0")[:-1]]


def extract(script: str, env_overrides=None, timeout: float = 60.0, cwd=None) -> Extracted:
    """Run ``script`` in the sandbox with recorders, from ``cwd`` (default: the caller's)."""
    import shlex

    script_path = Path(script).resolve()
    if not script_path.is_file():
        return Extracted(None, [finding("extract", ERROR, (), f"recipe script {script} does not exist",
                                        "pass the path of a bash script that launches verl")], "", [])
    cwd = Path(cwd or os.getcwd()).resolve()
    with tempfile.TemporaryDirectory(prefix="va-check-") as tmp:
        tmp = Path(tmp)
        bins, capture, scratch = tmp / "bin", tmp / "capture", tmp / "scratch"
        for d in (bins, capture, scratch):
            d.mkdir()
        text = script_path.read_text(errors="replace")
        _write_bins(bins, bool(cann_env_missing(text)))
        env = dict(os.environ)
        env.update(env_overrides or {})
        # after the recorders, this interpreter's scripts: a recipe asking `verl-ascend bridge` (recipes/
        # megatron_bridge.sh) gets the answer for the verl being checked, also when that venv is not activated
        scripts = sysconfig.get_path("scripts")
        env.update(PATH=f"{bins}{os.pathsep}{scripts}{os.pathsep}{env.get('PATH', '')}", VA_CHECK_CAPTURE=str(capture),
                   BASH_ENV=str(bins / "prelude.sh"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        masks = interpreter_masks(text, bins)
        argv = sandbox.command(script_path, cwd, [script_path.parent], capture, [bins], scratch, masks)
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        timed_out = False
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            sandbox.kill_tree(proc)
            _, stderr = proc.communicate()
            timed_out = True
        findings, launches, skipped = [], [], []
        if not (capture / sandbox.STARTED).exists():
            raise sandbox.Unavailable(f"cannot sandbox the recipe on this host ({_last_line(stderr)}); check never "
                                      f"runs a recipe unprotected. Fix: {sandbox.FIX}")
        for rec in sorted(capture.glob("*.argv"), key=lambda p: _order(p.name)):
            args = _argv(rec)
            if rec.name.endswith("-skip.argv"):
                skipped.append(shlex.join(args))
                continue
            base = rec.with_suffix("")
            launch = _parse(args, base.with_suffix(".cwd").read_text().strip(), _read_env(base.with_suffix(".env")))
            if launch is not None:
                launches.append(launch)
        no_overlay = (capture / "no-overlay").read_text().splitlines() if (capture / "no-overlay").exists() else []
    if no_overlay:
        shown = [f"{line.rsplit(' ', 1)[0]} ({'empty' if line.endswith('tmpfs') else 'read-only'})"
                 for line in no_overlay]
        findings.append(finding("extract", INFO, (), "the kernel refused a throw-away writable layer (overlayfs in a "
                                f"user namespace needs Linux >= 5.11) over {', '.join(shown)} while the script ran: "
                                "reads or writes there failed; running check as root avoids this"))
    if timed_out:
        findings.append(finding("extract", ERROR if not launches else WARNING, (),
                                f"{script} did not finish within {timeout:.0f} s in the check sandbox (python/ray "
                                "calls are recorded, not run); every process it started was ended",
                                "remove waits or loops that need a live cluster from the launch script"))
    if not launches:
        if not timed_out:
            tail = [line for line in stderr.strip().splitlines() if line.strip()][-5:]
            findings.append(finding(
                "extract", ERROR, (),
                f"{script} made no `python -m ...main_ppo/main_dapo` call under bash (exit {proc.returncode})"
                + (": " + " | ".join(tail) if tail else ""), _no_launch_fix(stderr)))
        return Extracted(None, findings, stderr, skipped)
    return Extracted(launches[-1], findings, stderr, skipped)


def _order(name: str) -> tuple:
    stamp, pid = name.split("-")[:2]
    return int(stamp), int(pid)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def _no_launch_fix(stderr: str) -> str:
    if "syntax error" in stderr:
        return "the script has a bash syntax error (line above); run `bash -n RECIPE.sh` to see it and fix it"
    if "No such file or directory" in stderr and ("source" in stderr or ". " in stderr or "line" in stderr):
        return ("a file the script reads is missing here: run check from the directory you launch the recipe from, "
                "or set the variable that points at it")
    return ("call the trainer as `python3 -m verl.trainer.main_ppo ...` (python/python3 by name, not by absolute "
            "path), and make sure the script does not exit before it")

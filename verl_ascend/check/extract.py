"""Find the trainer launch in a recipe script without running the trainer.

The script runs under bash, as the user would run it, so its own variables, ``${VAR:-default}``
env defaults, arithmetic, arrays and sourced files resolve exactly as on the cluster. Before it
runs, ``python``/``python3`` (and ``ray``, for ``ray job submit -- python3 ...``) are put first on
PATH as small recorders: each call writes its argv, working directory and environment to a capture
directory and exits 0, so no Python program of the script is executed. The script runs in an empty
temporary working directory, with stdin closed and a timeout.
"""

import dataclasses
import os
import subprocess
import tempfile
from pathlib import Path

from .findings import ERROR, Finding

# Recorder for python/python3/torchrun: argv NUL-separated, then cwd and environment.
_RECORDER = r"""#!/usr/bin/env bash
n=$(ls "$VA_CHECK_CAPTURE" | wc -l)
out="$VA_CHECK_CAPTURE/call-$(printf %04d "$n")"
{ printf '%s\0' "$(basename "$0")" "$@"; } > "$out.argv"
pwd > "$out.cwd"
env -0 > "$out.env"
exit 0
"""
# `ray job submit ... -- python3 -m ...`: record what follows `--`; other ray calls do nothing.
_RAY = r"""#!/usr/bin/env bash
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
[ $# -gt 0 ] && shift && [ $# -gt 0 ] && exec "$@"
exit 0
"""
_RECORDED = ("python", "python3", "torchrun") + tuple(f"python3.{m}" for m in range(8, 15))

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


def _write_bins(folder: Path) -> None:
    for name in _RECORDED:
        (folder / name).write_text(_RECORDER)
        (folder / name).chmod(0o755)
    (folder / "ray").write_text(_RAY)
    (folder / "ray").chmod(0o755)


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


def extract(script: str, env_overrides=None, timeout: float = 60.0):
    """Run ``script`` under bash with recorders; return (Launch or None, [Finding], bash stderr)."""
    script_path = Path(script).resolve()
    if not script_path.is_file():
        return None, [Finding("extract", ERROR, (), f"recipe script {script} does not exist",
                              "pass the path of a bash script that launches verl")], ""
    with tempfile.TemporaryDirectory(prefix="va-check-") as tmp:
        tmp = Path(tmp)
        bins, capture, cwd = tmp / "bin", tmp / "capture", tmp / "cwd"
        for d in (bins, capture, cwd):
            d.mkdir()
        _write_bins(bins)
        env = dict(os.environ)
        env.update(env_overrides or {})
        env["PATH"] = f"{bins}{os.pathsep}{env.get('PATH', '')}"
        env["VA_CHECK_CAPTURE"] = str(capture)
        try:
            proc = subprocess.run(["bash", str(script_path)], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout)
            stderr = proc.stderr
        except subprocess.TimeoutExpired:
            return None, [Finding("extract", ERROR, (), f"{script} did not finish within {timeout:.0f} s under "
                                  "bash (python/ray calls are recorded, not run)",
                                  "remove waits or loops that need a live cluster from the launch script")], ""
        calls = sorted(p.with_suffix("") for p in capture.glob("*.argv"))
        launches = []
        for call in calls:
            argv = [a.decode(errors="replace") for a in call.with_suffix(".argv").read_bytes().split(b"\0")[:-1]]
            launch = _parse(argv, call.with_suffix(".cwd").read_text().strip(), _read_env(call.with_suffix(".env")))
            if launch is not None:
                launches.append(launch)
    if not launches:
        tail = stderr.strip().splitlines()[-5:]
        return None, [Finding(
            "extract", ERROR, (),
            f"{script} made no `python -m ...main_ppo/main_dapo` call under bash (exit {proc.returncode})"
            + (": " + " | ".join(tail) if tail else ""),
            "call the trainer as `python3 -m verl.trainer.main_ppo ...` (python/python3 by name, not by "
            "absolute path), and make sure the script does not exit before it")], stderr
    return launches[-1], [], stderr

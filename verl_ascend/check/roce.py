"""The `roce` rule: ``HCCL_INTRA_ROCE_ENABLE`` judged per CANN version and checkpoint engine.

verl's checkpoint-engine README (``verl/checkpoint_engine/README.md``, note added by verl PR 5546, in verl
0.7.1 and later) says that on Ascend with CANN 8.5.0 or newer the ``kimi_ckpt_engine`` backend needs
``HCCL_INTRA_ROCE_ENABLE=1``: that engine moves weights with Mooncake's transfer engine, whose Ascend
transport is built on CANN's ADXL (LLM-DataDist) library, the one consumer CANN documents the variable for on
A3. The other backends (``naive``, verl's HCCL engine registered as ``nccl`` on NPU, ``nixl``, ``mooncake``)
carry no such note, and verl's training collectives do not read it on A3.

The CANN version a job runs on is not visible from a laptop: it is taken from ``check --cann``, else from the
toolkit the script's environment points at (a version in the ``ASCEND_TOOLKIT_HOME`` / ``ASCEND_HOME_PATH``
path, or that toolkit's ``ascend_toolkit_install.info`` when it exists on the checking machine). Unknown, the
warning says it applies from CANN 8.5.0 on.
"""

import glob
import os
import re

from verl_ascend.core.findings import INFO, WARNING, finding
from verl_ascend.recipe.layout import ARR, RUNTIME_ENV_VARS, get

VAR = "HCCL_INTRA_ROCE_ENABLE"
BACKEND = f"{ARR}.rollout.checkpoint_engine.backend"
RUNTIME_ENV = f"{RUNTIME_ENV_VARS}.{VAR}"
KIMI = "kimi_ckpt_engine"
SINCE = (8, 5)
README = "https://github.com/verl-project/verl/blob/main/verl/checkpoint_engine/README.md"
SOURCES = (README, "https://github.com/verl-project/verl/pull/5546")
_TOOLKIT_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")
# 8.5.0, 8.0.RC3, 9.1.0.alpha001: major.minor then a release part
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+|[Rr][Cc]\d+)\w*$")
_IN_PATH = re.compile(r"(?:^|/|cann-)(\d+\.\d+\.(?:\d+|[Rr][Cc]\d+)[\w.]*?)(?=/|$)")


def parse(version: str):
    """(major, minor) of a CANN version such as 8.5.0 or 8.0.RC3, or None when it is not one."""
    m = _VERSION.match(str(version or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def toolkit_version(launch_env: dict, read=None) -> tuple:
    """(version, where it was read) of the toolkit the script's environment points at, or ("", "")."""
    for var in _TOOLKIT_VARS:
        home = str(launch_env.get(var) or "")
        if not home:
            continue
        m = _IN_PATH.search(home.rstrip("/"))
        if m and parse(m.group(1)):
            return m.group(1), f"{var}={home}"
        for info in sorted(glob.glob(os.path.join(home, "*-linux", "ascend_toolkit_install.info"))):
            try:
                lines = (read or _read)(info).splitlines()
            except OSError:
                continue
            for line in lines:
                key, _, value = line.partition("=")
                if key.strip() == "version" and parse(value.strip()):
                    return value.strip(), info
    return "", ""


def _read(path) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def findings(ctx) -> list:
    backend = str(get(ctx.cfg, BACKEND, "naive") or "naive")
    launched = ctx.exported(VAR)
    value = next((str(v) for v in launched.values()), None)
    version, where = (ctx.cann, "check --cann") if ctx.cann else toolkit_version(ctx.launch_env)
    known = parse(version)
    if backend == KIMI:
        if value == "1" or (known and known < SINCE):
            return []
        state = f"{VAR}={value}" if value is not None else f"{VAR} is not set"
        if known:
            when = f"the job's CANN is {version} ({where}), and"
        else:
            when = "if the cluster runs CANN 8.5.0 or newer (the version is not known here; pass check --cann VERSION),"
        return [finding("roce", WARNING, (BACKEND, VAR),
                        f"{state} with {BACKEND}={KIMI}: {when} verl's checkpoint-engine README requires {VAR}=1 for "
                        "this engine on Ascend from CANN 8.5.0 on (intra-node RoCE for Mooncake's transfer engine)",
                        f"export {VAR}=1 in the launch script on every node (or in {RUNTIME_ENV_VARS}); "
                        "before CANN 8.5.0 it is not needed", sources=SOURCES)]
    if value is not None and ctx.profile.superpod:
        return [finding("roce", INFO, tuple(launched),
                        f"{VAR}={value} with {BACKEND}={backend}: on A3 it does nothing for this run; CANN reads it there "
                        f"only for LLM-DataDist (ADXL) transfers, which verl uses only through {BACKEND}={KIMI}",
                        sources=SOURCES)]
    return []

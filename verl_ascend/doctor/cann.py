"""doctor's cann group: the CANN toolkit environment (set_env.sh sourced, one toolkit, on
LD_LIBRARY_PATH) and NNAL/ATB. Check ids and groups: :mod:`.checks`."""

import os

from verl_ascend.core import platform

from .findings import error, ok, skip, warn

CANN_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")


def _toolkit(env, exists):
    """(CANN home or None, problem finding or None): the toolkit the CANN variables point at."""
    homes = {var: env.get(var, "") for var in CANN_VARS}
    if not any(homes.values()):
        return None, None
    missing = [f"{var}={path}" for var, path in homes.items() if path and not exists(path)]
    if missing:
        return None, error(check_cann, f"CANN path does not exist: {', '.join(missing)}",
                           "re-source the set_env.sh of an installed toolkit; " + platform.CANN_FIX)
    return next(p for p in homes.values() if p), None


def check_cann(env, ascend_host, exists=os.path.isdir) -> list:
    home, problem = _toolkit(env, exists)
    if problem:
        return [problem]
    if home is None:
        if ascend_host:
            return [error(check_cann, f"CANN environment not sourced: {' and '.join(CANN_VARS)} are unset", platform.CANN_FIX)]
        return [skip(check_cann, "CANN environment not sourced (not an Ascend node): toolkit not checked")]
    found = []
    paths = {os.path.realpath(env[v]) for v in CANN_VARS if env.get(v)}
    if len(paths) > 1:
        found.append(warn(check_cann, f"ASCEND_TOOLKIT_HOME and ASCEND_HOME_PATH point at different toolkits: "
                          f"{', '.join(sorted(paths))} (leftovers of an older CANN, as in docs/field-reports.md)",
                          "uninstall the old toolkit or source only one set_env.sh in a fresh shell"))
    libs = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    if not any(os.path.realpath(p).startswith(os.path.realpath(home)) for p in libs):
        found.append(warn(check_cann, f"LD_LIBRARY_PATH has no directory of the toolkit at {home} "
                          "(overwritten after set_env.sh?)", "source set_env.sh last, and append to LD_LIBRARY_PATH instead of replacing it"))
    return found or [ok(check_cann, f"CANN toolkit at {home}, on LD_LIBRARY_PATH")]


def check_nnal(env, ascend_host, exists=os.path.isdir) -> list:
    """Judged only once a toolkit is sourced and exists (cann.env says so otherwise)."""
    home, problem = _toolkit(env, exists)
    if home is None or problem or not ascend_host or env.get("ATB_HOME_PATH"):
        return []
    return [warn(check_nnal, "ATB_HOME_PATH unset: the NNAL/ATB environment is not sourced (vllm-ascend needs it)",
                 "source /usr/local/Ascend/nnal/atb/set_env.sh")]

"""The software stack under a job: Python, torch / torch_npu, the CANN environment (groups python, torch,
cann) and the plugin's own patch status (group patches). Check ids and groups: :mod:`.checks`."""

import importlib.util
import os
import sys

from verl_ascend.core import platform

from .findings import error, ok, skip, warn

CANN_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")


def release(version: str):
    """(major, minor, micro) of a version string such as 2.7.1.post1, 2.5.1rc1, 2.13.0+cpu."""
    from packaging.version import InvalidVersion, Version

    try:
        return (Version(version).release + (0, 0, 0))[:3]
    except InvalidVersion:
        return None


def check_python(version_info=sys.version_info) -> list:
    shown = ".".join(map(str, version_info[:3]))
    if tuple(version_info[:2]) < (3, 10):
        return [error(check_python, f"Python {shown}: verl and verl-ascend need 3.10 or newer",
                      "use the Python 3.10/3.11 of the Ascend image (the one torch_npu was built for)")]
    if tuple(version_info[:2]) > (3, 11):
        return [warn(check_python, f"Python {shown}: check that torch_npu, vllm-ascend and MindSpeed publish builds for it",
                     "Ascend images ship Python 3.10/3.11; use that interpreter if a wheel is missing")]
    return [ok(check_python, f"Python {shown} ({sys.executable})")]


def torch_npu_facts():
    """(installed version or '', import error or '') of torch_npu; imports it only when it is present."""
    if importlib.util.find_spec("torch_npu") is None:
        return "", ""
    # A fresh interpreter first: if `import torch` fails (torch_npu's autoload without CANN), this
    # process must not import it, or every later import of torch fails with an unrelated error.
    problem = platform.torch_import_problem() or platform.torch_npu_error()
    version = platform.installed_version("torch_npu")
    if not version and "torch_npu" in sys.modules:
        version = getattr(sys.modules["torch_npu"], "__version__", "")
    return version or "?", problem


def check_torch(torch_version) -> list:
    if not torch_version:
        return [error(check_torch, "torch is not installed", "install the torch version your torch_npu was built for")]
    return [ok(check_torch, f"torch {torch_version}")]


def check_torch_npu(torch_version, npu_facts, ascend_host) -> list:
    """npu_facts: torch_npu_facts()'s (version, import problem). Not judged without torch (its own error)."""
    npu_version, npu_problem = npu_facts
    if not torch_version:
        return []
    if not npu_version:
        if ascend_host:
            return [error(check_torch_npu, "this is an Ascend node but torch_npu is not installed",
                          f"pip install torch-npu=={'.'.join(map(str, release(torch_version) or ()))}* (same release as torch)")]
        return [skip(check_torch_npu, "torch_npu not installed (not an Ascend node): NPU runtime not checked")]
    if npu_problem:
        return [error(check_torch_npu, f"torch_npu {npu_version} does not import: {npu_problem}", platform.CANN_FIX)]
    t, n = release(torch_version), release(npu_version)
    if t is None or n is None or t != n:
        return [error(check_torch_npu, f"torch_npu {npu_version} does not match torch {torch_version} "
                      "(torch_npu is built for one torch release)",
                      f"install the torch_npu release for torch {torch_version}, or the torch release torch_npu {npu_version} needs")]
    return [ok(check_torch_npu, f"torch_npu {npu_version} matches torch {torch_version} and imports")]


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


def check_patches(report) -> list:
    """Judge verl_ascend.core.status.collect()'s report."""
    check = check_patches
    if not report["plugin"]["active"]:
        return [warn(check, "verl-ascend is switched off (VERL_ASCEND=0): no NPU fixes are applied",
                     "unset VERL_ASCEND (or set it to 1)")]
    if report.get("torch_import_error"):
        return [error(check, "not checked: import torch fails (see the torch_npu finding)", platform.CANN_FIX)]
    if report["verl_import_error"]:
        return [error(check, f"import verl failed: {report['verl_import_error']}",
                      "run `verl-ascend status` for details; fix the environment until `python -c 'import verl'` works")]
    found = []
    by_state = {}
    for patch in report["patches"]:
        by_state.setdefault(patch["state"], []).append(patch)
    for patch in by_state.get("failed", []):
        detail = "; ".join(f"{r['target']}: {r['detail']}" for r in patch["targets"] if r["state"] == "failed")
        found.append(error(check, f"patch {patch['name']} failed ({detail})",
                           "report it with `verl-ascend status --json`; disable it with VERL_ASCEND_PATCHES=-" + patch["name"]))
    if by_state.get("disabled"):
        names = ", ".join(p["name"] for p in by_state["disabled"])
        found.append(warn(check, f"disabled by VERL_ASCEND_PATCHES: {names}", "remove them from VERL_ASCEND_PATCHES unless intended"))
    for target, problem in report.get("target_import_errors", {}).items():
        found.append(warn(check, f"could not import patch target {target}: {problem}",
                          "the patch waits for that module; fix its import if your job uses it"))
    if not found:
        summary = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_state.items()))
        found.append(ok(check, f"{len(report['patches'])} patches: {summary}"))
    return found

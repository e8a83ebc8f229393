"""Python, torch / torch_npu, the CANN environment, library versions and the plugin's patch status."""

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
        return [error("python", f"Python {shown}: verl and verl-ascend need 3.10 or newer",
                      "use the Python 3.10/3.11 of the Ascend image (the one torch_npu was built for)")]
    if tuple(version_info[:2]) > (3, 11):
        return [warn("python", f"Python {shown}: check that torch_npu, vllm-ascend and MindSpeed publish builds for it",
                     "Ascend images ship Python 3.10/3.11; use that interpreter if a wheel is missing")]
    return [ok("python", f"Python {shown} ({sys.executable})")]


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


def check_torch(torch_version, npu_version, npu_problem, ascend_host) -> list:
    if not torch_version:
        return [error("torch", "torch is not installed", "install the torch version your torch_npu was built for")]
    found = [ok("torch", f"torch {torch_version}")]
    check = "torch_npu"
    if not npu_version:
        if ascend_host:
            found.append(error(check, "this is an Ascend node but torch_npu is not installed",
                               f"pip install torch-npu=={'.'.join(map(str, release(torch_version) or ()))}* (same release as torch)"))
        else:
            found.append(skip(check, "torch_npu not installed (not an Ascend node): NPU runtime not checked"))
        return found
    if npu_problem:
        found.append(error(check, f"torch_npu {npu_version} does not import: {npu_problem}", platform.CANN_FIX))
        return found
    t, n = release(torch_version), release(npu_version)
    if t is None or n is None or t != n:
        found.append(error(check, f"torch_npu {npu_version} does not match torch {torch_version} "
                           "(torch_npu is built for one torch release)",
                           f"install the torch_npu release for torch {torch_version}, or the torch release torch_npu {npu_version} needs"))
    else:
        found.append(ok(check, f"torch_npu {npu_version} matches torch {torch_version} and imports"))
    return found


def check_cann(env, ascend_host, exists=os.path.isdir) -> list:
    check = "cann.env"
    homes = {var: env.get(var, "") for var in CANN_VARS}
    if not any(homes.values()):
        if ascend_host:
            return [error(check, f"CANN environment not sourced: {' and '.join(CANN_VARS)} are unset", platform.CANN_FIX)]
        return [skip(check, "CANN environment not sourced (not an Ascend node): toolkit not checked")]
    found = []
    missing = [f"{var}={path}" for var, path in homes.items() if path and not exists(path)]
    if missing:
        return [error(check, f"CANN path does not exist: {', '.join(missing)}",
                      "re-source the set_env.sh of an installed toolkit; " + platform.CANN_FIX)]
    paths = {os.path.realpath(p) for p in homes.values() if p}
    if len(paths) > 1:
        found.append(warn(check, f"ASCEND_TOOLKIT_HOME and ASCEND_HOME_PATH point at different toolkits: "
                          f"{', '.join(sorted(paths))} (leftovers of an older CANN, as in docs/field-reports.md)",
                          "uninstall the old toolkit or source only one set_env.sh in a fresh shell"))
    home = next(p for p in homes.values() if p)
    libs = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    if not any(os.path.realpath(p).startswith(os.path.realpath(home)) for p in libs):
        found.append(warn(check, f"LD_LIBRARY_PATH has no directory of the toolkit at {home} "
                          "(overwritten after set_env.sh?)", "source set_env.sh last, and append to LD_LIBRARY_PATH instead of replacing it"))
    if ascend_host and not env.get("ATB_HOME_PATH"):
        found.append(warn("cann.nnal", "ATB_HOME_PATH unset: the NNAL/ATB environment is not sourced (vllm-ascend needs it)",
                          "source /usr/local/Ascend/nnal/atb/set_env.sh"))
    if not any(f.subject == check for f in found):
        found.insert(0, ok(check, f"CANN toolkit at {home}, on LD_LIBRARY_PATH"))
    return found


def check_versions(versions, ascend_host, verl_verdict=None) -> list:
    """versions: dist name -> version or '' (verl, tensordict, vllm, vllm-ascend, mindspeed, megatron-core);
    verl_verdict: verl_ascend.core.support's verdict on the installed verl (what `import verl` warns
    and `status` shows), None when verl did not import (the patches group reports why)."""
    from verl_ascend.core.support import SUPPORTED

    found = []
    verl = versions.get("verl", "")
    if not verl:
        found.append(error("versions.verl", "verl is not installed in this environment",
                           f"install verl ({SUPPORTED}) into the Python that runs the trainer"))
    elif verl_verdict and not verl_verdict["supported"]:
        found.append(warn("versions.verl", f"verl {verl} is outside the range verl-ascend supports ({SUPPORTED}): "
                          f"{verl_verdict['reason']}", f"install a verl in {SUPPORTED}; `verl-ascend status` "
                          "shows which patches find their targets in this one"))
    elif verl_verdict:
        found.append(ok("versions.verl", f"verl {verl} (supported: {SUPPORTED})"))
    else:
        found.append(ok("versions.verl", f"verl {verl}"))
    td = versions.get("tensordict", "")
    if not td:
        found.append(error("versions.tensordict", "tensordict is not installed (verl needs it)", "pip install 'tensordict>=0.10'"))
    elif (release(td) or (0, 0, 0)) < (0, 10, 0) and ascend_host:
        found.append(warn("versions.tensordict", f"tensordict {td}: its .to('cpu') does not synchronize NPU copies; "
                          "a 128-NPU run saw the reward drop after step 50 (docs/field-reports.md)", "pip install tensordict==0.10.0"))
    else:
        found.append(ok("versions.tensordict", f"tensordict {td}"))
    vllm, va = versions.get("vllm", ""), versions.get("vllm-ascend", "")
    if not va:
        found.append(warn("versions.vllm_ascend", "vllm-ascend not installed: rollout.name=vllm cannot use NPUs",
                          "install the vllm-ascend release matching your vllm") if ascend_host else
                     skip("versions.vllm_ascend", "vllm-ascend not installed (not an Ascend node)"))
    elif not vllm:
        found.append(error("versions.vllm_ascend", f"vllm-ascend {va} is installed but vllm is not",
                           f"install vllm {'.'.join(map(str, release(va) or ()))}"))
    elif release(vllm) != release(va):
        found.append(warn("versions.vllm_ascend", f"vllm-ascend {va} is released for vllm {'.'.join(map(str, release(va) or ()))}, "
                          f"found vllm {vllm}", "install the vllm release that vllm-ascend names, or the matching vllm-ascend"))
    else:
        found.append(ok("versions.vllm_ascend", f"vllm-ascend {va} with vllm {vllm}"))
    ms, mcore = versions.get("mindspeed", ""), versions.get("megatron-core", "")
    if ms:
        found.append(ok("versions.mindspeed", f"MindSpeed {ms}" + (f", megatron-core {mcore}" if mcore else "")))
    elif ascend_host and mcore:
        found.append(warn("versions.mindspeed", f"megatron-core {mcore} without MindSpeed: the megatron strategy "
                          "cannot run on NPU", "install MindSpeed (the branch matching your megatron-core)"))
    else:
        found.append(skip("versions.mindspeed", "MindSpeed not installed" + ("" if ascend_host else " (not an Ascend node)")))
    return found


def installed_versions() -> dict:
    names = ("verl", "tensordict", "vllm", "vllm-ascend", "mindspeed", "megatron-core")
    return {name: platform.installed_version(name) for name in names}


def check_patches(report) -> list:
    """Judge verl_ascend.core.status.collect()'s report."""
    check = "plugin.patches"
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

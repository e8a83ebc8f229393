"""doctor's patches group: the plugin's own patch status, judged from ``verl-ascend status``'s report.
Check ids and groups: :mod:`.checks`."""

from verl_ascend.core import platform

from .findings import error, ok, warn


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

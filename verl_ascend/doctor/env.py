"""Process settings a multi-node job depends on (group env): visible devices, Ray's device variable and
the open-file limit (the 128-NPU run in docs/field-reports.md#235b-cluster-start-up sets all of them), and the
ptrace rights `supervise` needs to read the run's stacks with py-spy (docs/supervise.md, evidence).
HCCL's own variables are :mod:`.hccl`'s. Check ids and groups: :mod:`.checks`."""

import resource

from verl_ascend.proc.info import PTRACE_GRANT

from .findings import error, ok, warn


def check_visible_devices(env, npu_count=None) -> list:
    """ASCEND_RT_VISIBLE_DEVICES, when set; ``npu_count``: the rank devices npu-smi lists (None: unknown)."""
    check = check_visible_devices
    found = []
    if "ASCEND_RT_VISIBLE_DEVICES" in env:
        value = env["ASCEND_RT_VISIBLE_DEVICES"]
        ids = [v.strip() for v in value.split(",") if v.strip()]
        if not ids:
            found.append(error(check, "ASCEND_RT_VISIBLE_DEVICES is set but empty: this process sees no NPU",
                               "unset ASCEND_RT_VISIBLE_DEVICES (Ray sets it per worker)"))
        elif not all(i.isdigit() for i in ids) or (npu_count and any(int(i) >= npu_count for i in ids)):
            found.append(error(check, f"ASCEND_RT_VISIBLE_DEVICES={value!r} names devices this node does not have"
                               + (f" (it has {npu_count})" if npu_count else ""),
                               "list existing device ids, e.g. 0,1,2,3, or unset it"))
        else:
            found.append(ok(check, f"ASCEND_RT_VISIBLE_DEVICES={value}"))
    return found


def check_ray_noset(env) -> list:
    found = []
    noset = env.get("RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES", "")
    rcheck = check_ray_noset
    if noset.strip().lower() in ("1", "true", "yes"):
        found.append(ok(rcheck, f"RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES={noset}"))
    else:
        shown = f"={noset!r}" if noset else " is unset"
        found.append(warn(rcheck, f"RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES{shown}: Ray may give actors "
                          "that hold no NPU an empty ASCEND_RT_VISIBLE_DEVICES, hiding every card from them",
                          "export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1 before `ray start` on every node (verl's Ascend docs)"))
    return found


def check_nofile(limits=None) -> list:
    soft, hard = limits or resource.getrlimit(resource.RLIMIT_NOFILE)
    shown = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    check = check_nofile
    if soft != resource.RLIM_INFINITY and soft < 4096:
        return [error(check, f"ulimit -n is {shown}: Ray workers, HCCL sockets and checkpoint shards run out of file handles",
                      "run `ulimit -n 32768` before `ray start` (raise the hard limit in /etc/security/limits.conf if needed)")]
    if soft != resource.RLIM_INFINITY and soft < 32768:
        return [warn(check, f"ulimit -n is {shown}; the 128-NPU run in docs/field-reports.md uses 32768",
                     "run `ulimit -n 32768` before `ray start`")]
    return [ok(check, f"ulimit -n is {shown}")]


CAP_SYS_PTRACE = 19  # linux/capability.h


def check_ptrace(facts) -> list:
    """Whether py-spy can read the stacks of a run's processes from a supervisor that is not their parent.
    ``facts``: {pyspy: path or None, scope: kernel.yama.ptrace_scope or None (no Yama), cap: CAP_SYS_PTRACE in the
    effective set, root: euid 0}. Yama (Documentation/admin-guide/LSM/Yama.rst): 0 any process of the same user,
    1 descendants only (unless CAP_SYS_PTRACE), 2 CAP_SYS_PTRACE only, 3 nobody."""
    check = check_ptrace
    if not facts.get("pyspy"):
        return [warn(check, "py-spy is not installed: `verl-ascend supervise` saves no stacks of a hung run",
                     "pip install 'verl-ascend[supervise]'")]
    scope, cap = facts.get("scope"), facts.get("cap")
    where = f"kernel.yama.ptrace_scope={scope if scope is not None else 'absent (no Yama)'}, CAP_SYS_PTRACE " + \
            ("held" if cap else "not held")
    if scope == 3:
        return [warn(check, f"{where}: no process may be traced on this node, so py-spy reads no stacks",
                     "kernel.yama.ptrace_scope=3 stays until a reboot; set it to 0 or 1 at boot (sysctl.d)")]
    if cap or (scope in (None, 0) and not facts.get("root")):  # root without it: a container that dropped it
        return [ok(check, f"{where}: py-spy ({facts['pyspy']}) can read the stacks of the run's processes of this user")]
    return [warn(check, f"{where}: py-spy can read only its own children's stacks, not a run `supervise` watches",
                 PTRACE_GRANT)]

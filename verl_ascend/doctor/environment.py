"""Process settings a multi-node job depends on: HCCL timeouts, visible devices, Ray's device
variable, and the open-file limit (the 128-NPU run in docs/field-reports.md#235b-cluster-start-up sets all of them)."""

import resource

from .findings import error, ok, warn

HCCL_DEFAULT_CONNECT = 120  # seconds, as HCCL's own EI0006 error text says (docs/field-reports.md#32b-hccl-error-code-9-and-gloo)
RECOMMENDED_TIMEOUT = 3600  # what the 16-node run uses for both (docs/field-reports.md#235b-cluster-start-up)


def _int_var(env, var):
    value = env.get(var, "")
    if value == "":
        return None, None
    try:
        return int(value), None
    except ValueError:
        return None, error(f"hccl.{var[5:].lower()}", f"{var}={value!r} is not an integer (seconds)",
                           f"export {var}={RECOMMENDED_TIMEOUT}")


def check_timeouts(env, nnodes=None) -> list:
    found = []
    for var in ("HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT"):
        check = f"hccl.{var[5:].lower()}"
        value, problem = _int_var(env, var)
        if problem:
            found.append(problem)
        elif value is None:
            if nnodes == 1:
                found.append(ok(check, f"{var} unset (CANN default); fine on one node"))
            else:
                found.append(warn(check, f"{var} unset: the CANN default is short for a large multi-node job, "
                                  "where ranks reach the first collective minutes apart (weight loading)",
                                  f"export {var}={RECOMMENDED_TIMEOUT} on every node before `ray start` "
                                  "(as the 128-NPU run in docs/field-reports.md does)"))
        elif value <= 0:
            found.append(error(check, f"{var}={value} must be a positive number of seconds", f"export {var}={RECOMMENDED_TIMEOUT}"))
        elif var == "HCCL_CONNECT_TIMEOUT" and value < HCCL_DEFAULT_CONNECT:
            found.append(warn(check, f"{var}={value} is below HCCL's default {HCCL_DEFAULT_CONNECT} s",
                              f"export {var}={RECOMMENDED_TIMEOUT}"))
        else:
            found.append(ok(check, f"{var}={value}"))
    return found


def check_visible_devices(env, npu_count=None) -> list:
    check = "npu.visible_devices"
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
    noset = env.get("RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES", "")
    rcheck = "ray.noset_visible_devices"
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
    check = "limits.nofile"
    if soft != resource.RLIM_INFINITY and soft < 4096:
        return [error(check, f"ulimit -n is {shown}: Ray workers, HCCL sockets and checkpoint shards run out of file handles",
                      "run `ulimit -n 32768` before `ray start` (raise the hard limit in /etc/security/limits.conf if needed)")]
    if soft != resource.RLIM_INFINITY and soft < 32768:
        return [warn(check, f"ulimit -n is {shown}; the 128-NPU run in docs/field-reports.md uses 32768",
                     "run `ulimit -n 32768` before `ray start`")]
    return [ok(check, f"ulimit -n is {shown}")]

"""The decision table: a failure's family -> its retry class -> retry or stop, and the exit codes.

Classes (diagnose's, ``diagnose/families/retry.py``, and supervise's own): ``transient`` (an event: a node or
actor died, a collective timed out, a link dropped, a hang the first time) is retried; ``config`` (data and paths
included), ``resource``, ``environment`` (versions, CANN, devices) stop at once with the diagnosis and its fix (a
restart runs into the same wall); ``unknown`` stops (``--retry-unknown``: one retry); ``health`` (a flag named
by ``--stop-on``) stops. Over every class: the same failure twice with no checkpoint progress in between stops
(a crash loop; nvidia-resiliency-ext's progress tracker, ``max_no_progress_cycles``, does this after 3 cycles,
a verl step is too long to spend three), and the retry budget (``--max-restarts``) with exponential back-off.
"""

import dataclasses

from verl_ascend.diagnose import table

TRANSIENT, CONFIG, DATA, VERSION, RESOURCE, ENVIRONMENT, UNKNOWN, HEALTH = (
    "transient", "config", "data", "version", "resource", "environment", "unknown", "health")
STOP_CLASSES = (CONFIG, DATA, VERSION, RESOURCE, ENVIRONMENT)  # a restart runs into the same wall
RETRY, STOP, GIVE_UP = "retry", "stop", "give_up"

# Exit codes of `supervise`. 93 is nvidia-resiliency-ext's no-restart code (ft_launcher's progress tracker and
# attribution STOP): a scheduler set up for it already reads it as "do not requeue". Slurm requeues only the exit
# codes its RequeueExit lists, Volcano on a policy's exitCode: list 1, never 93.
EXIT_DONE, EXIT_GAVE_UP, EXIT_BAD_INPUT, EXIT_NO_REQUEUE = 0, 1, 2, 93
EXIT_CODES = {
    EXIT_DONE: "the run reached its last step",
    EXIT_GAVE_UP: "not finished, and requeueing may help: the retry budget is spent on transient failures, the "
                  "deadline came, the nodes did not come back, or --dry-run saw a failure",
    EXIT_BAD_INPUT: "bad input: nothing was started",
    EXIT_NO_REQUEUE: "stopped, do not requeue: a restart cannot help (a configuration, data, version or resource "
                     "failure, an unknown one, a crash loop, a --stop-on flag); the report names the fix",
}

# The classes of diagnose's families are diagnose's (``families/retry.py``: each family's ``retry_class`` and its
# reason); this table holds the families supervise adds itself, and answers for diagnose's own families only on a
# diagnose older than its retry classes (the same words, so both give one answer).
OWN = {"hang": TRANSIENT, "incomplete_exit": UNKNOWN,
       **dict.fromkeys(("nan", "rollout_probs_diff", "reward_collapse", "response_length_collapse", "entropy_blowup",
                        "memory_growth", "throughput_drop"), HEALTH)}
FALLBACK = {
    **dict.fromkeys(("ray_node_died", "ray_actor_died", "peer_exited", "hccl_exec_timeout", "collective_timeout",
                     "stream_sync_timeout", "hccl_connect_timeout", "roce_error_cqe", "hccl_call_failed", "hccp_busy",
                     "port_in_use", "hccl_port_taken", "rendezvous_unreachable"), TRANSIENT),
    **dict.fromkeys(("config_invalid", "data_path_missing", "model_path_invalid", "state_dict_mismatch",
                     "size_not_divisible", "weight_bucket_too_small", "visible_devices_rewritten", "wrong_nic",
                     "mla_graph_heads", "tensor_not_contiguous", "tensor_device_mismatch", "op_unsupported",
                     "inplace_grad", "rollout_long_tail", "ckpt_metadata_missing", "ckpt_not_seen_on_resume",
                     "ckpt_missing_tensor"), CONFIG),
    **dict.fromkeys(("thread_limit", "file_handles", "host_oom_killed", "ray_unschedulable", "npu_oom"), RESOURCE),
    **dict.fromkeys(("cann_not_sourced", "ray_no_npu", "tls_mismatch", "device_network", "hccl_version_mismatch",
                     "npu_not_visible", "vllm_invalid_version", "op_binary_missing", "acl_init_failed",
                     "ray_started_with_gpus", "mindspeed_too_old"), ENVIRONMENT),
}


def retry_class(family: str, details: dict = None) -> str:
    """The class of a family: supervise's own families from :data:`OWN`; diagnose's from the finding (``details``)
    or the family itself; :data:`FALLBACK` on a diagnose without classes; else unknown."""
    if family in OWN:
        return OWN[family]
    given = (details or {}).get("retry_class") or getattr(table.FAMILIES.get(family), "retry_class", None)
    return given or FALLBACK.get(family, UNKNOWN)


@dataclasses.dataclass
class Policy:
    max_restarts: int = 3
    retry_unknown: bool = False
    backoff_s: float = 30.0      # the first wait before a relaunch; doubled each restart
    backoff_max_s: float = 600.0


@dataclasses.dataclass
class Failure:
    family: str
    retry_class: str
    message: str = ""
    fix: str = ""


@dataclasses.dataclass
class Decision:
    action: str      # retry | stop | give_up
    reason: str
    exit_code: int = None  # for stop / give_up
    delay_s: float = 0.0   # for retry

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def backoff(restarts_done: int, policy: Policy) -> float:
    return min(policy.backoff_max_s, policy.backoff_s * (2 ** restarts_done))


def decide(failure: Failure, earlier=(), tracker_now=None, restarts_done: int = 0, policy: Policy = None) -> Decision:
    """What to do about ``failure``. ``earlier``: the failed attempts before this one, oldest first, each a dict
    with ``family``, ``retry_class`` and ``tracker`` (the checkpoint step when it failed); ``tracker_now``: the
    checkpoint step now."""
    policy = policy or Policy()
    cls = failure.retry_class
    fix = f"; fix: {failure.fix}" if failure.fix else ""
    if cls in STOP_CLASSES:
        return Decision(STOP, f"{failure.family} is a {cls} failure: a restart runs into it again{fix}", EXIT_NO_REQUEUE)
    if cls == HEALTH:
        return Decision(STOP, f"{failure.family}: --stop-on names it{fix}", EXIT_NO_REQUEUE)
    if earlier:
        last = earlier[-1]
        if last.get("family") == failure.family and last.get("tracker") == tracker_now:
            at = f"global_step_{tracker_now}" if tracker_now is not None else "no checkpoint"
            return Decision(STOP, f"crash loop: {failure.family} again with no checkpoint progress (still {at})",
                            EXIT_NO_REQUEUE)
    if cls == UNKNOWN:
        tried = sum(1 for e in earlier if e.get("retry_class") == UNKNOWN)
        if not policy.retry_unknown:
            return Decision(STOP, f"{failure.family}: no known cause, so no reason to expect a restart to pass "
                            "(--retry-unknown retries it once)", EXIT_NO_REQUEUE)
        if tried:
            return Decision(STOP, f"{failure.family}: an unknown failure again after the one retry --retry-unknown "
                            "allows", EXIT_NO_REQUEUE)
    if restarts_done >= policy.max_restarts:
        return Decision(GIVE_UP, f"{failure.family}: the retry budget is spent ({restarts_done} of --max-restarts "
                        f"{policy.max_restarts})", EXIT_GAVE_UP)
    delay = backoff(restarts_done, policy)
    why = "retried once (--retry-unknown)" if cls == UNKNOWN else f"a {cls} failure"
    return Decision(RETRY, f"{failure.family}: {why}; restart {restarts_done + 1} of {policy.max_restarts} "
                    f"after {delay:.0f} s", delay_s=delay)


def family_of(found, log: str) -> tuple:
    """(family, fix, diagnose's retry class or None) of a detector's finding ``found``: the detector's own family
    for a hang, an incomplete exit or a health flag; else diagnose's first failure in the attempt's console
    (``diagnose.classify``), or the detector's family when diagnose names none."""
    own = found.details.get("family")
    if found.code in ("hang", "incomplete_exit") or own in OWN:
        return own, found.fix, None
    from verl_ascend.diagnose import classify

    verdict = classify(log)
    findings = verdict.diagnosis.findings if verdict.diagnosis is not None else []
    fam = verdict.family or (findings[0].code if findings else own) or "unrecognised_failure"
    fix = next((f.fix for f in findings if f.code == fam), found.fix)
    return fam, fix, verdict.retry_class if verdict.family == fam else None

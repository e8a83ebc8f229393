"""supervise's decision table, row by row, and the adapter from diagnose's families to retry classes."""

import pytest

from verl_ascend.diagnose import table
from verl_ascend.supervise import decide as D

pytestmark = pytest.mark.verl_agnostic


def failure(family, **over):
    return D.Failure(family, D.retry_class(family, over.pop("details", None)), **over)


@pytest.mark.parametrize("family", ["ray_node_died", "ray_actor_died", "collective_timeout",
                                    "hccl_exec_timeout", "roce_error_cqe", "peer_exited", "hang"])
def test_transient_failures_are_retried_with_back_off(family):
    d = D.decide(failure(family), restarts_done=1, policy=D.Policy(backoff_s=30, backoff_max_s=600))
    assert (d.action, d.delay_s) == (D.RETRY, 60.0)
    assert family in d.reason and "restart 2 of 3" in d.reason


@pytest.mark.parametrize("family, cls", [("config_invalid", D.CONFIG), ("data_path_missing", D.CONFIG),
                                         ("size_not_divisible", D.CONFIG), ("npu_oom", D.RESOURCE),
                                         ("host_oom_killed", D.RESOURCE), ("hccl_version_mismatch", D.ENVIRONMENT),
                                         ("vllm_invalid_version", D.ENVIRONMENT)])
def test_config_data_version_resource_stop_at_once_with_the_fix(family, cls):
    f = failure(family, fix=table.FAMILIES[family].fix)
    assert f.retry_class == cls
    d = D.decide(f)
    assert (d.action, d.exit_code) == (D.STOP, D.EXIT_NO_REQUEUE)
    assert cls in d.reason and table.FAMILIES[family].fix[:40] in d.reason


def test_unknown_stops_unless_retry_unknown_and_then_only_once():
    f = failure("unrecognised_failure")
    assert f.retry_class == D.UNKNOWN
    assert D.decide(f).exit_code == D.EXIT_NO_REQUEUE
    policy = D.Policy(retry_unknown=True)
    assert D.decide(f, policy=policy).action == D.RETRY
    earlier = [{"family": "other", "retry_class": D.UNKNOWN, "tracker": 1}]
    assert D.decide(f, earlier, tracker_now=2, restarts_done=1, policy=policy).action == D.STOP


def test_the_same_failure_twice_without_checkpoint_progress_is_a_crash_loop():
    earlier = [{"family": "ray_actor_died", "retry_class": D.TRANSIENT, "tracker": 4}]
    d = D.decide(failure("ray_actor_died"), earlier, tracker_now=4, restarts_done=1)
    assert (d.action, d.exit_code) == (D.STOP, D.EXIT_NO_REQUEUE) and "crash loop" in d.reason
    assert "global_step_4" in d.reason
    # progress in between, or another failure: retried
    assert D.decide(failure("ray_actor_died"), earlier, tracker_now=5, restarts_done=1).action == D.RETRY
    assert D.decide(failure("ray_node_died"), earlier, tracker_now=4, restarts_done=1).action == D.RETRY
    # a hang again where the last one was: Ray Train's reasoning (a deterministic hang hangs again)
    hung = [{"family": "hang", "retry_class": D.TRANSIENT, "tracker": None}]
    assert D.decide(failure("hang"), hung, tracker_now=None, restarts_done=1).action == D.STOP


def test_the_retry_budget_gives_up_with_the_requeue_code_and_the_back_off_is_capped():
    d = D.decide(failure("ray_node_died"), restarts_done=3, policy=D.Policy(max_restarts=3))
    assert (d.action, d.exit_code) == (D.GIVE_UP, D.EXIT_GAVE_UP) and "3 of --max-restarts 3" in d.reason
    assert [D.backoff(n, D.Policy(backoff_s=30, backoff_max_s=600)) for n in range(7)] == \
        [30, 60, 120, 240, 480, 600, 600]


def test_health_flags_named_by_stop_on_stop():
    assert D.decide(failure("nan")).exit_code == D.EXIT_NO_REQUEUE


def test_every_family_of_diagnose_has_a_class_the_table_acts_on_and_diagnose_s_own_word_wins():
    known = set(D.STOP_CLASSES) | {D.TRANSIENT, D.UNKNOWN}
    assert {f: D.retry_class(f) for f in table.FAMILIES if D.retry_class(f) not in known} == {}
    # the fallback (a diagnose without classes) says what diagnose says, where diagnose says it
    said = {f: getattr(fam, "retry_class", None) for f, fam in table.FAMILIES.items()}
    assert {f: c for f, c in D.FALLBACK.items() if said.get(f) not in (None, c)} == {}
    assert D.retry_class("npu_oom", {"retry_class": D.TRANSIENT}) == D.TRANSIENT
    assert D.retry_class("no_such_family") == D.UNKNOWN
    assert D.retry_class("hang") == D.TRANSIENT  # supervise's own


def test_the_exit_codes_are_distinct_and_documented():
    assert len(set(D.EXIT_CODES)) == 4 and D.EXIT_NO_REQUEUE == 93


def test_the_family_is_read_from_the_console_on_every_attempt_not_only_the_first(tmp_path):
    """Found by hand (rehearse --supervise --fault crash-loop): the second attempt's classification raised
    "'module' object is not callable" (the submodule diagnose.classify had replaced the package's function)."""
    import verl_ascend.diagnose as diagnose
    from verl_ascend.core.findings import WARNING, Finding

    log = tmp_path / "console.log"
    log.write_text("(raylet) A worker died or was killed while executing a task by an unexpected system error. "
                   "To troubleshoot the problem, check the logs for the dead worker.\n")
    found = Finding(WARNING, "attempt", "died", "", code="crash_line", details={"family": "ray_actor_died"})
    assert D.family_of(found, str(log))[0] == D.family_of(found, str(log))[0] == "ray_actor_died"
    assert diagnose.classify(text=log.read_text()).family == diagnose.classify(text=log.read_text()).family
    assert callable(diagnose.classify)

"""`verl-ascend diagnose` on failure shapes documented in the public catalogues (tests/fixtures/diagnose/SOURCES.md),
and the generic fallback: a failed run is never "no failure".

The fixtures under tests/fixtures/diagnose/shapes/ are our own logs written in each documented shape (not public
logs: the public excerpts are under public/); the family each must be named as is in SOURCES.md, which this file
reads (so a fixture without a listed source fails here).
"""

import json
import re
from pathlib import Path

import pytest
from test_diagnose import cli_run, diagnose  # the same JSON form and in-process CLI

from verl_ascend.diagnose import table

pytestmark = pytest.mark.verl_agnostic
FIX = Path(__file__).parents[1] / "fixtures" / "diagnose"
SHAPES = FIX / "shapes"
ROW = re.compile(r"^\| `shapes/([\w.]+)` \| `(\w+)` \| (https://\S+) \|$")


def sources():
    rows = [ROW.match(line) for line in (FIX / "SOURCES.md").read_text().splitlines()]
    return {m.group(1): (m.group(2), m.group(3)) for m in rows if m}


SOURCES = sources()
FAILURES = sorted(SOURCES)
# what each fix must name: the parameter, variable or command to change (not just "check the logs")
FIX_WORDS = {
    "peer_exited": "HCCL_EXEC_TIMEOUT", "hccl_port_taken": "ip_local_reserved_ports", "roce_error_cqe": "hccn_tool",
    "hccl_version_mismatch": "set_env.sh", "tls_mismatch": "hccn_tool -i $i -tls", "npu_not_visible":
    "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES", "vllm_invalid_version": "VLLM_VERSION",
    "op_binary_missing": "kernels", "acl_init_failed": "npu-smi info", "mla_graph_heads": "enforce_eager",
    "tensor_not_contiguous": ".contiguous()", "tensor_device_mismatch": ".npu()", "op_unsupported": "op-plugin",
    "inplace_grad": "set_detect_anomaly", "host_oom_killed": "RAY_memory_usage_threshold",
    "ray_started_with_gpus": "--resources='{\"NPU\": 8}'", "visible_devices_rewritten":
    "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES", "weight_bucket_too_small": "update_weights_bucket_megabytes",
    "mindspeed_too_old": "2.3.0_core_r0.12.1", "ckpt_metadata_missing": "verl-ascend ckpt sync",
    "port_in_use": "MASTER_PORT", "cann_not_sourced": "set_env.sh", "hccp_busy": "npu-smi info",
    "unrecognised_failure": "ASCEND_LAUNCH_BLOCKING", "ray_actor_died": "dmesg -T",
}


def test_the_fresh_set_is_big_enough_and_every_file_is_listed():
    on_disk = {p.name for p in SHAPES.glob("*.log")}
    assert on_disk == set(SOURCES)
    assert len(SOURCES) >= 20


@pytest.mark.parametrize("name", FAILURES)
def test_public_shape_is_named_with_its_fix(name):
    family, url = SOURCES[name]
    assert (SHAPES / name).read_text().splitlines()[0] == f"# shape of: {url}"
    result = diagnose(SHAPES / name)
    assert result["exit_code"] == 1
    found = result["findings"][0]
    assert found["code"] == family, [f["code"] for f in result["findings"]]
    assert FIX_WORDS[family] in found["fix"], found["fix"]
    listed = table.FAMILIES[family].sources
    assert listed and all(s.startswith("https://") for s in listed)
    if family != table.UNRECOGNISED:
        assert url in listed, (url, listed)  # the page the fixture was written from is the one the finding cites


def test_every_family_has_a_fixture_somewhere():
    import test_diagnose  # the first table's cases
    import test_diagnose_timeline  # families shown on our own rehearsals' logs
    import test_diagnose_verbatim  # the verbatim excerpts' families

    covered = ({f for f, _ in SOURCES.values()} | {c[1] for c in test_diagnose.CASES} | {"hccl_call_failed"}
               | {f for f, _ in test_diagnose_verbatim.SOURCES.values()} | test_diagnose_timeline.FAMILIES_SHOWN)
    assert set(table.FAMILIES) - covered == set()


def test_the_peer_that_exited_is_named_not_the_reporter(capsys):
    result = diagnose(SHAPES / "peer_heartbeat.log")
    f = result["findings"][0]
    assert f["details"]["culprit"] == {"node": "10.7.0.3", "device": 6, "reports": 1}
    assert f["where"]["node"] == "10.7.0.2"  # the line came from the waiting rank's log...
    assert result["first_failure"]["culprit"]["node"] == "10.7.0.3"  # ...the run is blamed on the peer
    assert any("Heartbeat Lost Occurred" in n for n in f["details"]["notes"])
    code, out, err = cli_run(capsys, "diagnose", str(SHAPES / "peer_heartbeat.log"))
    assert code == 1 and "culprit: node 10.7.0.3, device 6" in out, out


def test_error_cqe_names_the_other_end():
    f = diagnose(SHAPES / "error_cqe.log")["findings"][0]
    assert f["details"]["values"]["peer"] == ["10.9.0.22/5"] and "EI0013" in f["details"]["code_names"]


# -- the generic fallback, one case per kind of failure line -------------------------------------------------------
RAY = "(WorkerDict pid=4242, ip=10.8.0.4) "
KINDS = [
    ("assertion_bare", [RAY + "Traceback (most recent call last):",
                        RAY + '  File "/opt/verl/verl/trainer/ppo/ray_trainer.py", line 977, in fit',
                        RAY + "    assert batch.batch is not None", RAY + "AssertionError"],
     "AssertionError", "/opt/verl/verl/trainer/ppo/ray_trainer.py:977 in fit"),
    ("assertion_msg", ["[rank3]: AssertionError: world size 6 is not divisible by tp 4"], "AssertionError", None),
    ("key_error", ['  File "/opt/app/data.py", line 12, in load', "    row = rows[key]", "KeyError: 'prompt'"],
     "KeyError", "/opt/app/data.py:12 in load"),
    ("file_not_found", [RAY + "FileNotFoundError: [Errno 2] No such file or directory: '/opt/app/reward_fn.py'"],
     "FileNotFoundError", None),
    ("value_error", ["ValueError: Unknown rollout name sgl"], "ValueError", None),
    ("runtime_error", ["[rank0]: RuntimeError: shape mismatch"], "RuntimeError", None),
    ("module_not_found", ["ModuleNotFoundError: No module named 'mindspeed'"], "ModuleNotFoundError", None),
    ("ray_task_error", ["ray.exceptions.RayTaskError(ZeroDivisionError): ray::TaskRunner.run() (pid=11, ip=10.0.0.1)"],
     "ray.exceptions.RayTaskError(ZeroDivisionError)", None),
    ("cann_error_line", ["[ERROR] RUNTIME(3030,python):2026-01-01-00:00:01.000.001 [device.cc:10] something failed"], None, None),
    ("error_code", ["EL0003: [PID: 77] 2026-01-01-00:00:01.000.001 The argument is invalid."], None, None),
    ("torch_npu_code", ["[ERROR] 2026-01-01-00:00:01 (PID:77, Device:0, RankID:0) ERR03005 GE invalid value"], None, None),
    ("exit_code", ["Job 'raysubmit_abc' failed", "Status message: Job entrypoint command failed with exit code 1"], None, None),
    ("killed", ["run_grpo.sh: line 40: 991 Killed                  python3 -m verl.trainer.main_ppo"], None, None),
    ("segfault", ["Fatal Python error: Segmentation fault"], None, None),
]


@pytest.mark.parametrize("name,lines,kind,raised_at", KINDS, ids=[k[0] for k in KINDS])
def test_generic_fallback_per_failure_kind(tmp_path, name, lines, kind, raised_at, capsys):
    log = tmp_path / f"{name}.log"
    log.write_text("2026-01-01 00:00:00,000 - verl - INFO - start\n" + "\n".join(lines) + "\n")
    code, out, err = cli_run(capsys, "diagnose", "--json", str(log)) if name == "assertion_bare" else (None, None, None)
    result = json.loads(out) if out else diagnose(log)
    if out:
        assert code == 1, err
    assert [f["code"] for f in result["findings"]] == [table.UNRECOGNISED]
    first = result["findings"][0]["where"]
    assert first["line"] >= 2  # after the INFO line: the failing line, not the header
    if kind:
        assert result["findings"][0]["details"]["values"]["exception"] == [kind]
    if raised_at:
        assert first["raised_at"] == raised_at
    if lines[0].startswith(RAY):
        assert (first["pid"], first["node"]) == (4242, "10.8.0.4")


def test_the_same_lines_at_warning_level_or_as_source_stay_quiet(tmp_path):
    log = tmp_path / "ok.log"
    log.write_text("WARNING 01-01 00:00:00 [x.py:1] ValueError: retrying\n"
                   "    except FileNotFoundError:\n"
                   "process exited with exit code 0\n")
    assert diagnose(log)["findings"] == []
    # a traceback's `raise` line with no exception line after it is a traceback cut short: a failure (#46)
    log.write_text("WARNING 01-01 00:00:00 [x.py:1] ValueError: retrying\n"
                   '  File "/opt/app/x.py", line 3, in load\n'
                   "    raise KeyError(name)\n")
    found = diagnose(log)["findings"]
    assert [f["code"] for f in found] == [table.UNRECOGNISED] and found[0]["where"]["line"] == 3


FRAME = '  File "/opt/verl/verl/trainer/ppo/ray_trainer.py", line 977, in fit'
ASSERT_CUT = {  # #46 Done-when: a lone `assert` line, and a traceback cut at its `assert` frame, are findings
    "lone_assert": ["    assert batch.batch is not None"],
    "frame_then_assert": [FRAME, "    assert batch.batch is not None"],
    "ray_traceback_cut_at_assert": [RAY + "Traceback (most recent call last):", RAY + FRAME,
                                    RAY + "    assert batch.batch is not None, 'empty batch'"],
}


@pytest.mark.parametrize("name", sorted(ASSERT_CUT))
def test_an_assert_line_with_nothing_after_it_is_a_failure(tmp_path, name):
    lines = ASSERT_CUT[name]
    log = tmp_path / f"{name}.log"
    log.write_text("2026-01-01 00:00:00,000 - verl - INFO - start\n" + "\n".join(lines) + "\n")
    result = diagnose(log)
    assert result["exit_code"] == 1 and [f["code"] for f in result["findings"]] == [table.UNRECOGNISED], result
    found = result["findings"][0]
    assert found["details"]["values"]["exception"] == ["traceback without its exception line"]
    assert found["where"]["text"].lstrip().startswith(("assert", "Traceback", "(WorkerDict")), found["where"]
    if FRAME in lines or RAY + FRAME in lines:
        assert found["where"]["raised_at"] == "/opt/verl/verl/trainer/ppo/ray_trainer.py:977 in fit", found["where"]
    # the same lines followed by the exception they raised: one finding, the AssertionError (not the cut traceback)
    log.write_text(log.read_text() + (RAY if lines[0].startswith(RAY) else "") + "AssertionError: empty batch\n")
    result = diagnose(log)
    assert result["findings"][0]["details"]["values"]["exception"] == ["AssertionError"], result["findings"]


def test_an_unexplained_exception_before_a_known_failure_is_kept_first(tmp_path):
    """The peer's own exception, seconds before the others time out, is the cause; afterwards it is the echo."""
    log = tmp_path / "two.log"
    log.write_text("(WorkerDict pid=1, ip=10.0.0.1) 2026-02-02 10:00:00,000 KeyError: 'reward'\n"
                   "(WorkerDict pid=2, ip=10.0.0.2) [rank1]: EI0002: [PID: 2] 2026-02-02-10:30:00.000.000 The wait "
                   "execution of the Notify register times out.\n")
    result = diagnose(log)
    assert [f["code"] for f in result["findings"]] == ["hccl_exec_timeout", table.UNRECOGNISED]
    assert result["first_failure"]["family"] == table.UNRECOGNISED and result["first_failure"]["node"] == "10.0.0.1"
    log.write_text("[rank1]: RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 1; 60 GiB total)\n"
                   "[rank1]: [ERROR] 2026-02-02-10:00:00 (PID:5, Device:1, RankID:1) ERR00100 PTA call acl api failed.\n")
    result = diagnose(log)
    assert [f["code"] for f in result["findings"]] == ["npu_oom"] and result["unrecognised_lines"] == 1


def test_the_fallback_quotes_the_exception_when_an_error_line_came_first(tmp_path, capsys):
    """A CANN [ERROR] line is the first failing line; the Python exception after it (Type: message) is quoted too,
    with the frame that raised it (#35 item 2)."""
    log = tmp_path / "run.log"
    log.write_text("[ERROR] 2026-01-01-00:00:01 (PID:77, Device:0, RankID:0) ERR99999 UNKNOWN unknown error\n"
                   "2026-01-01 00:00:02,000 - root - INFO - reward\n"
                   "Traceback (most recent call last):\n"
                   '  File "/opt/verl/verl/trainer/main_ppo.py", line 42, in run\n'
                   "    trainer.fit()\n"
                   "RuntimeError: reward function returned None\n")
    f = diagnose(log)["findings"][0]
    assert f["code"] == table.UNRECOGNISED and "ERR99999" in f["where"]["text"]
    assert f["details"]["exception_line"]["text"] == "RuntimeError: reward function returned None"
    assert f["details"]["exception_line"]["raised_at"] == "/opt/verl/verl/trainer/main_ppo.py:42 in run"
    code, out, err = cli_run(capsys, "diagnose", str(log))
    assert "the exception: RuntimeError: reward function returned None (raised at /opt/verl/verl/trainer/main_ppo.py:42" in out

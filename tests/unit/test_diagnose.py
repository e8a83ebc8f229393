"""`verl-ascend diagnose` on log excerpts shaped like the real messages of each failure family.

The fixtures (tests/fixtures/diagnose/) reproduce the prefixes, codes and timestamp formats of the
messages quoted in the public threads the table cites; in the multi-rank ones the earliest failure
is not the first line, so "first failing rank" is decided by time, not by reading order.
"""

import datetime
import json
import re
from pathlib import Path

import pytest

from verl_ascend import cli
from verl_ascend.diagnose import context, report, scan, table

pytestmark = pytest.mark.verl_agnostic
FIX = Path(__file__).parents[1] / "fixtures" / "diagnose"
STEPS_LOG = Path(__file__).parents[1] / "fixtures" / "verl_steps.log"


def diagnose(*paths):
    """The JSON form (what --json prints: the shared envelope), so the tests read what a script reads."""
    return json.loads(report.build(scan.scan([str(p) for p in paths])).to_json())


def cli_run(capsys, *argv):
    """``verl-ascend ARGV`` in this process: (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def finding(result, family):
    found = [f for f in result["findings"] if f["code"] == family]
    assert found, f"no {family} finding; got {[f['code'] for f in result['findings']]}"
    return found[0]


# (fixture, family, first rank, first device, first time, words the fix must name)
CASES = [
    ("port_in_use.log", "port_in_use", 0, None, "2025-03-26 17:01:02.816", ("HCCL_IF_BASE_PORT", "ss -ltnp")),
    ("hccp_busy.log", "hccp_busy", 2, 0, "2025-04-24 16:14:56.975", ("npu-smi info",)),
    ("tls_plog", "tls_mismatch", None, 1, "2025-10-24 15:39:25.142", ("hccn_tool -i $i -tls -s enable 0",)),
    ("hccn_tls.txt", "tls_mismatch", None, 2, None, ("hccn_tool -i $i -tls -g",)),
    ("gloo_connect_full_mesh_wrong_nic.log", "wrong_nic", 9, None, None, ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")),
    ("gloo_ifname.log", "wrong_nic", 16, None, None, ("GLOO_SOCKET_IFNAME", "ip -4 addr")),
    ("device_network.log", "device_network", 9, 1, "2025-09-24 20:59:48.119", ("hccn_tool -i $i -link -g", "/etc/hccn.conf")),
    ("connect_late", "hccl_connect_timeout", 3, 3, "2025-07-23 03:43:02.001", ("HCCL_CONNECT_TIMEOUT",)),
    ("exec_timeout.log", "hccl_exec_timeout", 98, 2, "2025-10-11 15:09:31.002", ("HCCL_EXEC_TIMEOUT",)),
    ("watchdog.log", "hccl_exec_timeout", 0, None, "2025-03-24 13:00:24.236", ("HCCL_EXEC_TIMEOUT", "actor_rollout_ref.nccl_timeout")),
    ("long_tail.log", "rollout_long_tail", 45, None, "2025-11-20 12:45:29.001", ("HCCL_EXEC_TIMEOUT", "max_response_length")),
    ("cann_not_sourced.log", "cann_not_sourced", None, None, None, ("set_env.sh", "ray start")),
    ("npu_oom.log", "npu_oom", 0, None, "2025-06-09 06:57:46.120", ("gpu_memory_utilization", "PYTORCH_NPU_ALLOC_CONF")),
    ("npu_runtime.log", "npu_runtime", 3, 7, "2026-03-16 20:13:22.806", ("ASCEND_LAUNCH_BLOCKING=1", "npu-smi info -t health")),
    ("stream_sync.log", "stream_sync_timeout", 2, 2, "2024-09-26 16:06:40.000", ("ASCEND_LAUNCH_BLOCKING=1",)),
    ("ray_no_npu.log", "ray_no_npu", None, None, "2026-06-16 10:02:11.512", ("--resources", "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES")),
    ("file_handles.log", "file_handles", None, None, None, ("ulimit -n 65536",)),
    ("hccl_init_code4_device_network.log", "device_network", 0, 0, "2025-04-18 16:04:50.000", ("hccn_tool",)),
    ("hccl_connect_timeout_code9.log", "hccl_connect_timeout", 20, 4, "2025-04-24 14:27:35.000", ("HCCL_SOCKET_IFNAME", "HCCL_CONNECT_TIMEOUT")),
]


@pytest.mark.parametrize("name,family,rank,device,when,fix_words", CASES, ids=[c[0] + ":" + c[1] for c in CASES])
def test_family_first_rank_and_fix(name, family, rank, device, when, fix_words):
    result = diagnose(FIX / name)
    assert result["exit_code"] == 1
    f = finding(result, family)
    first = f["where"]
    assert first.get("rank") == rank
    assert first.get("device") == device
    assert first["time"] == when
    for word in fix_words:
        assert word in f["fix"], (word, f["fix"])
    assert f["sources"] and all(s.startswith("https://") for s in f["sources"])


def test_every_family_of_the_first_table_has_a_fixture_case():
    from verl_ascend.diagnose.families import core

    covered = {c[1] for c in CASES} | {"hccl_call_failed"}  # the generic one has its own test below
    assert covered == set(core.FAMILIES)  # the later areas: test_diagnose_public.py


def test_code_9_with_all_ranks_in_time_points_at_the_link_not_a_late_rank():
    result = diagnose(FIX / "hccl_connect_timeout_code9.log")
    assert [f["code"] for f in result["findings"]] == ["hccl_connect_timeout"]  # ERR02200 is folded into it
    f = result["findings"][0]
    assert "EI0006" in f["details"]["code_names"] and "error code 9 (HCCL_E_TIMEOUT)" in f["details"]["code_names"]
    assert f["where"]["pid"] == 540014 and f["details"]["ranks"] == [20]
    assert any("host NIC (HCCL_SOCKET_IFNAME)" in n for n in f["details"]["notes"])  # all within the timeout: a link problem
    assert result["generic_hccl_lines"] == 1
    assert result["first_failure"]["rank"] == 20 and result["first_failure"]["device"] == 4


def test_late_rank_note_when_reports_span_more_than_the_timeout():
    f = finding(diagnose(FIX / "connect_late"), "hccl_connect_timeout")
    assert f["details"]["spread_s"] == pytest.approx(415.176, abs=0.01)
    assert f["details"]["values"]["timeout_s"] == ["120"]
    assert any("a late rank" in n for n in f["details"]["notes"])
    assert f["details"]["ranks"] == [3, 12] and f["details"]["nodes"] == ["10.0.0.11", "10.0.0.12"]  # ranks from the driver log's pids


def test_multi_file_earliest_rank_is_in_the_second_file():
    late = FIX / "connect_late" / "node0" / "plog-2717288_20250723034557000.log"
    early = FIX / "connect_late" / "node1" / "plog-3100400_20250723034100000.log"
    result = diagnose(late, early, FIX / "connect_late" / "driver.log")
    first = result["first_failure"]
    assert first["file"] == str(early) and first["rank"] == 3 and first["node"] == "10.0.0.12"
    assert first["time"] == "2025-07-23 03:43:02.001"


def test_exec_timeout_names_the_late_rank():
    result = diagnose(FIX / "exec_timeout.log")
    f = finding(result, "hccl_exec_timeout")
    assert f["details"]["values"]["late_rank"] == ["24"]
    assert any("24" in n and "late rank" in n for n in f["details"]["notes"])
    assert [x["code"] for x in result["findings"]] == ["hccl_exec_timeout", "stream_sync_timeout"]


def test_socket_timeout_while_running_is_an_execution_timeout(tmp_path):
    """EI0006 has two reasons: no connect request (link setup) and data not sent in time (a rank stuck mid-run)."""
    log = tmp_path / "grpo.log"
    log.write_text("[rank1]: RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: "
                   "HcclAllreduce, error code is 6\n"
                   "[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank "
                   "did not send the data in time. Please check the reason for the rank being stuck\n")
    result = diagnose(log)
    assert [f["code"] for f in result["findings"]] == ["hccl_exec_timeout"]
    assert result["findings"][0]["where"]["rank"] == 1


def test_timeout_without_rollout_evidence_is_no_long_tail():
    result = diagnose(FIX / "watchdog.log")
    assert "rollout_long_tail" not in [f["code"] for f in result["findings"]]
    tail = finding(diagnose(FIX / "long_tail.log"), "rollout_long_tail")
    assert any("step 7 spent 5400 of 6300 s generating" in n for n in tail["details"]["notes"])


def test_generic_hccl_error_alone_is_reported(tmp_path):
    path = tmp_path / "generic.log"
    path.write_text(
        "[rank5]: RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:148 HCCL function error: "
        "hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is 5\n"
        "[rank5]: [ERROR] 2025-12-01-10:00:00 (PID:77, Device:5, RankID:5) ERR02200 DIST call hccl api failed.\n")
    f = finding(diagnose(path), "hccl_call_failed")
    assert "error code 5 (HCCL_E_NOT_SUPPORT)" in f["details"]["code_names"] and f["where"]["rank"] == 5


def test_noise_finds_nothing_and_a_run_ending_in_a_bare_traceback_header_fails():
    result = diagnose(FIX / "noise.log")
    assert result["findings"] == [] and result["exit_code"] == 0, result["findings"]
    # the step-line fixture stops after step 5 on "Traceback (most recent call last):" and nothing after it: a
    # traceback cut short, so the run failed (#46 item 1)
    result = diagnose(STEPS_LOG)
    assert result["exit_code"] == 1 and result["first_failure"]["text"].startswith("Traceback (most recent call")
    assert result["findings"][0]["details"]["values"]["exception"] == ["traceback without its exception line"]


def test_the_same_error_text_at_warning_level_is_quiet(tmp_path):
    error = "[ERROR] HCCL(1,python):2025-01-01-00:00:00.000.001 [x.cc:1] [1]Failed to bind the IP port 60000"
    (tmp_path / "a.log").write_text(error.replace("[ERROR]", "[WARNING]") + "\n")
    assert diagnose(tmp_path / "a.log")["findings"] == []
    (tmp_path / "b.log").write_text(error + "\n")
    assert finding(diagnose(tmp_path / "b.log"), "port_in_use")["where"]["pid"] == 1


@pytest.mark.parametrize("line,expected", [
    ("[ERROR] HCCL(2717288,python3):2025-07-23-03:49:57.177.194 [x]", (2025, 7, 23, 3, 49, 57, 177194)),
    ("[ERROR] 2025-04-24-14:27:35 (PID:540014, Device:4, RankID:20) ERR02200", (2025, 4, 24, 14, 27, 35, 0)),
    ("2026-06-16 10:02:11,512\tWARNING worker.py:1201 -- x", (2026, 6, 16, 10, 2, 11, 512000)),
    ("2026-06-16T10:02:11.5 x", (2026, 6, 16, 10, 2, 11, 500000)),
    ("[rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] x", (None, 3, 24, 13, 0, 25, 428029)),
    ("[rank0]:[E1206 18:44:12.715 ProcessGroupNCCL.cpp:607] x", (None, 12, 6, 18, 44, 12, 715000)),
    ("(EngineCore_DP0 pid=384) ERROR 10-10 17:15:01 [core.py:708] x", (None, 10, 10, 17, 15, 1, 0)),
    ("Traceback (most recent call last):", None),
])
def test_timestamp_formats(line, expected):
    assert context.timestamp(line) == expected


def test_where_reads_ray_torch_and_cann_prefixes():
    assert context.where("(WorkerDict pid=835, ip=172.26.143.83) [rank38]:[E809 x") == {"rank": 38, "pid": 835, "node": "172.26.143.83"}
    assert context.where("[ERROR] 2025-04-24-14:27:35 (PID:540014, Device:4, RankID:-1) ERR02200") == {"device": 4, "pid": 540014}
    assert context.where("RuntimeError: NPU out of memory. Tried to allocate 30.00 MiB (NPU 3; 60.96 GiB") == {"device": 3}


def test_year_less_stamps_take_the_files_year(tmp_path):
    log = tmp_path / "w.log"
    log.write_text("2023-03-24 12:00:00,001 - root - INFO - start\n" + (FIX / "watchdog.log").read_text())
    assert finding(diagnose(log), "hccl_exec_timeout")["where"]["time"] == "2023-03-24 13:00:24.236"


def test_block_boundaries_and_line_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "BLOCK", 64)
    filler = "".join(f"INFO step {i} fine\n" for i in range(40))
    oom = ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 6; 60.96 GiB total capacity; "
           "59.00 GiB already allocated)")
    (tmp_path / "big.log").write_text(filler + oom + "\n" + filler + oom)  # last line without newline
    f = finding(diagnose(tmp_path / "big.log"), "npu_oom")
    assert f["details"]["lines"] == 2 and f["where"]["line"] == 41 and f["where"]["device"] == 6
    result = diagnose(tmp_path / "big.log")
    assert result["lines"] == 82


def test_json_and_text_name_the_first_failure_and_exit_1(tmp_path, capsys):
    code, out, err = cli_run(capsys, "diagnose", "--json", FIX / "hccl_connect_timeout_code9.log",
                             FIX / "hccl_init_code4_device_network.log")
    assert code == 1, err
    out = json.loads(out)
    assert [f["code"] for f in out["findings"]] == ["device_network", "hccl_connect_timeout"]
    assert out["first_failure"]["time"] == "2025-04-18 16:04:50.000" and out["first_failure"]["rank"] == 0
    code, out, err = cli_run(capsys, "diagnose", str(FIX / "hccl_connect_timeout_code9.log"))
    assert code == 1
    assert "first failure: 2025-04-24 14:27:35.000, rank 20, device 4, pid 540014" in out
    assert "fix:" in out and "https://github.com/" in out
    code, out, err = cli_run(capsys, "diagnose", str(FIX / "noise.log"))
    assert code == 0 and out.startswith("no known failure"), out + err


def test_missing_empty_or_binary_input_exits_2(tmp_path, capsys):
    missing = tmp_path / "nope.log"
    code, out, err = cli_run(capsys, "diagnose", str(missing))
    assert code == 2 and f"{missing}: no such file or folder" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "image.png").write_bytes(b"\x89PNG")
    code, out, err = cli_run(capsys, "diagnose", str(empty))
    assert code == 2 and "holds no log files" in err
    binary = tmp_path / "core.log"
    binary.write_bytes(b"\x00\x01" * 100)
    code, out, err = cli_run(capsys, "diagnose", str(binary))
    assert code == 2 and "binary file" in err


def test_table_rules_compile_and_name_known_families():
    for rule in table.RULES:
        assert rule.family in table.FAMILIES
        # only the error-code fallback has no literal prefilter (SCAN_PATTERN selects its lines)
        assert (rule.keywords and all(k for k in rule.keywords)) or rule.family == table.UNRECOGNISED
        rule.compiled()
    orders = [f.order for f in table.FAMILIES.values()]
    assert len(orders) == len(set(orders))


def test_event_sort_puts_timed_events_first():
    a = scan.Event("npu_oom", "a", 1, "", when=None)
    b = scan.Event("npu_oom", "b", 9, "", when=datetime.datetime(2025, 1, 1))
    assert sorted([a, b], key=lambda e: e.sort_key()) == [b, a]


def test_every_keyword_is_reachable_by_the_block_scan():
    """A keyword no scan anchor covers would never be read: its rule would silently never fire."""
    keywords = [k for r in table.RULES for k in r.keywords] + list(table.EVIDENCE_KEYWORDS)
    codes = re.compile("|".join(f"{re.escape(c)}(?:{p})" for c, p in table.SCAN_CODES.items()))
    uncovered = [k for k in keywords
                 if k != table.STEP_KEY and not any(a in k for a in table.SCAN_ANCHORS) and not codes.search(k)]
    assert uncovered == []


def test_ray_session_folder_pids_from_file_names():
    """Ray's per-worker files carry no prefix: the pid is in the name (worker-<id>-<job>-<pid>.err,
    python-core-worker-<id>_<pid>.log), the rank in the .err, the time in the core-worker log."""
    result = diagnose(FIX / "ray_session")
    f = finding(result, "npu_oom")
    assert f["details"]["ranks"] == [2, 5]
    first = result["first_failure"]
    assert (first["rank"], first["device"], first["pid"], first["time"]) == (5, 5, 5121, "2025-11-30 09:12:00.612")
    assert first["file"].endswith("python-core-worker-9a0b1c2d3e4f_5121.log")


def test_a_line_longer_than_several_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "BLOCK", 64)
    huge = "x" * 1000 + " EL0004: [PID: 9] 2025-05-05-05:05:05.000.001 Failed to allocate memory."
    (tmp_path / "one.log").write_text("INFO start\n" + huge + "\nINFO end\n")
    f = finding(diagnose(tmp_path / "one.log"), "npu_oom")
    assert f["where"]["line"] == 2 and f["where"]["pid"] == 9


def test_128_ranks_storm_names_the_earliest_and_counts_them(tmp_path):
    lines = []
    for r in reversed(range(128)):  # printed last-first: reading order must not decide
        lines.append(f"(WorkerDict pid={8000 + r}, ip=10.0.{r // 8}.1) [rank{r}]: EI0006: [PID: {8000 + r}] "
                     f"2025-11-20-23:12:{10 + r % 40:02d}.{r:03d}.000 Getting socket times out. Reason: 1. The remote "
                     "does not initiate a connect request.")
    (tmp_path / "storm.log").write_text("\n".join(lines) + "\n")
    f = finding(diagnose(tmp_path / "storm.log"), "hccl_connect_timeout")
    assert f["details"]["lines"] == 128 and f["details"]["ranks"] == list(range(128)) and len(f["details"]["nodes"]) == 16
    assert (f["where"]["rank"], f["where"]["time"]) == (0, "2025-11-20 23:12:10.000")
    assert f["details"]["spread_s"] == pytest.approx(39.119)  # last: rank 119 at :49.119

"""`verl-ascend diagnose` on public log excerpts copied verbatim (#35 items 2 and 3): the failures every verl
run meets, each named as its family with a fix that names what to change, the thread cited.

The fixtures are tests/fixtures/diagnose/public/verbatim/*.log; their sources are the table at the end of
tests/fixtures/diagnose/SOURCES.md, which this file reads (a fixture not listed there fails here).
"""

import re
from pathlib import Path

import pytest
from test_diagnose import cli_run, diagnose

from verl_ascend.diagnose import table

pytestmark = pytest.mark.verl_agnostic
FIX = Path(__file__).parents[1] / "fixtures" / "diagnose"
VERBATIM = FIX / "public" / "verbatim"
ROW = re.compile(r"^\| `verbatim/([\w.]+)` \| `(\w+)` \| (https://\S+) \|$")
SOURCES = {m.group(1): (m.group(2), m.group(3))
           for m in map(ROW.match, (FIX / "SOURCES.md").read_text().splitlines()) if m}
NOISE = FIX / "public" / "noise"
NOISE_ROW = re.compile(r"^\| `noise/([\w.]+)` \| (https://\S+) \|$")
NOISE_SOURCES = {m.group(1): m.group(2) for m in map(NOISE_ROW.match, (FIX / "SOURCES.md").read_text().splitlines()) if m}
# what each fix must name: the key, variable or command to change
FIX_WORDS = {
    "collective_timeout": "actor_rollout_ref.nccl_timeout", "ray_actor_died": "dmesg -T", "thread_limit": "ulimit -u",
    "host_oom_killed": "RAY_memory_usage_threshold", "config_invalid": "+key=value",
    "state_dict_mismatch": "verl-ascend ckpt check", "size_not_divisible": "tensor_model_parallel_size",
    "model_path_invalid": "actor_rollout_ref.model.path", "data_path_missing": "data.train_files",
    "port_in_use": "MASTER_PORT", "ray_unschedulable": "ray status", "npu_oom": "gpu_memory_utilization",
    "npu_runtime": "ASCEND_LAUNCH_BLOCKING=1", "hccl_exec_timeout": "HCCL_EXEC_TIMEOUT",
    "rendezvous_unreachable": "MASTER_ADDR", "file_handles": "ulimit -n 65536", "cann_not_sourced": "set_env.sh",
    "ray_no_npu": "--resources", "ckpt_missing_tensor": "verl-ascend ckpt check",
    "stream_sync_timeout": "ASCEND_LAUNCH_BLOCKING=1", "peer_exited": "HCCL_EXEC_TIMEOUT", "device_network": "hccn_tool",
    "ray_node_died": "verl-ascend ckpt sync", "cuda_on_ascend": "map_location", "op_binary_missing": "kernels",
    "hccl_connect_timeout": "HCCL_CONNECT_TIMEOUT",
    "npu_lib_mismatch": "torch_npu's README version table", "ray_object_store_full": "--object-store-memory",
    "unrecognised_failure": "ASCEND_LAUNCH_BLOCKING",
}


def test_every_verbatim_file_is_listed_and_the_set_covers_the_new_families():
    assert {p.name for p in VERBATIM.glob("*.log")} == set(SOURCES)
    assert {family for family, _ in SOURCES.values()} == set(FIX_WORDS)
    assert len(SOURCES) >= 40  # #35: at least 40 public excerpts across the families (#46: the corpus test counts all)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_verbatim_excerpt_is_named_with_its_fix(name):
    family, url = SOURCES[name]
    result = diagnose(VERBATIM / name)
    assert result["exit_code"] == 1
    found = result["findings"][0]
    assert found["code"] == family, [f["code"] for f in result["findings"]]
    assert FIX_WORDS[family] in found["fix"], found["fix"]
    if family != table.UNRECOGNISED:  # the fallback cites the trackers, not each thread
        assert url in table.FAMILIES[family].sources, (url, table.FAMILIES[family].sources)
        assert table.UNRECOGNISED not in [f["code"] for f in result["findings"]]


def test_the_watchdog_names_the_collective_and_its_sequence_number():
    f = diagnose(VERBATIM / "nccl_watchdog_reduce_scatter.log")["findings"][0]
    assert f["details"]["values"]["collective"] == ["_REDUCE_SCATTER_BASE"]
    assert f["details"]["values"]["seq"] == ["7753"] and f["details"]["ranks"] == [0, 3, 4]
    assert any("_REDUCE_SCATTER_BASE at sequence number(s) 7753" in n for n in f["details"]["notes"])
    assert f["where"]["rank"] == 0  # 18:44:12.715, before rank 4 (.755) and rank 3 (13.275)


def test_an_npu_oom_in_a_ray_worker_names_the_device_and_the_allocation():
    result = diagnose(VERBATIM / "npu_oom_ray_worker.log")
    f = result["findings"][0]
    assert f["where"]["device"] == 3 and f["where"]["pid"] == 45464 and f["where"]["process"] == "NPURayWorkerWrapper"
    assert f["details"]["values"]["alloc"] == ["30.00 MiB"]
    # the ERR99999 six seconds later and the ERROR-level traceback lines printed with it are its echo
    assert result["unrecognised_lines"] == 3


def test_ascend_excerpts_name_the_late_rank_the_culprit_and_the_cause_first():
    f = diagnose(VERBATIM / "hccl_ei0002_rl.log")["findings"][0]
    assert f["details"]["values"]["late_rank"] == ["24"] and (f["where"]["rank"], f["where"]["device"]) == (101, 0)
    f = diagnose(VERBATIM / "hccl_stuck_peer.log")["findings"][0]
    assert f["details"]["culprit"] == {"node": "172.16.38.219", "device": 6, "reports": 1}
    result = diagnose(VERBATIM / "hccl_listen_port_then_timeout.log")
    assert [f["code"] for f in result["findings"]] == ["port_in_use", "hccl_connect_timeout"]
    assert result["findings"][0]["details"]["values"]["port"] == ["16666"]


def test_the_rendezvous_port_is_named():
    f = diagnose(VERBATIM / "rendezvous_tcpstore.log")["findings"][0]
    assert f["details"]["values"]["port"] == ["44796"] and any("44796" in n for n in f["details"]["notes"])
    assert f["where"]["raised_at"].endswith("rendezvous.py:177 in _create_c10d_store")


def test_ray_s_verdict_is_quoted_and_the_thread_limit_behind_it_comes_first():
    f = diagnose(VERBATIM / "ray_actor_died_sleep.log")["findings"][0]
    assert any("SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2" in n
               for n in f["details"]["notes"]), f["details"]["notes"]
    result = diagnose(VERBATIM / "ray_actor_died_thread.log")
    assert [f["code"] for f in result["findings"]] == ["thread_limit", "ray_actor_died"]
    assert result["first_failure"]["family"] == "thread_limit"  # same time as Ray's verdict: the cause is the headline


def test_an_actor_death_after_the_end_of_a_finished_run_is_shutdown_noise(tmp_path, capsys):
    """Ray's verdict lines printed after `Training Progress: 100%` of our own healthy rehearsal log."""
    log = tmp_path / "console.log"
    log.write_text((FIX / "rehearsal" / "r7c_console.log").read_text()
                   + (VERBATIM / "ray_actor_died_sleep.log").read_text())
    result = diagnose(log)
    assert result["exit_code"] == 0 and result["shutdown_lines"] >= 2
    assert any(w["family"] == "ray_actor_died" for w in result["shutdown_noise"])
    code, out, err = cli_run(capsys, "diagnose", "-v", str(log))
    assert code == 0 and "shutdown noise:" in out and "ActorDiedError" in out


def test_every_noise_file_is_listed():
    assert {p.name for p in NOISE.glob("*.log")} == set(NOISE_SOURCES) and len(NOISE_SOURCES) >= 5


@pytest.mark.parametrize("name", sorted(NOISE_SOURCES))
def test_public_noise_is_clean(name):
    result = diagnose(NOISE / name)
    assert result["exit_code"] == 0 and result["findings"] == [], [f["where"]["text"] for f in result["findings"]]


def test_all_noise_with_the_healthy_rehearsals_is_clean():
    healthy = [p for p in sorted((FIX / "rehearsal").glob("*.log")) if p.name != "r7c_console_scratch.log"]  # see
    result = diagnose(*sorted(NOISE.glob("*.log")), *healthy)  # test_diagnose_timeline.SCRATCH_AFTER_SAVE
    assert result["exit_code"] == 0, [f["where"]["text"] for f in result["findings"]]


def test_a_missing_model_json_is_not_a_data_path(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("FileNotFoundError: [Errno 2] No such file or directory: '/models/qwen/tokenizer_config.json'\n")
    assert diagnose(log)["findings"][0]["code"] != "data_path_missing"
    log.write_text("FileNotFoundError: [Errno 2] No such file or directory: '/data/gsm8k/train.jsonl'\n")
    assert diagnose(log)["findings"][0]["code"] == "data_path_missing"


def test_old_watchdog_lines_name_ranks_and_the_lowest_sequence_number():
    f = diagnose(VERBATIM / "nccl_watchdog_old_format.log")["findings"][0]
    assert f["details"]["ranks"] == [1, 2, 3, 6, 7] and f["details"]["values"]["seq"] == ["469508"]
    f = diagnose(VERBATIM / "nccl_watchdog_after_progress_bar.log")["findings"][0]
    assert f["details"]["values"]["seq"] == ["64088", "96117", "96120", "96125"]  # rank 7 is thousands behind


def test_the_assertion_not_its_source_line_is_quoted(tmp_path):
    log = tmp_path / "run.log"
    log.write_text('Traceback (most recent call last):\n'
                   '  File "/opt/megatron/core/utils.py", line 30, in divide\n'
                   '    assert numerator % denominator == 0, "{} is not divisible by {}".format(numerator, denominator)\n'
                   "AssertionError: 28 is not divisible by 8\n")
    f = diagnose(log)["findings"][0]
    assert f["code"] == "size_not_divisible" and f["where"]["text"] == "AssertionError: 28 is not divisible by 8"
    assert f["where"]["raised_at"] == "/opt/megatron/core/utils.py:30 in divide"


def test_a_node_death_line_without_an_address_is_named_without_one(tmp_path):
    # Ray before 1.0 wrote the line without an address: the message as its monitor builds it ("The node with client
    # ID " << client_id << " has been marked dead because the monitor has missed too many heartbeats from it.",
    # https://github.com/ray-project/ray/blob/62e871a59e91e3afe4b12f985817e1c64e3eba6c/src/ray/raylet/monitor.cc),
    # with a client id of ours. The address is optional in the pattern; the headline detail is then absent, not an error
    log = tmp_path / "driver.log"
    log.write_text("The node with client ID 0123456789abcdef0123456789abcdef01234567 has been marked dead because the "
                   "monitor has missed too many heartbeats from it.\n")
    result = diagnose(log)
    found = result["findings"][0]
    assert result["exit_code"] == 1 and found["code"] == "ray_node_died", result["findings"]
    assert "dead_node" not in found["details"].get("values", {}), found["details"]
    # with Ray's address the node is in the details (ray-project/ray#15128's line, the verbatim fixture)
    named = diagnose(VERBATIM / "ray_nodes_marked_dead.log")["findings"][0]
    assert named["details"]["values"]["dead_node"], named["details"]

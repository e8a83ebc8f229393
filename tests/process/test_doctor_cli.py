"""`verl-ascend doctor` end to end in a fresh process, with the Ascend doubles and a temp hccn.conf."""

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

import psutil
import pytest
import torch
from subproc import clean_env, kill_cluster, run_cli

from verl_ascend.doctor import board_probe, hccl
from verl_ascend.doctor.checks import GROUPS as ALL_GROUPS

NOT_VERL = "patches"  # the group that imports verl; the tests below leave it out unless they test it


def doctor(*args, env, limit_nofile=None, timeout=120):
    def lower_limit():
        if limit_nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit_nofile, limit_nofile))

    with tempfile.TemporaryDirectory(prefix="va-cwd-") as cwd:
        proc = subprocess.run([sys.executable, "-m", "verl_ascend", "doctor", *args], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout, preexec_fn=lower_limit)
    return proc


def report(proc):
    assert proc.returncode in (0, 1, 2), proc.stderr[-3000:]  # a verdict, not a crash (the JSON must parse)
    return json.loads(proc.stdout)


def by_check(data):
    out = {}
    for f in data["findings"]:
        out.setdefault(f["subject"], []).append(f)
    return out


def cluster_interface():
    """An up interface with a non-loopback IPv4 address on this machine, else loopback."""
    stats = psutil.net_if_stats()
    for name, addrs in psutil.net_if_addrs().items():
        if stats.get(name) and stats[name].isup and any(a.family == 2 and not a.address.startswith("127.") for a in addrs):
            return name, 2
    return "lo", 1


@pytest.fixture
def ascend_env(tmp_path):
    """A well set-up Ascend node, made of the doubles: fake npu-smi and torch_npu, a toolkit dir."""
    home = tmp_path / "Ascend" / "ascend-toolkit" / "latest"
    (home / "lib64").mkdir(parents=True)
    hccn = tmp_path / "hccn.conf"
    hccn.write_text("".join(f"address_{i}=10.10.1.{11 + i}\nnetmask_{i}=255.255.255.128\n" for i in range(8)))
    iface, nnodes = cluster_interface()
    env = clean_env(
        fake_npu=True, bins=("npu-smi",),
        FAKE_TORCH_NPU_VERSION=torch.__version__.split("+")[0] + ".post1",
        ASCEND_TOOLKIT_HOME=home, ASCEND_HOME_PATH=home, LD_LIBRARY_PATH=f"{home}/lib64",
        ATB_HOME_PATH=tmp_path / "atb", HCCL_SOCKET_IFNAME=iface, GLOO_SOCKET_IFNAME=iface,
        HCCL_CONNECT_TIMEOUT=3600, HCCL_EXEC_TIMEOUT=3600, RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1,
        RAY_TMPDIR=tmp_path / "no-ray",
    )
    for var in ("HCCL_IF_IP", "ASCEND_RT_VISIBLE_DEVICES", "RAY_ADDRESS"):
        env.pop(var, None)
    env["HCCL_IF_BASE_PORT"] = str(hccl_base())
    return env, str(hccn), nnodes


def hccl_base():
    """HCCL's ports as a well set-up shared node has them: 16 free ports outside the kernel's ephemeral range.
    HCCL's default 60000-60015 lies inside it, so on a busy host an outgoing connection of a test running beside
    this one may hold one of them, and doctor rightly says so (CI saw it: 1 of 60000-60015 taken)."""
    ephemeral = hccl.ephemeral_port_range() or (32768, 60999)  # Linux's default where /proc does not say
    used = hccl.ports_in_use(hccl.read_tables() or [])
    base = hccl.free_base(used, ephemeral) or hccl.free_base(used, ephemeral, start=20000, stop=ephemeral[0])
    assert base, f"no 16 free ports outside the ephemeral range {ephemeral} on this host"
    return base


@pytest.mark.verl_agnostic
def test_well_set_up_node_is_all_ok(ascend_env):
    env, hccn, nnodes = ascend_env
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    soft = hard if hard != resource.RLIM_INFINITY else 65536
    proc = doctor("--json", "--skip", "versions,patches", "--hccn-conf", hccn, "--nnodes", str(nnodes),
                  env=env, limit_nofile=soft)
    data = report(proc)
    states = {f["subject"]: f["severity"] for f in data["findings"]}
    expected_nofile = "ok" if soft >= 32768 else "warning"  # this machine's hard limit may be below 32768
    assert states.pop("limits.nofile") == expected_nofile
    assert states.pop("ray.cluster") == "skip"  # no Ray started: said, not passed
    # the one check that reads the installed verl; its verdict per verl: test_board_probe_matches_the_installed_verl
    assert states.pop("npu.verl_board_probe") in ("ok", "skip")
    assert set(states.values()) == {"ok"}, [f for f in data["findings"] if f["severity"] != "ok"]
    assert {"torch_npu", "cann.env", "npu.devices", "npu.health", "npu.hccn_conf", "network.socket_ifname_pair",
            "network.hccl_socket_ifname", "network.gloo_socket_ifname", "hccl.connect_timeout",
            "ray.noset_visible_devices"} <= set(states)
    assert "8 NPU" in by_check(data)["npu.devices"][0]["message"]
    assert data["context"]["ascend_host"] and data["summary"]["error"] == 0


@pytest.mark.verl_agnostic
def test_bad_node_reports_each_problem_with_its_fix(ascend_env, tmp_path):
    env, hccn, _ = ascend_env
    dup = tmp_path / "dup.conf"
    dup.write_text(open(hccn).read().replace("address_7=10.10.1.18", "address_7=10.10.1.11"))
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "GLOO_SOCKET_IFNAME"):
        env.pop(var)
    env.update(FAKE_NPU_UNHEALTHY="3", HCCL_CONNECT_TIMEOUT="1h",
               ASCEND_RT_VISIBLE_DEVICES="", HCCL_IF_IP="203.0.113.77", HCCL_IF_BASE_PORT="80")
    env.update({k: v for k, v in clean_env(fake_npu=True, FAKE_TORCH_NPU_VERSION="2.1.0").items()
                if k in ("PYTHONPATH", "FAKE_TORCH_NPU_VERSION")})  # the installed record says 2.1.0 too
    proc = doctor("--json", "--skip", "versions,patches", "--hccn-conf", str(dup), "--nnodes", "2",
                  env=env, limit_nofile=1024)
    data = report(proc)
    assert proc.returncode == 2  # errors found
    errors = {f["subject"]: f for f in data["findings"] if f["severity"] == "error"}
    assert set(errors) == {"torch_npu", "cann.env", "npu.health", "npu.hccn_conf", "network.socket_ifname_pair",
                           "network.hccl_if_ip", "hccl.connect_timeout", "hccl.if_base_port", "npu.visible_devices",
                           "limits.nofile"}
    assert "2.1.0" in errors["torch_npu"]["message"]
    assert "NPU 3 (Alarm)" in errors["npu.health"]["message"]
    assert "10.10.1.11 on devices 0, 7" in errors["npu.hccn_conf"]["message"]
    assert "GLOO_SOCKET_IFNAME" in errors["network.socket_ifname_pair"]["fix"]
    assert "set_env.sh" in errors["cann.env"]["fix"]
    assert all(f["fix"] for f in errors.values())
    assert data["summary"]["error"] == len(errors)


ONLY_NPU = ",".join(g for g in ALL_GROUPS if g != "npu")


def a3_hccn(path, same_subnet_card=None):
    """address_0..15 for one A3 node: die 2k in 10.30.0.0/24, die 2k+1 in 10.30.1.0/24 (or, for one card,
    both in the first)."""
    lines = []
    for die in range(16):
        card, chip = divmod(die, 2)
        subnet = 0 if card == same_subnet_card else chip
        lines.append(f"address_{die}=10.30.{subnet}.{10 + die}\nnetmask_{die}=255.255.255.0\n")
    path.write_text("".join(lines))
    return str(path)


def test_a3_node_is_read_per_die(ascend_env, tmp_path):
    env, _, _ = ascend_env
    env.update(FAKE_NPU_LAYOUT="a3")
    data = report(doctor("--json", "--skip", ONLY_NPU, "--hccn-conf", a3_hccn(tmp_path / "a3.conf"), env=env))
    checks = by_check(data)
    assert {c: f[0]["severity"] for c, f in checks.items()} == {
        "npu.devices": "ok", "npu.platform": "ok", "npu.health": "ok", "npu.hccn_conf": "ok",
        "npu.verl_board_probe": "ok" if board_probe.verl_probes_board() else "skip"}
    assert checks["npu.devices"][0]["message"].startswith("16 NPU dies (8 cards x 2), one rank each")
    assert "65536 MB HBM per die" in checks["npu.devices"][0]["message"]
    assert data["context"]["platform"] == "a3" and data["context"]["npus_per_node"] == 16
    # a planted unhealthy die, and the two dies of card 3 in one subnet
    env.update(FAKE_NPU_UNHEALTHY="6")
    proc = doctor("--json", "--skip", ONLY_NPU, "--hccn-conf", a3_hccn(tmp_path / "bad.conf", 3), env=env)
    assert proc.returncode == 2  # errors found
    errors = {f["subject"]: f["message"] for f in report(proc)["findings"] if f["severity"] == "error"}
    assert errors["npu.health"] == "unhealthy: NPU 3 chip 0 / Phy-ID 6 (Alarm)"
    assert "dies 6 and 7 in 10.30.0.0/24" in errors["npu.hccn_conf"]


@pytest.mark.verl_agnostic
def test_a5_node_and_an_a2_plan_on_a3(ascend_env, tmp_path):
    env, hccn, _ = ascend_env
    env.update(FAKE_NPU_LAYOUT="a5")
    data = report(doctor("--json", "--skip", ONLY_NPU, "--hccn-conf", hccn, env=env))
    checks = by_check(data)
    assert checks["npu.devices"][0]["severity"] == "ok" and checks["npu.devices"][0]["message"].startswith("8 NPU:")
    assert data["context"]["platform"] == "a5" and data["context"]["npus_per_node"] == 8
    env.update(FAKE_NPU_LAYOUT="a3")  # an A2-sized hccn.conf and --npus-per-node 8 on an A3 node
    proc = doctor("--json", "--skip", ONLY_NPU, "--hccn-conf", hccn, "--npus-per-node", "8", env=env)
    checks = by_check(report(proc))
    assert checks["npu.devices"][0]["severity"] == "warning" and "--npus-per-node has 8" in checks["npu.devices"][0]["message"]
    missing = [f["message"] for f in checks["npu.hccn_conf"] if "no address" in f["message"]]
    assert missing and "8, 9, 10, 11, 12, 13, 14, 15 of 16" in missing[0]


def test_verl_board_probe_failure_shows_before_launch(ascend_env):
    env, hccn, _ = ascend_env
    env.update(FAKE_NPU_COUNT="1")  # a container that sees card 0 only; verl asks for card 1
    env.pop("ASCEND_VISIBLE_DEVICES", None)
    proc = doctor("--skip", ONLY_NPU, "--hccn-conf", hccn, env=env)
    if not board_probe.verl_probes_board():  # verl 0.6.1 has no such probe: said, not judged
        assert proc.returncode == 1  # the other findings of this node are warnings only
        assert "skip  npu.verl_board_probe:" in proc.stdout and "does not probe" in proc.stdout
        return
    assert proc.returncode == 2  # an error found
    assert "ERROR npu.verl_board_probe:" in proc.stdout and "verl#6756" in proc.stdout
    env.update(ASCEND_VISIBLE_DEVICES="0")
    data = report(doctor("--json", "--skip", ONLY_NPU, "--hccn-conf", hccn, env=env))
    assert by_check(data)["npu.verl_board_probe"][0]["severity"] == "ok"


# Runs the installed verl's get_npu_versions() over the npu-smi double, case by case: did its board
# probe raise (CalledProcessError / ValueError re-raised) or get past it (later CANN-path errors)?
REAL_PROBE = """
import json, os, subprocess, sys
from verl.utils import device
out = []
for count, visible in json.loads(sys.argv[1]):
    os.environ["FAKE_NPU_COUNT"] = str(count)
    os.environ.pop("ASCEND_VISIBLE_DEVICES", None)
    if visible is not None:
        os.environ["ASCEND_VISIBLE_DEVICES"] = visible
    try:
        device.get_npu_versions()
        out.append("passed")
    except (subprocess.CalledProcessError, ValueError):  # a non-numeric id: verl's bare raise is the ValueError
        out.append("failed")
    except RuntimeError as e:
        out.append("no version" if "Software Version" in str(e) else "passed")
print(json.dumps(out))
"""
PROBE_CASES = [(8, None), (1, None), (1, "0"), (1, "x"), (1, "5"), (3, "5"), (3, "4,5"), (1, "1")]


def test_board_probe_matches_the_installed_verl(monkeypatch):
    has_probe = board_probe.verl_probes_board()
    monkeypatch.setenv("PATH", f"{os.path.dirname(os.path.dirname(__file__))}/fakes/bin{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_NPU_LAYOUT", raising=False)
    if not has_probe:  # verl 0.6.1: no get_npu_versions, so doctor must not judge it
        (f,) = board_probe.check({}, has_probe)
        assert f.severity == "skip" and "does not probe" in f.message
        return
    env = clean_env(bins=("npu-smi",), ASCEND_HOME_PATH="/nonexistent-cann")
    proc = subprocess.run([sys.executable, "-c", REAL_PROBE, json.dumps(PROBE_CASES)], env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = []
    for count, visible in PROBE_CASES:
        monkeypatch.setenv("FAKE_NPU_COUNT", str(count))
        (f,) = board_probe.check({} if visible is None else {"ASCEND_VISIBLE_DEVICES": visible}, has_probe)
        ours.append({"ok": "passed", "error": "failed"}[f.severity])
    assert ours == real
    assert set(real) == {"passed", "failed"}  # both outcomes exercised


@pytest.mark.verl_agnostic
def test_broken_driver_runtime_and_missing_interface(ascend_env):
    env, hccn, _ = ascend_env
    env.update(FAKE_NPU_SMI_FAIL="1", FAKE_TORCH_NPU_BROKEN="1", HCCL_SOCKET_IFNAME="eno0", GLOO_SOCKET_IFNAME="eno0")
    proc = doctor("--skip", "versions,patches,hccl,env", "--hccn-conf", hccn, env=env)
    assert proc.returncode == 2  # errors found
    text = proc.stdout
    assert "ERROR torch_npu:" in text and "libhccl.so" in text and "set_env.sh" in text
    assert "ERROR npu.devices:" in text and "-8020" in text
    assert "ERROR network.hccl_socket_ifname:" in text and "'eno0' matches no interface" in text
    assert "lo" in text.split("network.hccl_socket_ifname", 1)[1].split("\n")[1]  # the fix lists real interfaces


@pytest.mark.verl_agnostic
def test_cpu_machine_says_what_it_could_not_check_and_json_is_stable(tmp_path):
    env = clean_env(RAY_TMPDIR=tmp_path)
    args = ("--json", "--skip", "patches", "--hccn-conf", str(tmp_path / "absent.conf"))
    proc = doctor(*args[:3], "--ray-address", "auto", env=env)  # default /etc/hccn.conf may be absent here
    data = report(proc)
    assert sorted(data) == ["command", "context", "exit_code", "findings", "schema", "summary"]
    assert data["schema"] == 3 and data["command"] == "doctor"
    assert all(sorted(f) == ["code", "details", "fix", "keys", "message", "severity", "sources", "subject", "where"]
               for f in data["findings"])
    assert sorted(data["summary"]) == ["error", "info", "ok", "skip", "warning"]
    assert data["exit_code"] == proc.returncode
    skipped = {f["subject"] for f in data["findings"] if f["severity"] == "skip"}
    assert {"torch_npu", "cann.env", "npu.devices", "ray.cluster"} <= skipped
    again = doctor(*args[:3], "--ray-address", "auto", env=env)
    assert again.stdout == proc.stdout  # same node, same answer, byte for byte
    missing = doctor(*args, env=env)
    assert missing.returncode == 2 and "absent.conf" in missing.stderr


@pytest.mark.verl_agnostic
@pytest.mark.parametrize("args, needle", [
    (("--skip", "npu,bogus"), "bogus"),
    (("--nnodes", "0"), "'0'"),
    (("--npus-per-node", "x"), "'x'"),
])
def test_bad_arguments_exit_2(args, needle):
    proc = run_cli("doctor", *args, timeout=60)
    assert proc.returncode == 2 and needle in proc.stderr


@pytest.mark.verl_agnostic  # doctor's wording of the plugin's report; the report per verl: test_activation.py
def test_patch_status_comes_from_the_plugin():
    only_patches = ",".join(g for g in ALL_GROUPS if g != "patches")
    proc = doctor("--json", "--skip", only_patches, env=clean_env(VERL_ASCEND_PATCHES="-device"), timeout=600)
    findings = report(proc)["findings"]
    assert {f["subject"] for f in findings} == {"plugin.patches"}
    disabled = [f for f in findings if "disabled by VERL_ASCEND_PATCHES" in f["message"]]
    assert len(disabled) == 1 and disabled[0]["severity"] == "warning" and disabled[0]["message"].endswith(": device")
    assert not [f for f in findings if f["severity"] == "error"]  # no patch failed on this verl


RAY_HEAD = """
import json, sys, ray
ray.init(num_cpus=1, resources={"NPU": 2}, include_dashboard=False, logging_level="ERROR")
print(json.dumps({"address": ray.get_runtime_context().gcs_address}), flush=True)
sys.stdin.read()  # hold the cluster until the test kills this session
"""


@pytest.mark.verl_agnostic
def test_local_ray_head_resources_against_the_plan():
    ray_tmp = tempfile.mkdtemp(prefix="vr", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    env = clean_env(RAY_TMPDIR=ray_tmp)
    log = open(os.path.join(ray_tmp, "head.log"), "w")
    for attempt in range(2):  # on a saturated CI machine Ray's own start-up can time out once
        head = subprocess.Popen([sys.executable, "-c", RAY_HEAD], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        line = "-"
        while line and not line.startswith("{"):  # ray.init either prints the address or fails and exits
            line = head.stdout.readline()
        if line.startswith("{") or attempt == 1:
            break
        kill_cluster(head, ray_tmp)  # what the failed start left (its ray.init may still be shutting down)
    if not line.startswith("{"):
        kill_cluster(head, ray_tmp)
        log.close()
        text = open(log.name).read()
        shutil.rmtree(ray_tmp, ignore_errors=True)
        # (Ray waits a fixed 30 s for its raylet, ray/_private/node.py; two attempts were made)
        raise AssertionError("ray head did not start: " + text[-2000:])
    try:
        address = json.loads(line)["address"]
        others = ",".join(g for g in ALL_GROUPS if g != "ray")
        env["RAY_ADDRESS"] = address  # discovery through the variable a user would set
        # one join only (Ray is the slow part); the ok path of the judgement is in test_doctor_checks
        bad = report(doctor("--json", "--skip", others, "--nnodes", "2", "--ray-timeout", "90", env=env, timeout=180))
    finally:
        kill_cluster(head, ray_tmp)
        log.close()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    (b,) = bad["findings"]
    assert b["severity"] == "error" and "1 node(s) with 2 NPU" in b["message"] and "2 x 8 = 16" in b["message"]


@pytest.mark.field_stack
def test_doctor_status_and_import_verl_agree_on_support_and_skip_rehearsal_targets():
    """One verdict on the installed verl (verl 0.5.0 of the field report's images included): doctor's
    versions.verl, status's verl_support, and the WARNING `import verl` logs. Rehearsal-only records
    (e.g. rehearse_offload's FSDP2 module, absent before torch 2.6) import nothing outside a
    rehearsal, so neither tool reports their targets."""
    from verl_ascend.core import activation

    only = ",".join(g for g in ALL_GROUPS if g not in ("versions", "patches"))
    data = report(doctor("--json", "--skip", only, env=clean_env(), timeout=600))
    status = json.loads(run_cli("status", "--json", timeout=600).stdout)
    verdict = status["verl_support"]
    (verl_row,) = by_check(data)["versions.verl"]
    assert verl_row["severity"] == ("ok" if verdict["supported"] else "warning"), (verl_row, verdict)
    assert verdict["reason"] in verl_row["message"] and verdict["verl"] in verl_row["message"]
    imported = subprocess.run([sys.executable, "-c", "import verl"], env=clean_env(), capture_output=True, text=True,
                              timeout=300)
    assert ("is outside the range verl-ascend supports" in imported.stderr) == (not verdict["supported"]), imported.stderr
    def targets(rehearsal: bool) -> set:
        return {t for name, (_, ts) in activation.PATCHES.items() if name.startswith("rehearse_") == rehearsal for t in ts}

    rehearsal_targets = targets(True) - targets(False)  # the agent loop is also rollout_order's target
    assert not rehearsal_targets & set(status["target_import_errors"]), status["target_import_errors"]
    patch_rows = " ".join(f["message"] for f in by_check(data)["plugin.patches"])
    assert not [t for t in rehearsal_targets if t in patch_rows], patch_rows
    # verl's own install guide's stack (verl 0.9.x): status and doctor name the same departures, and the torch of
    # this environment is one exactly when it is not the guide's 2.10.0
    (stack_row,) = by_check(data)["versions.verl_stack"]
    stack = status["verl_stack"]
    if not verdict["verl"].startswith("0.9."):
        assert stack is None and stack_row["severity"] == "skip", (stack, stack_row)
        return
    assert stack["source"].startswith("https://github.com/verl-project/verl/blob/") and stack["stack"]["torch"] == "2.10.0"
    for departure in stack["departures"]:
        assert departure in stack_row["message"], (departure, stack_row)
    torch_departs = any(d.startswith("torch ") for d in stack["departures"])
    assert torch_departs == (torch.__version__.split("+")[0] != "2.10.0"), (torch.__version__, stack["departures"])
    from verl_ascend.core.status import render  # the text status prints, from the report the CLI collected above

    text = render(status)
    assert "verl's Ascend stack (its install guide): " in text, text
    assert "megatron on npu: neither MindSpeed nor MegatronAdaptor installed" in text, text  # this environment has neither
    (path_row,) = by_check(data)["versions.megatron_path"]
    assert path_row["severity"] == "skip" and status["megatron_path"]["megatron_adaptor"] is None, path_row

"""Each doctor check judged on given facts: its ok, warn and error (or skip) paths. The module of a
check is named for its --skip group (doctor.checks.CHECKS)."""

import os
import subprocess
from pathlib import Path

import pytest

from verl_ascend.core.findings import exit_code
from verl_ascend.core.ifname import gloo_selected, hccl_selected
from verl_ascend.doctor import board_probe, cann, hccl, network, npu, patches, python, versions
from verl_ascend.doctor import env as env_checks
from verl_ascend.doctor import ray as ray_checks
from verl_ascend.doctor import torch as torch_checks
from verl_ascend.doctor.network import Interface

pytestmark = pytest.mark.verl_agnostic

IFACES = {
    "lo": Interface("lo", ["127.0.0.1", "::1"]),
    "eth0": Interface("eth0", ["10.1.2.3", "fe80::1"]),
    "eth1": Interface("eth1", ["10.9.9.9"]),
    "bond2": Interface("bond2", []),
    "ib0": Interface("ib0", ["10.5.5.5"], up=False),
}


def torch_findings(torch_v, npu_v, problem, ascend):
    return torch_checks.check_torch(torch_v) + torch_checks.check_torch_npu(torch_v, (npu_v, problem), ascend)


def cann_findings(env, ascend, **kw):
    return cann.check_cann(env, ascend, **kw) + cann.check_nnal(env, ascend, **kw)


def visible_findings(env, npu_count):
    return env_checks.check_visible_devices(env, npu_count) + env_checks.check_ray_noset(env)


def states(findings):
    return {f.subject: f.severity for f in findings}


def one(findings, check):
    (hit,) = [f for f in findings if f.subject == check]
    return hit


def test_python_paths():
    assert states(python.check_python((3, 11, 7))) == {"python": "ok"}
    assert states(python.check_python((3, 12, 1))) == {"python": "ok"}  # verl's Ascend guide recommends 3.12
    assert states(python.check_python((3, 13, 0))) == {"python": "warning"}
    bad = one(python.check_python((3, 9, 18)), "python")
    assert bad.severity == "error" and "3.9.18" in bad.message and bad.fix


@pytest.mark.parametrize("torch_v, npu_v, problem, ascend, expected", [
    ("2.7.1+cpu", "2.7.1.post1", "", True, "ok"),
    ("2.5.1", "2.5.1rc1", "", True, "ok"),
    ("2.7.1", "2.5.1", "", True, "error"),           # mismatch
    ("2.7.1", "2.7.1", "ImportError: libhccl.so", True, "error"),
    ("2.7.1", "", "", True, "error"),                 # Ascend node without torch_npu
    ("2.7.1", "", "", False, "skip"),                 # CPU machine: says it did not check
])
def test_torch_npu_paths(torch_v, npu_v, problem, ascend, expected):
    found = torch_findings(torch_v, npu_v, problem, ascend)
    assert one(found, "torch_npu").severity == expected
    if expected == "error":
        assert one(found, "torch_npu").fix


def test_torch_missing_is_an_error():
    assert states(torch_findings("", "", "", False)) == {"torch": "error"}


def test_mismatch_message_names_both_versions():
    bad = one(torch_findings("2.7.1", "2.5.1", "", True), "torch_npu")
    assert "2.5.1" in bad.message and "2.7.1" in bad.message


def test_cann_paths(tmp_path):
    home = tmp_path / "ascend-toolkit" / "latest"
    (home / "lib64").mkdir(parents=True)
    good = {"ASCEND_TOOLKIT_HOME": str(home), "ASCEND_HOME_PATH": str(home),
            "LD_LIBRARY_PATH": f"/usr/lib:{home}/lib64", "ATB_HOME_PATH": "/x"}
    assert states(cann_findings(good, True)) == {"cann.env": "ok"}
    # unsourced on an Ascend node: the fix names set_env.sh
    bad = one(cann_findings({}, True), "cann.env")
    assert bad.severity == "error" and "set_env.sh" in bad.fix
    assert states(cann_findings({}, False)) == {"cann.env": "skip"}
    gone = one(cann_findings({**good, "ASCEND_HOME_PATH": str(tmp_path / "nope")}, True), "cann.env")
    assert gone.severity == "error" and "nope" in gone.message
    # LD_LIBRARY_PATH replaced after sourcing
    assert states(cann_findings({**good, "LD_LIBRARY_PATH": "/usr/lib"}, True)) == {"cann.env": "warning"}
    other = tmp_path / "old"
    other.mkdir()
    assert "different toolkits" in one(cann_findings({**good, "ASCEND_HOME_PATH": str(other)}, True), "cann.env").message
    no_atb = {k: v for k, v in good.items() if k != "ATB_HOME_PATH"}
    assert states(cann_findings(no_atb, True)) == {"cann.env": "ok", "cann.nnal": "warning"}


NPU_SMI = """\
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B2               | OK            | 93.0        40                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3400 / 65536         |
+===========================+===============+====================================================+
| 1     910B2               | {health:<13} | 91.2        41                0    / 0             |
| 0                         | 0000:01:00.0  | 0           0    / 0          3400 / 65536         |
+===========================+===============+====================================================+
"""


def test_npu_smi_paths():
    good = npu.check_npu_smi((0, NPU_SMI.format(health="OK")), expected=2)
    assert states(good) == {"npu.devices": "ok", "npu.platform": "ok", "npu.health": "ok"}
    assert "2 NPU" in one(good, "npu.devices").message
    alarm = npu.check_npu_smi((0, NPU_SMI.format(health="Alarm")), expected=2)
    assert one(alarm, "npu.health").severity == "error" and "NPU 1 (Alarm)" in one(alarm, "npu.health").message
    assert one(npu.check_npu_smi((0, NPU_SMI.format(health="OK")), expected=8), "npu.devices").severity == "warning"
    failed = one(npu.check_npu_smi((255, "dcmi module initialize failed. ret is -8005")), "npu.devices")
    assert failed.severity == "error" and "-8005" in failed.message
    assert one(npu.check_npu_smi((0, "no table")), "npu.devices").severity == "error"
    assert states(npu.check_npu_smi(None)) == {"npu.devices": "skip"}


def test_hccn_conf_paths():
    lines = [f"address_{i}=10.10.1.{11 + i}\nnetmask_{i}=255.255.255.128" for i in range(8)]
    good = "\n".join(lines)
    assert states(npu.check_hccn_conf("h", good, 8, True)) == {"npu.hccn_conf": "ok"}
    dup = good.replace("address_5=10.10.1.16", "address_5=10.10.1.13")
    bad = one(npu.check_hccn_conf("h", dup, 8, True), "npu.hccn_conf")
    assert bad.severity == "error" and "10.10.1.13 on devices 2, 5" in bad.message
    short = "\n".join(lines[:6])
    missing = one(npu.check_hccn_conf("h", short, 8, True), "npu.hccn_conf")
    assert missing.severity == "warning" and "6, 7" in missing.message
    assert one(npu.check_hccn_conf("h", "address_0=10.1.1", 1, True), "npu.hccn_conf").severity == "error"
    assert one(npu.check_hccn_conf("h", "netmask_0=255.0.0.0", 1, True), "npu.hccn_conf").severity == "error"
    assert states(npu.check_hccn_conf("h", None, None, True)) == {"npu.hccn_conf": "warning"}
    assert states(npu.check_hccn_conf("h", None, None, False)) == {"npu.hccn_conf": "skip"}


def test_hccl_ifname_selection_rules():
    names = list(IFACES)
    assert hccl_selected("eth", names) == ["eth0", "eth1"]
    assert hccl_selected("=eth0", names) == ["eth0"]
    assert hccl_selected("^=eth0", names) == ["bond2", "eth1", "ib0", "lo"]
    assert hccl_selected("^eth,lo", names) == ["bond2", "ib0"]
    assert gloo_selected("eth0,nope", names) == ["eth0"]


@pytest.mark.parametrize("hccl, gloo, nnodes, expected", [
    ("eth0", "eth0", 2, {"network.socket_ifname_pair": "ok", "network.hccl_socket_ifname": "ok", "network.gloo_socket_ifname": "ok"}),
    ("=eth0", "eth0", 2, {"network.socket_ifname_pair": "ok", "network.hccl_socket_ifname": "ok", "network.gloo_socket_ifname": "ok"}),
    ("", "", 2, {"network.socket_ifname_pair": "warning"}),
    ("", "", 1, {"network.socket_ifname_pair": "ok"}),
    ("eth0", "", 2, {"network.socket_ifname_pair": "error", "network.hccl_socket_ifname": "ok"}),    # the 32B field report's Gloo failure
    ("eth0", "eth1", 2, {"network.socket_ifname_pair": "error", "network.hccl_socket_ifname": "ok", "network.gloo_socket_ifname": "ok"}),
    ("eno0", "eno0", 2, {"network.socket_ifname_pair": "ok", "network.hccl_socket_ifname": "error", "network.gloo_socket_ifname": "error"}),
    ("bond2", "bond2", 2, {"network.socket_ifname_pair": "ok", "network.hccl_socket_ifname": "error", "network.gloo_socket_ifname": "error"}),
    ("=ib0", "ib0", 2, {"network.socket_ifname_pair": "ok", "network.hccl_socket_ifname": "error", "network.gloo_socket_ifname": "error"}),
    ("=lo", "lo", 2, {"network.socket_ifname_pair": "ok", "network.hccl_socket_ifname": "warning", "network.gloo_socket_ifname": "warning"}),
    ("=lo", "lo", 1, {"network.socket_ifname_pair": "ok", "network.hccl_socket_ifname": "ok", "network.gloo_socket_ifname": "ok"}),
])
def test_socket_ifname_paths(hccl, gloo, nnodes, expected):
    env = {k: v for k, v in (("HCCL_SOCKET_IFNAME", hccl), ("GLOO_SOCKET_IFNAME", gloo)) if v}
    found = network.check_socket_ifnames(env, IFACES, nnodes)
    assert states(found) == expected
    for f in found:
        assert f.fix or f.severity == "ok"


def test_socket_ifname_messages_name_the_values():
    found = network.check_socket_ifnames({"HCCL_SOCKET_IFNAME": "eno0", "GLOO_SOCKET_IFNAME": "eno0"}, IFACES, 2)
    bad = one(found, "network.hccl_socket_ifname")
    assert "'eno0'" in bad.message and "eth0" in bad.fix  # lists the real interfaces
    assert "no IPv4" in one(network.check_socket_ifnames({"HCCL_SOCKET_IFNAME": "bond2", "GLOO_SOCKET_IFNAME": "bond2"}, IFACES, 2),
                            "network.gloo_socket_ifname").message


def test_without_psutil_addresses_are_not_judged():
    names_only = {n: Interface(n, None) for n in IFACES}
    found = network.check_socket_ifnames({"HCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}, names_only, 2)
    assert one(found, "network.hccl_socket_ifname").severity == "skip"
    assert one(network.check_if_ip({"HCCL_IF_IP": "10.1.2.3"}, names_only), "network.hccl_if_ip").severity == "skip"


def test_hccl_if_ip_paths():
    assert states(network.check_if_ip({}, IFACES)) == {"network.hccl_if_ip": "ok"}
    assert states(network.check_if_ip({"HCCL_IF_IP": "10.1.2.3"}, IFACES)) == {"network.hccl_if_ip": "ok"}
    assert states(network.check_if_ip({"HCCL_IF_IP": "10.1.2.4"}, IFACES)) == {"network.hccl_if_ip": "error"}
    assert states(network.check_if_ip({"HCCL_IF_IP": "eth0"}, IFACES)) == {"network.hccl_if_ip": "error"}


def test_visible_devices_and_ray_noset_paths():
    ok_env = {"RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1", "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3"}
    assert states(visible_findings(ok_env, 8)) == {"npu.visible_devices": "ok", "ray.noset_visible_devices": "ok"}
    assert states(visible_findings({}, 8)) == {"ray.noset_visible_devices": "warning"}
    off = {"RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "0"}
    assert states(visible_findings(off, 8)) == {"ray.noset_visible_devices": "warning"}
    empty = visible_findings({**ok_env, "ASCEND_RT_VISIBLE_DEVICES": ""}, 8)
    assert one(empty, "npu.visible_devices").severity == "error"
    beyond = visible_findings({**ok_env, "ASCEND_RT_VISIBLE_DEVICES": "6,7,8"}, 8)
    assert one(beyond, "npu.visible_devices").severity == "error"


def test_nofile_paths():
    assert states(env_checks.check_nofile((65536, 65536))) == {"limits.nofile": "ok"}
    assert states(env_checks.check_nofile((20000, 20000))) == {"limits.nofile": "warning"}
    assert states(env_checks.check_nofile((1024, 4096))) == {"limits.nofile": "error"}


def test_ptrace_rights_for_supervises_stacks():
    spy = {"pyspy": "/venv/bin/py-spy"}
    assert states(env_checks.check_ptrace({**spy, "scope": 1, "cap": True, "root": True})) == {"limits.ptrace": "ok"}
    assert states(env_checks.check_ptrace({**spy, "scope": 0, "cap": False, "root": False})) == {"limits.ptrace": "ok"}
    for facts in ({"scope": 1, "cap": False, "root": False}, {"scope": 0, "cap": False, "root": True},
                  {"scope": 3, "cap": True, "root": True}, {"pyspy": None, "scope": 0, "cap": True}):
        found = env_checks.check_ptrace({**spy, **facts})
        assert states(found) == {"limits.ptrace": "warning"}, facts
    assert "SYS_PTRACE" in env_checks.check_ptrace({**spy, "scope": 2, "cap": False, "root": False})[0].fix


def test_version_paths():
    full = {"verl": "0.9.1", "tensordict": "0.10.0", "vllm": "0.9.1", "vllm-ascend": "0.9.1rc1",
            "mindspeed": "0.12.1", "megatron-core": "0.12.1"}
    assert set(states(versions.check_versions(full, True)).values()) == {"ok"}
    assert one(versions.check_versions({**full, "verl": ""}, True), "versions.verl").severity == "error"
    assert one(versions.check_versions({**full, "tensordict": "0.9.1"}, True), "versions.tensordict").severity == "warning"
    assert one(versions.check_versions({**full, "tensordict": "0.9.1"}, False), "versions.tensordict").severity == "ok"
    assert one(versions.check_versions({**full, "tensordict": ""}, True), "versions.tensordict").severity == "error"
    assert one(versions.check_versions({**full, "vllm": "0.10.2"}, True), "versions.vllm_ascend").severity == "warning"
    assert one(versions.check_versions({**full, "vllm": ""}, True), "versions.vllm_ascend").severity == "error"
    assert one(versions.check_versions({**full, "vllm-ascend": ""}, True), "versions.vllm_ascend").severity == "warning"
    assert one(versions.check_versions({**full, "vllm-ascend": ""}, False), "versions.vllm_ascend").severity == "skip"
    assert one(versions.check_versions({**full, "mindspeed": ""}, True), "versions.mindspeed").severity == "warning"


def _report(states_by_name, active=True, verl_error=None):
    return {"plugin": {"active": active}, "verl_import_error": verl_error, "target_import_errors": {},
            "patches": [{"name": n, "state": s, "targets": [{"target": "m", "state": s, "detail": "boom"}]}
                        for n, s in states_by_name.items()]}


def test_patch_status_paths():
    assert states(patches.check_patches(_report({"device": "applied", "x": "not applicable"}))) == {"plugin.patches": "ok"}
    failed = patches.check_patches(_report({"device": "failed"}))
    assert failed[0].severity == "error" and "device" in failed[0].message and "boom" in failed[0].message
    assert patches.check_patches(_report({"device": "disabled"}))[0].severity == "warning"
    assert patches.check_patches(_report({}, active=False))[0].severity == "warning"
    assert patches.check_patches(_report({}, verl_error="ImportError: x"))[0].severity == "error"


def test_ray_paths_that_contact_nothing(tmp_path):
    assert ray_checks.discover("off", {}) == (None, "--ray-address off")
    assert ray_checks.discover("auto", {"RAY_ADDRESS": "10.1.2.3:6166"}) == ("10.1.2.3:6166", "RAY_ADDRESS")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("10.9.9.1:6166\n")
    assert ray_checks.discover("auto", {"RAY_TMPDIR": str(tmp_path)}) == ("10.9.9.1:6166", str(tmp_path / "ray" / "ray_current_cluster"))
    assert ray_checks.discover("auto", {"RAY_TMPDIR": str(tmp_path / "none")})[0] is None
    assert ray_checks.host_of("[::1]:6379") == "::1" and ray_checks.host_of("ray://10.0.0.1:10001") == "10.0.0.1"
    local = network.local_addresses(IFACES)
    assert states(ray_checks.check_ray(None, "no address", local, 2, 8)) == {"ray.cluster": "skip"}
    # a head on another host (a worker node's view) is not contacted
    remote = one(ray_checks.check_ray("10.9.9.1:6166", "file", local, 2, 8), "ray.cluster")
    assert remote.severity == "skip" and "not contacted" in remote.message
    assert one(ray_checks.check_ray("head-node:6166", "file", local, 2, 8), "ray.cluster").severity == "skip"


def test_ray_resource_judgement(monkeypatch):
    nodes = [{"alive": True, "ip": "10.1.2.3", "resources": {"CPU": 8, "NPU": 8}},
             {"alive": True, "ip": "10.1.2.4", "resources": {"CPU": 8, "NPU": 8}},
             {"alive": False, "ip": "10.1.2.5", "resources": {"NPU": 8}}]
    monkeypatch.setattr(ray_checks, "probe", lambda address, timeout: (nodes, ""))
    local = network.local_addresses(IFACES)
    assert one(ray_checks.check_ray("10.1.2.3:6166", "x", local, 2, 8), "ray.cluster").severity == "ok"
    short = one(ray_checks.check_ray("10.1.2.3:6166", "x", local, 3, 8), "ray.cluster")
    assert short.severity == "error" and "2 node(s) with 16 NPU" in short.message and "24" in short.message
    assert one(ray_checks.check_ray("10.1.2.3:6166", "x", local, None, 8), "ray.cluster").severity == "ok"
    nodes[1]["resources"]["NPU"] = 0
    assert one(ray_checks.check_ray("10.1.2.3:6166", "x", local, None, 8), "ray.cluster").severity == "warning"
    # an A3 node is 16 dies: the same cluster with 8 NPU per node falls short of the a3 profile
    nodes[1]["resources"]["NPU"] = 8
    a3 = one(ray_checks.check_ray("10.1.2.3:6166", "x", local, 2, 16, basis="a3 profile: 16 dies per node"), "ray.cluster")
    assert a3.severity == "error" and "2 x 16 = 32 (a3 profile: 16 dies per node)" in a3.message


def test_exit_code_rules():
    from verl_ascend.doctor.findings import error, ok, skip, warn

    a, b = env_checks.check_nofile, hccl.check_port_base  # a finding names its check by the function
    assert exit_code([ok(a, "m"), skip(b, "m")]) == 0
    assert exit_code([ok(a, "m"), warn(b, "m", "f")]) == 1
    assert exit_code([error(a, "m", "f")]) == 2
    assert exit_code([warn(a, "m", "f"), error(b, "m", "f")]) == 2
    assert ok(a, "m").subject == "limits.nofile"
    with pytest.raises(LookupError, match="add its row"):
        ok(exit_code, "m")  # not a check: the table has no id for it


def test_trainer_loop_packages_follow_the_installed_verl(monkeypatch):
    import importlib.util

    from verl_ascend.core import verl_install
    assert [f.severity for f in versions.check_trainer_loop()] == ["ok"]  # the test environment has what the loop needs
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in verl_install.V1_MODULES else real(name, *a))
    (finding,) = versions.check_trainer_loop()
    if verl_install.v1_default():  # verl 0.9.x: the v1 loop is the default
        assert finding.severity == "error" and "TransferQueue, pyzmq, msgspec" in finding.message
        assert f'"verl[verl-core]=={verl_install.version()}"' in finding.fix and "trainer.use_v1=False" in finding.fix
    else:
        assert finding.severity == "ok"


FAKE_SMI = Path(__file__).parents[1] / "fakes" / "bin" / "npu-smi"

# Two A3 cards in the shape of the real tables in vllm-ascend#2534 / #12980: `Chip  Phy-ID` header,
# name Ascend910, second die with Power "-", then the process table (whose rows must not count).
A3_TWO_CARDS = """\
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     Ascend910           | OK            | 170.2       35                0    / 0             |
| 0     0                   | 0000:9D:00.0  | 0           0    / 0          3400 / 65536         |
+------------------------------------------------------------------------------------------------+
| 0     Ascend910           | OK            | -           35                0    / 0             |
| 1     1                   | 0000:9F:00.0  | 0           0    / 0          3100 / 65536         |
+===========================+===============+====================================================+
| 1     Ascend910           | OK            | 181.0       36                0    / 0             |
| 0     2                   | 0000:99:00.0  | 0           0    / 0          3400 / 65536         |
+------------------------------------------------------------------------------------------------+
| 1     Ascend910           | {health:<13} | -           36                0    / 0             |
| 1     3                   | 0000:9B:00.0  | 0           0    / 0          3100 / 32768         |
+===========================+===============+====================================================+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 1       1                 | 2171455       | python3.10               | 3000                    |
+===========================+===============+====================================================+
"""


def fake_smi(*args, **env):
    proc = subprocess.run([str(FAKE_SMI), *args], capture_output=True, text=True, timeout=30,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("FAKE_")},
                               **{k: str(v) for k, v in env.items()}})
    return proc.returncode, proc.stdout + proc.stderr


def test_a3_table_is_read_per_die():
    layout, dies = npu.parse_dies(A3_TWO_CARDS.format(health="OK"))
    assert layout == "a3"
    assert [(d.npu, d.chip, d.phy_id, d.hbm_mb) for d in dies] == [
        (0, 0, 0, 65536), (0, 1, 1, 65536), (1, 0, 2, 65536), (1, 1, 3, 32768)]
    # A2 rows keep the card as the Phy-ID and chip 0
    a2_layout, a2 = npu.parse_dies(NPU_SMI.format(health="OK"))
    assert a2_layout == "a2" and [(d.npu, d.chip, d.phy_id, d.hbm_mb) for d in a2] == [(0, 0, 0, 65536), (1, 0, 1, 65536)]
    alarm = npu.check_npu_smi((0, A3_TWO_CARDS.format(health="Alarm")), expected=4)
    health = one(alarm, "npu.health")
    assert health.severity == "error" and "NPU 1 chip 1 / Phy-ID 3 (Alarm)" in health.message
    assert "Phy-ID 2" not in health.message
    assert "32768 / 65536 MB HBM per die" in one(alarm, "npu.devices").message


@pytest.mark.parametrize("layout, ranks, platform, word, hbm", [
    ("a2", 8, "a2", "card", 65536), ("a3", 16, "a3", "die", 65536), ("a5", 8, "a5", "card", 131072)])
def test_doubles_give_ranks_memory_and_platform(layout, ranks, platform, word, hbm):
    smi = fake_smi("info", FAKE_NPU_LAYOUT=layout)
    chip_map = npu.layout_from_chip_map(fake_smi("info", "-m", FAKE_NPU_LAYOUT=layout)[1])
    assert npu.ranks_and_profile(smi, chip_map) == (ranks, platform)
    found = npu.check_npu_smi(smi, None, chip_map)
    assert states(found) == {"npu.devices": "ok", "npu.platform": "ok", "npu.health": "ok"}
    assert one(found, "npu.devices").message.startswith(f"{ranks} NPU")
    assert f"{hbm} MB HBM per {word}" in one(found, "npu.devices").message
    assert one(found, "npu.platform").message.startswith(f"{platform}:")
    # an A2 node checked against 16 ranks, or an A3 against 8, is a mismatch
    other = 8 if ranks == 16 else 16
    assert one(npu.check_npu_smi(smi, other, chip_map), "npu.devices").severity == "warning"


def test_planted_unhealthy_die_is_named_by_phy_id():
    smi = fake_smi("info", FAKE_NPU_LAYOUT="a3", FAKE_NPU_UNHEALTHY=11)
    health = one(npu.check_npu_smi(smi), "npu.health")
    assert health.severity == "error"
    assert health.message == "unhealthy: NPU 5 chip 1 / Phy-ID 11 (Alarm)"


def test_chip_map_layouts():
    assert npu.layout_from_chip_map(fake_smi("info", "-m")[1]) is None  # A2: 910B names
    assert npu.layout_from_chip_map(fake_smi("info", "-m", FAKE_NPU_LAYOUT="a3")[1]) == "a3"
    assert npu.layout_from_chip_map("NPU ID  Chip ID  Chip Logic ID  Chip Phy-ID Chip Name\n0 0 0 0 Ascend") is None
    assert npu.layout_from_chip_map(None) is None


ALL_DIES = tuple(range(16))


def a3_hccn(mask="255.255.255.0", second_subnet=True, masks=ALL_DIES):
    lines = []
    for die in range(16):
        card, chip = divmod(die, 2)
        lines.append(f"address_{die}=10.20.{chip}.{10 + card}" if second_subnet else f"address_{die}=10.20.0.{10 + die}")
    lines += [f"netmask_{die}={mask}" for die in masks]
    return "\n".join(lines)


def test_hccn_conf_a3_two_subnet_rule():
    good = one(npu.check_hccn_conf("h", a3_hccn(), 16, True, "a3"), "npu.hccn_conf")
    assert good.severity == "ok" and "two dies of each card in different subnets" in good.message
    same = one(npu.check_hccn_conf("h", a3_hccn(second_subnet=False), 16, True, "a3"), "npu.hccn_conf")
    assert same.severity == "error" and "dies 0 and 1 in 10.20.0.0/24" in same.message and "dies 14 and 15" in same.message
    # a /16 mask puts 10.20.0.x and 10.20.1.x in one subnet
    wide = one(npu.check_hccn_conf("h", a3_hccn("255.255.0.0"), 16, True, "a3"), "npu.hccn_conf")
    assert wide.severity == "error" and "dies 2 and 3 in 10.20.0.0/16" in wide.message
    unmasked = one(npu.check_hccn_conf("h", a3_hccn(masks=range(14)), 16, True, "a3"), "npu.hccn_conf")
    assert unmasked.severity == "warning" and "no netmask for device(s) 14, 15" in unmasked.message
    # A3 expects address_0..15: the A2-sized file misses dies 8..15
    eight = "\n".join(line for line in a3_hccn().splitlines() if int(line.split("_")[1].split("=")[0]) < 8)
    short = one(npu.check_hccn_conf("h", eight, 16, True, "a3"), "npu.hccn_conf")
    assert "8, 9, 10, 11, 12, 13, 14, 15" in short.message
    # on A2 one subnet for all ports is right
    assert states(npu.check_hccn_conf("h", a3_hccn(second_subnet=False), 16, True, "a2")) == {"npu.hccn_conf": "ok"}


def board_answering(ids, version="25.2.0"):
    calls = []

    def board(npu_id):
        calls.append(npu_id)
        return (True, version) if npu_id in ids else (False, f"Error: the NPU ID {npu_id} is invalid.")
    return board, calls


def test_board_probe_follows_verl_sequence():
    board, calls = board_answering({"1"})
    assert board_probe.probe_sequence({}, board)[0] == "1" and calls == ["1"]
    board, calls = board_answering({"0"})
    answered, detail, tried = board_probe.probe_sequence({}, board)
    assert answered is None and "unset" in detail and calls == ["1"]
    board, calls = board_answering({"4"})
    assert board_probe.probe_sequence({"ASCEND_VISIBLE_DEVICES": "4,5"}, board)[0] == "4" and calls == ["1", "4"]
    # A3: the variable holds die 9; card 9 // 2 = 4 answers
    board, calls = board_answering({"4"})
    assert board_probe.probe_sequence({"ASCEND_VISIBLE_DEVICES": "9"}, board)[0] == "4" and calls == ["1", "9", "4"]
    board, calls = board_answering(set())
    answered, detail, tried = board_probe.probe_sequence({"ASCEND_VISIBLE_DEVICES": "x"}, board)
    assert answered is None and "'x'" in detail and calls == ["1"]


def test_board_probe_against_the_double(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_SMI.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_NPU_LAYOUT", raising=False)
    monkeypatch.setenv("FAKE_NPU_COUNT", "1")  # a container that sees card 0 only: verl's `-i 1` fails
    failed = one(board_probe.check({}), "npu.verl_board_probe")
    assert failed.severity == "error" and "-i 1" in failed.message and "ASCEND_VISIBLE_DEVICES is unset" in failed.message
    assert "ASCEND_VISIBLE_DEVICES" in failed.fix
    fixed = one(board_probe.check({"ASCEND_VISIBLE_DEVICES": "0"}), "npu.verl_board_probe")
    assert fixed.severity == "ok" and "-i 0" in fixed.message and "25.2.0" in fixed.message
    monkeypatch.setenv("FAKE_NPU_COUNT", "8")
    assert one(board_probe.check({}), "npu.verl_board_probe").severity == "ok"
    monkeypatch.setenv("FAKE_NPU_COUNT", "1")  # a verl without the probe (0.6.1): not judged
    assert one(board_probe.check({}, verl_probe=False), "npu.verl_board_probe").severity == "skip"

"""doctor's hccl group: HCCL's timeouts, its port base, and whether its host ports are free on this node
(from /proc/net/tcp-style tables)."""

import socket

import pytest

from verl_ascend.doctor import hccl

pytestmark = pytest.mark.verl_agnostic

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def row(n, port, state, ipv6=False):
    addr = ("00000000000000000000000000000000" if ipv6 else "00000000") + f":{port:04X}"
    return f"   {n}: {addr} {'0' * len(addr.split(':')[0])}:0000 {state} 00000000:00000000 00:00000000 00000000 0 0 123 1\n"


def test_parse_ports_and_states():
    v4 = HEADER + row(0, 60000, "0A") + row(1, 22, "0A") + row(2, 60003, "06")  # TIME_WAIT does not count
    v6 = HEADER + row(0, 60005, "01", ipv6=True)
    assert hccl.ports_in_use([v4, v6]) == {60000: "0A", 22: "0A", 60005: "01"}


def test_free_range_is_ok():
    found = hccl.check_hccl_ports({}, tables=[HEADER + row(0, 22, "0A") + row(1, 60016, "0A")])
    assert [f.severity for f in found] == ["ok"] and "60000-60015 are free" in found[0].message


def test_taken_port_is_an_error_with_a_free_base():
    tables = [HEADER + row(0, 60000, "0A") + row(1, 61000, "0A")]
    found = hccl.check_hccl_ports({}, tables=tables, ephemeral=(32768, 60999))
    assert [f.severity for f in found] == ["error"]
    assert "60000 listening" in found[0].message
    assert "HCCL_IF_BASE_PORT=61016" in found[0].fix  # 61000 is taken, so the next 16-port block


def test_base_from_env_and_bad_value_left_to_the_other_check():
    tables = [HEADER + row(0, 62010, "01")]
    found = hccl.check_hccl_ports({"HCCL_IF_BASE_PORT": "62000"}, tables=tables)
    assert found[0].severity == "error" and "62000-62015" in found[0].message
    assert hccl.check_hccl_ports({"HCCL_IF_BASE_PORT": "x"}, tables=tables) == []


def test_no_tables_is_a_skip():
    assert [f.severity for f in hccl.check_hccl_ports({}, tables=[])] == ["skip"]


def test_a_port_this_test_listens_on_is_seen_taken_in_this_hosts_real_tables():
    """The parser against the kernel's own table: a socket listening here must show up as taken
    ("0A", LISTEN), and the check must name it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        port = server.getsockname()[1]
        texts = hccl.read_tables()  # Linux (CI and every Ascend node) has them
        assert texts, "no /proc/net/tcp on this host"
        assert hccl.ports_in_use(texts).get(port) == "0A", port
        (taken,) = hccl.check_hccl_ports({"HCCL_IF_BASE_PORT": str(port)})
        assert taken.severity == "error" and f"{port} listening" in taken.message
    finally:
        server.close()


def states(findings):
    return {f.subject: f.severity for f in findings}


def test_port_base_paths():
    assert states(hccl.check_port_base({})) == {"hccl.if_base_port": "ok"}
    assert states(hccl.check_port_base({"HCCL_IF_BASE_PORT": "61000"}, (32768, 60999))) == {"hccl.if_base_port": "ok"}
    assert states(hccl.check_port_base({"HCCL_IF_BASE_PORT": "50000"}, (32768, 60999))) == {"hccl.if_base_port": "warning"}
    assert states(hccl.check_port_base({"HCCL_IF_BASE_PORT": "65530"})) == {"hccl.if_base_port": "error"}
    assert states(hccl.check_port_base({"HCCL_IF_BASE_PORT": "6e4"})) == {"hccl.if_base_port": "error"}


def test_timeout_paths():
    good = {"HCCL_CONNECT_TIMEOUT": "3600", "HCCL_EXEC_TIMEOUT": "3600"}
    assert states(hccl.check_timeouts(good, 16)) == {"hccl.connect_timeout": "ok", "hccl.exec_timeout": "ok"}
    assert states(hccl.check_timeouts({}, 16)) == {"hccl.connect_timeout": "warning", "hccl.exec_timeout": "warning"}
    assert states(hccl.check_timeouts({}, 1)) == {"hccl.connect_timeout": "ok", "hccl.exec_timeout": "ok"}
    low = {"HCCL_CONNECT_TIMEOUT": "60", "HCCL_EXEC_TIMEOUT": "0"}
    assert states(hccl.check_timeouts(low, 2)) == {"hccl.connect_timeout": "warning", "hccl.exec_timeout": "error"}
    (bad,) = hccl.check_connect_timeout({"HCCL_CONNECT_TIMEOUT": "1h", "HCCL_EXEC_TIMEOUT": "3600"}, 2)
    assert (bad.subject, bad.severity) == ("hccl.connect_timeout", "error") and "'1h'" in bad.message



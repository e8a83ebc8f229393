"""doctor: are HCCL's host ports free on this node (from /proc/net/tcp-style tables)."""

import pytest

from verl_ascend.doctor import ports

pytestmark = pytest.mark.verl_agnostic

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def row(n, port, state, ipv6=False):
    addr = ("00000000000000000000000000000000" if ipv6 else "00000000") + f":{port:04X}"
    return f"   {n}: {addr} {'0' * len(addr.split(':')[0])}:0000 {state} 00000000:00000000 00:00000000 00000000 0 0 123 1\n"


def test_parse_ports_and_states():
    v4 = HEADER + row(0, 60000, "0A") + row(1, 22, "0A") + row(2, 60003, "06")  # TIME_WAIT does not count
    v6 = HEADER + row(0, 60005, "01", ipv6=True)
    assert ports.ports_in_use([v4, v6]) == {60000: "0A", 22: "0A", 60005: "01"}


def test_free_range_is_ok():
    found = ports.check_hccl_ports({}, tables=[HEADER + row(0, 22, "0A") + row(1, 60016, "0A")])
    assert [f.severity for f in found] == ["ok"] and "60000-60015 are free" in found[0].message


def test_taken_port_is_an_error_with_a_free_base():
    tables = [HEADER + row(0, 60000, "0A") + row(1, 61000, "0A")]
    found = ports.check_hccl_ports({}, tables=tables, ephemeral=(32768, 60999))
    assert [f.severity for f in found] == ["error"]
    assert "60000 listening" in found[0].message
    assert "HCCL_IF_BASE_PORT=61016" in found[0].fix  # 61000 is taken, so the next 16-port block


def test_base_from_env_and_bad_value_left_to_the_other_check():
    tables = [HEADER + row(0, 62010, "01")]
    found = ports.check_hccl_ports({"HCCL_IF_BASE_PORT": "62000"}, tables=tables)
    assert found[0].severity == "error" and "62000-62015" in found[0].message
    assert ports.check_hccl_ports({"HCCL_IF_BASE_PORT": "x"}, tables=tables) == []


def test_no_tables_is_a_skip():
    assert [f.severity for f in ports.check_hccl_ports({}, tables=[])] == ["skip"]


def test_reads_this_hosts_real_tables():
    texts = ports.read_tables()  # Linux (CI and every Ascend node) has them
    assert texts is not None
    assert all(isinstance(p, int) for p in ports.ports_in_use(texts))

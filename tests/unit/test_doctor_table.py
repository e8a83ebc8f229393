"""doctor's CHECKS table is the one place a check id and a --skip group are named: docs/doctor.md's
table lists exactly its rows, no check module spells an id, each row's function emits only its id,
and the CLI's --skip takes its groups from it."""

import argparse
import ast
import re
from pathlib import Path

import pytest

from verl_ascend.doctor import checks
from verl_ascend.doctor.checks import CHECKS, GROUPS

pytestmark = pytest.mark.verl_agnostic

DOC = (Path(__file__).resolve().parents[2] / "docs" / "doctor.md").read_text()
DOCTOR = Path(checks.__file__).parent


def doc_rows() -> list:
    """(id, group) for every id in the first column of docs/doctor.md's check table."""
    table = DOC.split("| check | group | what it judges |", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in table.strip().splitlines()[1:]:
        first, group = [c.strip() for c in line.strip("|").split("|")[:2]]
        rows += [(check_id, group) for check_id in re.findall(r"`([^`]+)`", first)]
    return rows


def test_the_docs_table_lists_every_check_once_with_its_group():
    rows = doc_rows()
    assert len(rows) == len(set(rows)), [r for r in rows if rows.count(r) > 1]
    table = {(c.id, c.group) for c in CHECKS}
    assert set(rows) - table == set(), "rows in docs/doctor.md that are no check in doctor.checks.CHECKS"
    assert table - set(rows) == set(), "checks of doctor.checks.CHECKS missing from docs/doctor.md's table"


def test_the_docs_skip_option_lists_the_groups_of_the_table():
    listed = DOC.split("`--skip GROUP,...` leaves out groups (`", 1)[1].split("`", 1)[0]
    assert tuple(g.strip() for g in listed.split(",")) == GROUPS


def test_ids_are_unique_and_every_function_resolves():
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
    functions = [c.resolve() for c in CHECKS]
    assert len(set(functions)) == len(functions)  # one function judges one id: it names itself by it
    assert GROUPS == tuple(dict.fromkeys(c.group for c in CHECKS))


def test_no_doctor_module_spells_a_check_id():
    """Dotted ids nowhere outside the table; and no finding made with a literal subject (the bare ids
    `python`, `torch`, `torch_npu` are also package names, so those are found through the makers)."""
    dotted = {c.id for c in CHECKS if "." in c.id}
    spelled = []
    for path in sorted(DOCTOR.glob("*.py")):
        if path.name == "checks.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in dotted:
                spelled.append(f"{path.name}:{node.lineno} {node.value!r}")
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("ok", "warn", "error", "skip")
                    and node.args and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))):
                spelled.append(f"{path.name}:{node.lineno} {ast.unparse(node.args[0])}")
    assert spelled == []


def test_skip_takes_its_groups_from_the_table():
    from verl_ascend.commands import doctor as command

    assert command._groups("hccl,ray") == ["hccl", "ray"]
    with pytest.raises(argparse.ArgumentTypeError, match=f"choose from {', '.join(GROUPS)}"):
        command._groups("ports")


def test_a_skipped_group_runs_none_of_its_checks_and_reads_none_of_its_facts():
    """examine runs the table: with every group but hccl skipped, only hccl's ids come back, and npu-smi,
    the interfaces and verl's patch status are never read: the facts read are the two hccl asks for."""
    from verl_ascend.doctor.node import Node

    node = Node({"HCCL_IF_BASE_PORT": "61000"}, skipped=[g for g in GROUPS if g != "hccl"], nnodes=2,
                ephemeral=(32768, 60999), tcp_tables=[])
    found = [f for c in CHECKS if c.group not in node.skipped for f in c.judge(node)]
    assert [f.subject for f in found] == [c.id for c in CHECKS if c.group == "hccl"]
    assert {k for k in node._facts} == {"ephemeral", "tcp_tables"}  # nothing else was read
    assert {f.subject: f.severity for f in found} == {"hccl.connect_timeout": "warning", "hccl.exec_timeout": "warning",
                                                      "hccl.if_base_port": "ok", "hccl.ports_free": "skip"}

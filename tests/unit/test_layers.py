"""The package's shape: imports only go downwards, the start-up table matches the patches, every
patch and setting is documented where a user looks."""

import ast
import importlib
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "verl_ascend"
README = (PKG.parent / "README.md").read_text()

# Low to high. A module may import its own layer and the ones below, never above.
FEATURES = ("check", "ckpt", "convert", "data", "diagnose", "diffs", "doctor", "logs", "rehearse", "supervise")
# recipe/ is read by three features (check, ckpt check --recipe, rehearse): a layer of its own below them; proc/ (a
# run's processes: marked, namespaced, ended, followed) serves rehearse and supervise the same way
LAYERS = {"core": 0, "patches": 1, "recipe": 2, "proc": 2, **{f: 3 for f in FEATURES}, "commands": 4, "cli": 5,
          "__main__": 5, "plugin": 5}


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "verl_ascend":
        raise ValueError(module)
    if len(parts) == 1:
        return 0  # the package itself: a docstring and __version__
    return LAYERS[parts[1]]


def imported(module: str, source: str, is_package: bool) -> set:
    """verl_ascend modules imported anywhere in ``source`` (function bodies included)."""
    found = set()
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "verl_ascend"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "verl_ascend":
                continue
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names if (PKG.parent / f"{target}.{a.name}".replace(".", "/")).exists()
                      or (PKG.parent / (f"{target}.{a.name}".replace(".", "/") + ".py")).exists()}
    return found


def violations(module: str, source: str, is_package: bool = False) -> list:
    mine = layer_of(module)
    return [f"{module} (layer {mine}) imports {other} (layer {layer_of(other)})"
            for other in sorted(imported(module, source, is_package)) if layer_of(other) > mine]


def all_modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        yield ".".join(parts), path.read_text(), is_package


def test_no_module_imports_a_higher_layer():
    found = [v for m, src, pkg in all_modules() for v in violations(m, src, pkg)]
    assert found == []


# Features are side by side; one uses another only where it runs that feature's own job as a step of its own
# (rehearse prepares gsm8k, converts the tiny model, prints the logs report and reads step lines with its
# parser; diagnose reads the last step line with that parser). Anything both need otherwise lives in a lower
# layer (recipe/, core/): rehearse once reached into check/ for a helper.
FEATURE_USES = {("rehearse", "data"), ("rehearse", "logs"), ("rehearse", "convert"), ("diagnose", "logs"),
                # supervise decides from diagnose's answer, checks and syncs checkpoints, reads step lines, asks Ray
                # for its nodes as doctor does; a rehearsal runs its training under supervise (rehearse --supervise)
                ("supervise", "diagnose"), ("supervise", "ckpt"), ("supervise", "logs"), ("supervise", "doctor"),
                ("rehearse", "supervise")}


def feature_imports(module: str, source: str, is_package: bool = False) -> set:
    mine = module.split(".")[1] if module.count(".") else ""
    return {(mine, other.split(".")[1]) for other in imported(module, source, is_package)
            if mine in FEATURES and other.count(".") and other.split(".")[1] in FEATURES and other.split(".")[1] != mine}


def test_a_feature_uses_another_only_as_a_step_of_its_own():
    found = set().union(*(feature_imports(m, src, pkg) for m, src, pkg in all_modules()))
    assert found - FEATURE_USES == set()
    # the checker can fail: rehearse reaching into check's helpers
    assert feature_imports("verl_ascend.rehearse.rehearsal", "from verl_ascend.check.bridge import importable\n") \
        == {("rehearse", "check")}


def import_cycles(modules) -> list:
    """Sets of modules that import each other in a circle (function-level imports included). ``modules``:
    (name, source, is_package). An import of a module's own parent package is not an edge: Python runs a
    package's ``__init__`` before any of its modules, whoever imports them, so it cannot close a circle of ours."""
    sources = {m: (src, pkg) for m, src, pkg in modules}
    graph = {}
    for name, (src, pkg) in sources.items():
        ancestors = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
        graph[name] = {t for t in imported(name, src, pkg) if t in sources and t != name and t not in ancestors}
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):  # Tarjan: each strongly connected set of more than one module is a circle
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            members = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.add(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_anywhere_in_the_package():
    assert import_cycles(all_modules()) == []
    # the check can fail: the circle rehearse/ once had (cluster -> inloop -> multinode -> cluster), in small
    circle = [("verl_ascend.rehearse.a", "import verl_ascend.rehearse.b\n", False),
              ("verl_ascend.rehearse.b", "def f():\n    from verl_ascend.rehearse.c import x\n", False),
              ("verl_ascend.rehearse.c", "from .a import y\n", False)]
    assert import_cycles(circle) == [["verl_ascend.rehearse.a", "verl_ascend.rehearse.b", "verl_ascend.rehearse.c"]]
    # a module importing its own package's siblings through the package is not a circle
    assert import_cycles([("verl_ascend.check", "from .report import run\n", True),
                          ("verl_ascend.check.report", "from . import rules\n", False),
                          ("verl_ascend.check.rules", "", False)]) == []


def test_the_layer_check_catches_an_upward_import():
    # the checker itself must be able to fail: core reaching into a feature, a patch into a command,
    # relative and function-level forms included
    assert violations("verl_ascend.core.platform", "def f():\n    from verl_ascend.check import rules\n")
    assert violations("verl_ascend.patches.device", "from ..commands import status\n")
    assert violations("verl_ascend.logs.parse", "import verl_ascend.commands.logs\n")
    assert not violations("verl_ascend.commands.logs", "from verl_ascend.logs import parse\nfrom ..core import outfiles\n")
    # the recipe layer serves check, ckpt and rehearse and knows none of them
    assert violations("verl_ascend.recipe.compose", "from verl_ascend.check import rules\n")
    assert not violations("verl_ascend.ckpt.recipe", "from ..recipe.layout import get\n")


def test_every_subpackage_has_a_layer():
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PKG.glob("*.py")} - {"__init__"}
    assert packages | modules <= set(LAYERS)


def test_startup_table_matches_the_patch_records():
    from verl_ascend.core import activation

    records = activation.records()  # each from the module the table names: a missing record fails here
    assert [r.name for r in records] == list(activation.PATCHES)
    for record in records:
        _, targets = activation.PATCHES[record.name]
        assert tuple(record.targets) == targets, record.name


@pytest.mark.parametrize("name", [n for n in __import__("verl_ascend.core.activation", fromlist=["x"]).PATCHES])
def test_every_patch_documents_why_how_upstream_and_removal(name):
    from verl_ascend.core import activation

    doc = importlib.import_module(activation.PATCHES[name][0]).__doc__ or ""
    for part in ("Why:", "How:", "Upstream:", "Remove when:"):
        assert part in doc, f"{name}: docstring lacks {part!r}"
    if name.startswith("rehearse_"):
        assert name in README  # listed under the rehearsal, not in the runtime table
    else:
        assert re.search(rf"^\| `{name}` \|", README, re.M), f"{name} has no row in README's patch table"


def test_every_setting_is_in_the_readme_table():
    from verl_ascend.core import settings

    for setting in settings.TABLE:
        assert re.search(rf"^\| `{setting.name}` \|", README, re.M), setting.name


def test_ci_runs_exactly_the_readmes_test_command():
    readme_block = README.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in readme_block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands  # set up + main job, then the tests
    ci = [line for line in (PKG.parent / ".ci" / "run").read_text().splitlines() if line.startswith("dev/")]
    assert ci == [commands[1]]


def test_every_command_module_is_argparse_and_one_run():
    # the one convention: register(sub) declares the arguments, run(args) -> int calls the feature's run
    import argparse

    from verl_ascend import cli

    for name in cli.COMMANDS:
        path = PKG / "commands" / f"{name}.py"
        module = importlib.import_module(f"verl_ascend.commands.{name}")
        assert callable(getattr(module, "register", None)) and callable(getattr(module, "run", None)), name
        assert len(path.read_text().splitlines()) <= 80, f"commands/{name}.py is over 80 lines: the work belongs in its feature"
        sub = argparse.ArgumentParser().add_subparsers()
        module.register(sub)
        parsers = list(sub.choices.values())
        leaves = [p for p in parsers if not p._subparsers] + [c for p in parsers if p._subparsers
                                                               for a in p._subparsers._group_actions
                                                               for c in a.choices.values()]
        assert leaves and all(p.get_default("func") is module.run for p in leaves), name


def test_test_files_have_unique_names():
    # pytest imports test files by their basename (rootdir-relative, no packages): a name used in two
    # folders fails collection in the full run while each folder alone passes
    names = {}
    for path in sorted((PKG.parent / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(PKG.parent)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}


LONG = 420  # "~400 lines": a module longer than this says why at its top


def long_without_reason(modules) -> list:
    """Modules over LONG lines whose docstring does not say why they are one module (a line "One module: ...")."""
    import ast as _ast

    found = []
    for name, source, _ in modules:
        lines = source.count("\n") + 1
        doc = _ast.get_docstring(_ast.parse(source)) or ""
        if lines > LONG and "One module:" not in doc:
            found.append(f"{name} ({lines} lines)")
    return found


def test_no_module_over_400_lines_without_a_reason_at_its_top():
    assert long_without_reason(all_modules()) == []
    # the check can fail, and a reason quiets it
    body = "x = 1\n" * (LONG + 5)
    assert long_without_reason([("verl_ascend.big", '"""Big."""\n' + body, False)]) == ["verl_ascend.big (427 lines)"]
    assert long_without_reason([("verl_ascend.big", '"""Big.\n\nOne module: why.\n"""\n' + body, False)]) == []

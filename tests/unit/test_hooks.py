"""core.hooks in this process: callbacks run after a module's body and before its import returns,
the loader keeps its type, and uninstall() forgets a test's own module names.

Each test hooks modules of its own (written to tmp_path) and the fixture takes them out of the
finder and of sys.modules afterwards, so the pytest worker keeps only what the .pth armed.
"""

import sys
from importlib.machinery import SourceFileLoader

import pytest

from verl_ascend.core import hooks

pytestmark = pytest.mark.verl_agnostic


@pytest.fixture
def own_modules(tmp_path, monkeypatch):
    """(write(name, source), names used): modules on a private path, forgotten by hooks and sys.modules after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def write(name: str, source: str) -> None:
        path = tmp_path.joinpath(*name.split("."))
        if name.count("."):
            for parent in path.parents:
                if parent == tmp_path:
                    break
                parent.mkdir(exist_ok=True)
                (parent / "__init__.py").touch()
        path.with_suffix(".py").write_text(source)
        names.append(name)

    yield write, names
    hooks.uninstall(names + sorted({n.split(".")[0] for n in names}))
    for name in list(sys.modules):
        if name.split(".")[0] in {n.split(".")[0] for n in names}:
            sys.modules.pop(name)
    assert not set(names) & set(hooks.pending_targets())


def test_callback_runs_after_the_body_and_before_import_returns(own_modules):
    write, _ = own_modules
    write("va_hook_pkg.target", "VALUE = 1\n")
    write("va_hook_pkg.user", "from va_hook_pkg.target import VALUE\n")
    seen = []

    def callback(module):
        seen.append(module.VALUE)
        module.VALUE = 2

    hooks.when_imported("va_hook_pkg.target", callback)
    import va_hook_pkg.user as user

    assert seen == [1]
    assert user.VALUE == 2  # the copy made by `from ... import` already sees the patched value
    hooks.when_imported("va_hook_pkg.target", callback)  # already imported: runs at once
    assert seen == [1, 2]


def test_loader_keeps_its_type_for_tracebacks(own_modules):
    write, _ = own_modules
    write("va_hook_mod", "def f():\n    return 1\n")
    hooks.when_imported("va_hook_mod", lambda module: None)
    import va_hook_mod

    assert isinstance(va_hook_mod.__loader__, SourceFileLoader)
    assert "return 1" in va_hook_mod.__loader__.get_source("va_hook_mod")


def test_uninstall_forgets_the_names_and_their_callbacks_never_run(own_modules):
    write, _ = own_modules
    write("va_hook_gone", "VALUE = 1\n")
    seen = []
    hooks.when_imported("va_hook_gone", seen.append)
    hooks.before_import("va_hook_gone", seen.append)
    assert "va_hook_gone" in hooks.pending_targets()
    hooks.uninstall(["va_hook_gone"])
    assert "va_hook_gone" not in hooks.pending_targets()
    import va_hook_gone  # noqa: F401

    assert seen == []

"""Post-import hook: run callbacks right after a named module has executed, once per process.

A patch must land before any other module copies names out of its target (``from x import f``),
so the callback runs between the target's execution and the return of its import. This is done
with a ``sys.meta_path`` finder that asks the remaining finders for the spec and wraps the
loader's ``exec_module`` on that spec only. Modules that are already imported get their callbacks
at registration.
"""

import sys
import threading
from importlib.abc import MetaPathFinder

_lock = threading.RLock()
_callbacks: dict[str, list] = {}
_resolving: set[str] = set()


def _run(fullname: str, module) -> None:
    with _lock:
        pending = _callbacks.pop(fullname, [])
    for callback in pending:
        callback(module)  # callbacks guard themselves; see registry.apply_to


class _PostImportFinder(MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _callbacks or fullname in _resolving:
            return None
        _resolving.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            _resolving.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        _wrap_exec_module(spec.loader, fullname)
        return spec


def _wrap_exec_module(loader, fullname: str) -> None:
    original = loader.exec_module

    def exec_module(module):
        original(module)
        _run(fullname, module)

    if isinstance(loader, type):  # class-level loaders (builtin, frozen) are shared: leave them
        return
    # An instance attribute shadows the class method, so the loader keeps its type and every other
    # method (get_source for tracebacks, is_package, ...) untouched.
    loader.exec_module = exec_module


_finder = _PostImportFinder()


def install() -> None:
    with _lock:
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def when_imported(fullname: str, callback) -> None:
    """Call ``callback(module)`` once ``fullname`` is imported (now, if it already is)."""
    install()
    with _lock:
        module = sys.modules.get(fullname)
        if module is None:
            _callbacks.setdefault(fullname, []).append(callback)
            return
    callback(module)


def pending_targets() -> list[str]:
    with _lock:
        return sorted(_callbacks)

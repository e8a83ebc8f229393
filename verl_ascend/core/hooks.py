"""Post-import hook: run callbacks right after a named module has executed, once per process.

A patch must land before any other module copies names out of its target (``from x import f``),
so the callback runs between the target's execution and the return of its import. This is done
with a ``sys.meta_path`` finder that asks the remaining finders for the spec and wraps the
loader's ``exec_module`` on that spec only. Modules that are already imported get their callbacks
at registration.

``before_import`` is the mirror image: its callbacks run when the import system first looks for a
module, before any of its code runs (used to import a library's adaptor ahead of the library).
"""

import _thread
import sys

# Imported by the .pth in every Python process: builtins only (importlib.abc alone costs ~20 ms via
# importlib.resources); the finder and loader below follow the importlib protocols without its ABCs.
_lock = _thread.RLock()
_callbacks: dict[str, list] = {}
_before: dict[str, list] = {}
_resolving: set[str] = set()


def _run(fullname: str, module) -> None:
    # A callback may register more for the same module (the activation, run from the first target
    # to finish importing, installs the patches of that very target): run those too.
    while True:
        with _lock:
            pending = _callbacks.pop(fullname, [])
        if not pending:
            return
        for callback in pending:
            callback(module)  # callbacks guard themselves; see registry.apply_to


class _AlreadyImported:
    """Hands the import system a module that a before-import callback imported meanwhile.

    Without it the import in progress would execute the module a second time.
    """

    def __init__(self, module):
        self.module = module
        self.real_spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        if self.real_spec is not None:  # the import system stamped our spec on it
            module.__spec__ = self.real_spec


def _run_before(fullname: str):
    """Run before-import callbacks; return a spec when they imported ``fullname`` themselves."""
    with _lock:
        pending = _before.pop(fullname, [])
    for callback in pending:
        callback(None)
    module = sys.modules.get(fullname) if pending else None
    if module is None:
        return None
    import importlib.util

    spec = importlib.util.spec_from_loader(fullname, _AlreadyImported(module), is_package=hasattr(module, "__path__"))
    # The import system answers with the module's own __spec__ when the module appeared during the
    # search, and would then execute that spec again; lend it ours until exec_module gives it back.
    module.__spec__ = spec
    return spec


class _PostImportFinder:
    def find_spec(self, fullname, path=None, target=None):
        if fullname in _before and fullname not in _resolving:
            spec = _run_before(fullname)
            if spec is not None:
                return spec
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


def _initializing(module) -> bool:
    """True while the module's own code is still running (importlib marks its spec meanwhile)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _register(table: dict, fullname: str, callback) -> None:
    install()
    with _lock:
        module = sys.modules.get(fullname)
        # A module still executing (a package whose submodule's import triggered the activation) is
        # not ready: its callbacks wait for the end of its exec_module, which the finder wrapped.
        if module is None or (table is _callbacks and _initializing(module)):
            table.setdefault(fullname, []).append(callback)
            return
    callback(module)


def when_imported(fullname: str, callback) -> None:
    """Call ``callback(module)`` once ``fullname`` is imported (now, if it already is)."""
    _register(_callbacks, fullname, callback)


def before_import(fullname: str, callback) -> None:
    """Call ``callback(None)`` just before ``fullname`` is first imported, once per process.

    If it is already imported, ``callback(module)`` runs at once: the callback learns it is too late.
    The callback may import ``fullname`` itself (an adaptor that patches its target does).
    """
    _register(_before, fullname, callback)


def uninstall(names=None) -> None:
    """Forget the callbacks waiting for ``names`` (every one when None); once none waits, take the
    finder out of ``sys.meta_path``. For tests that hook modules of their own in a shared process."""
    with _lock:
        for table in (_callbacks, _before):
            for name in list(table) if names is None else names:
                table.pop(name, None)
        if not (_callbacks or _before) and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)


def pending_targets() -> list[str]:
    with _lock:
        return sorted(set(_callbacks) | set(_before))

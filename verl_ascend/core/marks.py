"""Small helpers shared by patch modules: marking wrappers so a second apply is a no-op.

The only place the mark is spelled: every patch asks :func:`is_wrapped` and sets it through
:func:`wrap` or, for a replacement it installs some other way (rebinding module globals, a closure
cell), :func:`mark`.
"""

import functools
import inspect

_MARK = "__verl_ascend_patch__"


def is_wrapped(func, name: str) -> bool:
    """True when ``func`` is a wrapper or replacement that patch ``name`` made."""
    return getattr(func, _MARK, None) == name


def mark(func, name: str):
    """Tag ``func`` as made by patch ``name`` (what :func:`wrap` does to its wrappers); returns it."""
    setattr(func, _MARK, name)
    return func


def _descriptor(owner, attr: str):
    """The ``staticmethod``/``classmethod`` object when a class holds ``attr`` as one (itself or by inheritance),
    else None.

    Read through ``getattr`` such a method loses its kind (a plain function, a method bound to the class);
    set back as it was read, an instance call would pass itself where the method takes none or the class.
    """
    if not isinstance(owner, type):
        return None
    raw = inspect.getattr_static(owner, attr, None)
    return raw if isinstance(raw, (staticmethod, classmethod)) else None


def wrap(owner, attr: str, name: str, make_wrapper) -> bool:
    """Replace ``owner.attr`` with ``make_wrapper(original)`` unless this patch already did.

    Returns True when it replaced something. The original stays reachable as ``__wrapped__``. A
    ``staticmethod`` or ``classmethod`` stays one: ``make_wrapper`` gets the function inside (for a
    classmethod, called with the class first, as a method is called with the instance first).
    """
    raw = _descriptor(owner, attr)
    original = raw.__func__ if raw else getattr(owner, attr)
    if is_wrapped(original, name):
        return False
    wrapper = make_wrapper(original)
    functools.update_wrapper(wrapper, original)
    mark(wrapper, name)
    setattr(owner, attr, type(raw)(wrapper) if raw else wrapper)
    return True


def unwrap(owner, attr: str, name: str) -> bool:
    raw = _descriptor(owner, attr)
    current = raw.__func__ if raw else getattr(owner, attr, None)
    if current is None or not is_wrapped(current, name):
        return False
    setattr(owner, attr, type(raw)(current.__wrapped__) if raw else current.__wrapped__)
    return True


def method_patch(name: str, target: str, owner: str, attr: str, make_wrapper, said: str) -> tuple:
    """(apply, revert) of a patch that wraps one method: ``apply(module)`` wraps ``module.<owner>.<attr>`` with
    ``make_wrapper`` and returns ``said`` (the status detail); ``revert()`` puts the original back in this process."""
    import sys

    def apply(module):
        wrap(getattr(module, owner), attr, name, make_wrapper)
        return said

    def revert() -> None:
        cls = getattr(sys.modules.get(target), owner, None)
        if cls is not None:
            unwrap(cls, attr, name)

    return apply, revert

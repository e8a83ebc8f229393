"""Small helpers shared by patch modules: marking wrappers so a second apply is a no-op."""

import functools

MARK = "__verl_ascend_patch__"


def is_wrapped(func, name: str) -> bool:
    return getattr(func, MARK, None) == name


def wrap(owner, attr: str, name: str, make_wrapper) -> bool:
    """Replace ``owner.attr`` with ``make_wrapper(original)`` unless this patch already did.

    Returns True when it replaced something. The original stays reachable as ``__wrapped__``.
    """
    original = getattr(owner, attr)
    if is_wrapped(original, name):
        return False
    wrapper = make_wrapper(original)
    functools.update_wrapper(wrapper, original)
    setattr(wrapper, MARK, name)
    setattr(owner, attr, wrapper)
    return True


def unwrap(owner, attr: str, name: str) -> bool:
    current = getattr(owner, attr, None)
    if current is None or not is_wrapped(current, name):
        return False
    setattr(owner, attr, current.__wrapped__)
    return True

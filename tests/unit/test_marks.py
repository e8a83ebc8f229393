"""core.marks: a wrapped method keeps its kind, a second wrap is a no-op, unwrap restores the original."""

from verl_ascend.core.marks import is_wrapped, unwrap, wrap


def _calls(original):
    def wrapper(*args, **kwargs):
        return ("wrapped", original(*args, **kwargs))

    return wrapper


class Base:
    def method(self, x):
        return (type(self).__name__, x)

    @staticmethod
    def static(x):
        return x * 2

    @classmethod
    def klass(cls, x):
        return (cls.__name__, x)


def _fresh():
    class Owner(Base):
        pass

    return Owner


def test_static_and_class_methods_stay_what_they_were_through_class_and_instance():
    owner = _fresh()
    for attr in ("method", "static", "klass"):
        assert wrap(owner, attr, "t", _calls) is True
    assert owner().method(1) == ("wrapped", ("Owner", 1))
    assert owner.static(2) == ("wrapped", 4) and owner().static(2) == ("wrapped", 4)
    assert owner.klass(3) == ("wrapped", ("Owner", 3)) and owner().klass(3) == ("wrapped", ("Owner", 3))
    assert isinstance(owner.__dict__["static"], staticmethod) and isinstance(owner.__dict__["klass"], classmethod)


def test_second_wrap_is_a_no_op_and_unwrap_restores_the_kind():
    owner = _fresh()
    assert wrap(owner, "klass", "t", _calls) and wrap(owner, "klass", "t", _calls) is False
    assert owner.klass(1) == ("wrapped", ("Owner", 1))  # wrapped once
    assert is_wrapped(owner.klass, "t")
    assert unwrap(owner, "klass", "t") is True
    assert owner.klass(1) == ("Owner", 1) and isinstance(owner.__dict__["klass"], classmethod)
    assert unwrap(owner, "klass", "t") is False
    assert wrap(owner, "static", "t", _calls) and unwrap(owner, "static", "t")
    assert owner().static(3) == 6 and isinstance(owner.__dict__["static"], staticmethod)


def test_module_functions_are_wrapped_as_before():
    import types

    module = types.ModuleType("m")
    module.f = lambda x: x + 1
    assert wrap(module, "f", "t", _calls) and module.f(1) == ("wrapped", 2)
    assert unwrap(module, "f", "t") and module.f(1) == 2

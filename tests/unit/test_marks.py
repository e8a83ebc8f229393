"""core.marks: a wrapped method keeps its kind, a second wrap is a no-op, unwrap restores the original."""

import types

import pytest

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


# The rehearsal's wrappers of static and class methods go through wrap/unwrap too (rehearse/).


def test_type_name_scope_keeps_static_and_class_methods_and_wraps_once():
    from verl_ascend.rehearse.loop.mcore import host

    class Optimizer:  # megatron's DistributedOptimizer holds a staticmethod among its type checks
        @staticmethod
        def static():
            return host._scope.depth

        @classmethod
        def klass(cls):
            return cls.__name__, host._scope.depth

        def method(self):
            return host._scope.depth

    for attr in ("static", "klass", "method"):
        host._scope_one(Optimizer, attr)
        host._scope_one(Optimizer, attr)  # a second apply: no second scope
    assert Optimizer.static() == Optimizer().static() == 1
    assert Optimizer.klass() == Optimizer().klass() == ("Optimizer", 1)
    assert Optimizer().method() == 1
    assert isinstance(Optimizer.__dict__["static"], staticmethod) and isinstance(Optimizer.__dict__["klass"], classmethod)
    assert all(unwrap(Optimizer, attr, "rehearse_mcore_optimizer") for attr in ("static", "klass", "method"))
    assert getattr(host._scope, "depth", 0) == 0 and Optimizer.static() == 0


def test_megatron_torch_norm_new_stays_a_staticmethod_and_takes_sequence_parallel():
    torch_norm = pytest.importorskip("megatron.core.transformer.torch_norm")
    from verl_ascend.rehearse.loop.mcore import fixes

    cls = torch_norm.WrappedTorchNorm
    stock = cls.__dict__["__new__"]
    config = types.SimpleNamespace(sequence_parallel=True, layernorm_zero_centered_gamma=False, persist_layer_norm=False,
                                   memory_efficient_layer_norm=False, normalization="LayerNorm")
    try:
        fixes.norm_with_sequence_parallel(torch_norm)
        fixes.norm_with_sequence_parallel(torch_norm)
        now = cls.__dict__["__new__"]
        assert isinstance(now, staticmethod) and now.__func__.__wrapped__ is stock.__func__  # wrapped once
        norm = cls(config, 8)
        assert config.sequence_parallel is True  # hidden only while building
        assert [p.sequence_parallel for p in norm.parameters()] == [True, True]
    finally:
        assert unwrap(cls, "__new__", "rehearse_mcore_norm")
    with pytest.raises(AssertionError, match="sequence parallel"):  # megatron's own refuses it again
        cls(config, 8)


def test_verl_engine_registry_lookup_stays_a_classmethod_and_says_the_engine_once(monkeypatch, capsys):
    base = pytest.importorskip("verl.workers.engine.base")
    if not hasattr(base, "EngineRegistry"):
        pytest.skip("this verl has no EngineRegistry")
    from verl_ascend.rehearse.loop import report as inloop

    class Registry(base.EngineRegistry):  # verl's lookup, inherited, over an engine table of its own
        _engines = {}

    @Registry.register("language_model", "toy", device="cpu")
    class ToyEngine(base.BaseEngine):
        pass

    monkeypatch.setenv("VERL_ENGINE_DEVICE", "cpu")
    module = types.SimpleNamespace(EngineRegistry=Registry)
    assert inloop.watch_engines(module) == "EngineRegistry says which engine class each worker builds"
    assert inloop.watch_engines(module) == "EngineRegistry already watched"
    assert isinstance(Registry.__dict__["get_engine_cls"], classmethod)
    assert Registry.get_engine_cls("language_model", "toy") is ToyEngine
    assert Registry().get_engine_cls("language_model", "toy") is ToyEngine
    said = [line for line in capsys.readouterr().out.splitlines() if "ToyEngine" in line]
    assert len(said) == 1 and said[0].endswith("for language_model/toy")
    assert not is_wrapped(vars(base.EngineRegistry)["get_engine_cls"].__func__, "rehearse_report")  # verl's own class untouched

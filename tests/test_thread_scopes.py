"""The class-level scopes MXNet scripts read and assign (``AttrScope.current``,
``NameManager.current``, ``Context.default_ctx``) are per thread."""

from __future__ import annotations

import threading

import pytest
import rsmx as mx
from rsmx.attribute import AttrScope
from rsmx.context import Context
from rsmx.name import NameManager


def _in_thread(fn):
    """Runs `fn` on a new thread and returns what it returned."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


@pytest.fixture(autouse=True)
def _fresh_scopes():
    yield
    AttrScope.current = AttrScope()
    NameManager.current = NameManager()
    Context.default_ctx = mx.cpu(0)


def test_assigned_scopes_stay_on_their_thread():
    AttrScope.current = AttrScope(group="main")
    NameManager.current = NameManager()
    NameManager.current.get(None, "main")
    Context.default_ctx = mx.cpu(3)

    def spawned():
        AttrScope.current = AttrScope(group="spawned")
        return AttrScope.current._attr, dict(NameManager.current._counter), Context.default_ctx

    attrs, counter, ctx = _in_thread(spawned)
    assert attrs == {"group": "spawned"}
    assert counter == {}
    assert ctx == mx.cpu(0)
    assert AttrScope.current._attr == {"group": "main"}
    assert "main" in NameManager.current._counter
    assert Context.default_ctx == mx.cpu(3)
    assert mx.nd.zeros((1,)).context == mx.cpu(3)


def test_assigned_scopes_reach_new_symbols():
    AttrScope.current = AttrScope(ctx_group="dev1")
    NameManager.current = mx.name.Prefix("net_")
    sym = mx.sym.FullyConnected(mx.sym.var("x"), num_hidden=2)
    assert sym.name == "net_fullyconnected0"
    assert sym.attr("ctx_group") == "dev1"


def test_with_blocks_restore_and_symbols_build_on_threads():
    with AttrScope(a="1"):
        with AttrScope(b="2"):
            assert AttrScope.current._attr == {"a": "1", "b": "2"}
        assert AttrScope.current._attr == {"a": "1"}
    assert AttrScope.current._attr == {}

    def bind_and_run():
        a, b = mx.sym.var("a"), mx.sym.var("b")
        ex = (a + b).bind(mx.cpu(), args={"a": mx.nd.ones((2,)), "b": mx.nd.ones((2,))})
        return ex.forward()[0].asnumpy().tolist()

    assert _in_thread(bind_and_run) == [2.0, 2.0]


def test_a_class_property_without_setter_cannot_be_assigned():
    from rsmx._classproperty import ClassPropertyMeta, classproperty

    class Fixed(metaclass=ClassPropertyMeta):
        @classproperty
        def value(cls):
            return 1

    assert Fixed.value == 1
    with pytest.raises(AttributeError, match="Fixed.value cannot be set"):
        Fixed.value = 2

"""Operator namespaces (``mx.nd.contrib``, ``mx.sym.linalg``...) and the contrib functions."""

import types

import numpy as np
import pytest
import rsmx as mx
from rsmx import _core, _namespaces
from rsmx.ndarray.register import register_namespace as nd_register_namespace
from rsmx.symbol.register import register_namespace as sym_register_namespace

NAMESPACE_MODULES = [
    ("contrib", mx.nd.contrib, mx.sym.contrib),
    ("linalg", mx.nd.linalg, mx.sym.linalg),
    ("image", mx.nd.image, mx.sym.image),
]


@pytest.mark.parametrize("namespace,nd_module,sym_module", NAMESPACE_MODULES)
def test_every_prefixed_operator_is_in_its_namespace(namespace, nd_module, sym_module):
    prefix = f"_{namespace}_"
    for name, aliases, *_ in _core.list_ops():
        for n in (name, *aliases):
            if n.startswith(prefix):
                short = n[len(prefix):]
                assert callable(getattr(nd_module, short)), n
                assert callable(getattr(sym_module, short)), n
    assert nd_module.__name__ == f"rsmx.ndarray.{namespace}"
    assert sym_module.__name__ == f"rsmx.symbol.{namespace}"


def test_contrib_aliases():
    assert mx.contrib.nd is mx.contrib.ndarray
    assert mx.contrib.sym is mx.contrib.symbol
    for name, aliases, *_ in _core.list_ops():
        for n in (name, *aliases):
            if n.startswith("_contrib_"):
                assert hasattr(mx.contrib.ndarray, n[len("_contrib_"):])


def _with_fake_ops(monkeypatch, *entries):
    real = _core.list_ops()
    monkeypatch.setattr(_namespaces._core, "list_ops", lambda: real + list(entries))


def test_prefixed_operators_are_generated(monkeypatch):
    # An alias in the namespace of an operator the core has: its functions run that one.
    copy = next(e for e in _core.list_ops() if e[0] == "_copy")
    _with_fake_ops(monkeypatch, ("_copy", ["_contrib_twin", "_linalg_twin"], *copy[2:]))
    nd_module = types.ModuleType("nd_fake")
    nd_register_namespace(nd_module, "contrib")
    assert "twin" in nd_module.__all__
    x = mx.nd.array([1.0, -2.0])
    np.testing.assert_array_equal(nd_module.twin(x).asnumpy(), [1.0, -2.0])
    assert nd_module.twin.__name__ == "twin"
    assert nd_module.twin.__module__ == "nd_fake"

    sym_module = types.ModuleType("sym_fake")
    sym_register_namespace(sym_module, "linalg")
    s = sym_module.twin(mx.sym.var("a"))
    assert s.name == "twin0"
    assert json_ops(s) == ["null", "_copy"]
    np.testing.assert_array_equal(s.eval(a=x)[0].asnumpy(), [1.0, -2.0])


def test_python_functions_win_over_operators(monkeypatch):
    copy = next(e for e in _core.list_ops() if e[0] == "_copy")
    _with_fake_ops(monkeypatch, ("_copy", ["_contrib_isinf"], *copy[2:]))
    module = types.ModuleType("fake")

    def isinf(data):
        return "python"

    module.isinf = isinf
    nd_register_namespace(module, "contrib")
    assert module.isinf(None) == "python"


def json_ops(sym):
    import json

    return [n["op"] for n in json.loads(sym.tojson())["nodes"]]


def test_isinf_isnan_isfinite():
    data = mx.nd.array([np.inf, -np.inf, np.nan, 5.0, 0.0])
    np.testing.assert_array_equal(mx.nd.contrib.isinf(data).asnumpy(), [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(mx.nd.contrib.isnan(data).asnumpy(), [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(mx.nd.contrib.isfinite(data).asnumpy(), [0, 0, 0, 1, 1])


def test_foreach_stacks_outputs_and_carries_states():
    data = mx.nd.arange(6).reshape((3, 2))

    def step(row, states):
        return [row * 2, row + states[0]], [states[0] + row]

    (doubled, summed), states = mx.nd.contrib.foreach(step, data, [mx.nd.zeros(2)])
    np.testing.assert_array_equal(doubled.asnumpy(), np.arange(6).reshape(3, 2) * 2)
    np.testing.assert_array_equal(summed.asnumpy(), [[0, 1], [2, 4], [6, 9]])
    np.testing.assert_array_equal(states[0].asnumpy(), [6, 9])


def test_foreach_over_several_arrays():
    a, b = mx.nd.ones((2, 3)), mx.nd.arange(6).reshape((2, 3))
    out, states = mx.nd.contrib.foreach(lambda xs, s: (xs[0] + xs[1], s), [a, b], [])
    np.testing.assert_array_equal(out.asnumpy(), np.arange(6).reshape(2, 3) + 1)
    assert states == []


def test_while_loop_pads_to_max_iterations():
    def cond(i, s):
        return i <= 5

    def func(i, s):
        return [i + s], [i + 1, s + i]

    loop_vars = (mx.nd.array([0], dtype="int64"), mx.nd.array([1], dtype="int64"))
    outputs, (i, s) = mx.nd.contrib.while_loop(cond, func, loop_vars, max_iterations=10)
    assert outputs[0].shape == (10, 1)
    np.testing.assert_array_equal(outputs[0].asnumpy()[:6, 0], [1, 2, 4, 7, 11, 16])
    assert i.asscalar() == 6 and s.asscalar() == 16


def test_while_loop_checks_its_arguments():
    one = mx.nd.ones(1)
    with pytest.raises(ValueError, match="max_iterations"):
        mx.nd.contrib.while_loop(lambda x: x < 3, lambda x: (x, x + 1), [one])
    with pytest.raises(ValueError, match="consistent"):
        mx.nd.contrib.while_loop(lambda x: x < 3, lambda x: (x, [x, x]), [one], 5)
    outputs, final = mx.nd.contrib.while_loop(lambda x: x < 0, lambda x: (x, x), one, 4)
    assert outputs == [] and final is one


def test_cond_picks_a_branch():
    a, b = mx.nd.array([1]), mx.nd.array([2])
    taken = mx.nd.contrib.cond(a * b < 5, lambda: (a + 5) * (b + 5), lambda: (a - 5) * (b - 5))
    assert taken.asscalar() == 42
    other = mx.nd.contrib.cond(a * b > 5, lambda: a, lambda: b)
    assert other is b


def test_rand_zipfian():
    true_classes = mx.nd.array([3, 4])
    sampled, count_true, count_sampled = mx.nd.contrib.rand_zipfian(true_classes, 50, 10)
    assert sampled.shape == (50,) and sampled.dtype == np.int64
    assert ((sampled.asnumpy() >= 0) & (sampled.asnumpy() < 10)).all()
    expected = np.log((np.array([3, 4]) + 2.0) / (np.array([3, 4]) + 1.0)) / np.log(11) * 50
    np.testing.assert_allclose(count_true.asnumpy(), expected)
    assert count_sampled.shape == (50,)
    syms = mx.sym.contrib.rand_zipfian(mx.sym.var("t"), 5, 10)
    outs = mx.sym.Group(list(syms)).eval(t=true_classes)
    np.testing.assert_allclose(outs[1].asnumpy(), expected / 10)

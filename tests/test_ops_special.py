"""`erf`, `erfinv`, `gamma`, `gammaln`, `hard_sigmoid` and `hypot`: values and gradients
against MXNet 1.9.1 (float64 inputs), on every device, and their numeric gradients."""

import numpy as np
import pytest
import rsmx as mx
from rsmx.test_utils import check_numeric_gradient

X = [0.3, 1.7, 2.5, 4.0]
E = [-0.9, -0.2, 0.4, 0.95]
H = [-4.0, -1.0, 0.5, 3.0]

# (op, input, attributes, MXNet's output, MXNet's input gradient for a ones head).
CASES = [
    ("erf", E, {}, [-0.7969082124228322, -0.22270258921047847, 0.42839235504666845,
                    0.8208908072732779],
     [0.5019685591606927, 1.084134754536301, 0.9615412699535844, 0.45761924088781336]),
    ("erfinv", E, {}, [-1.1630871536766743, -0.17914345462129164, 0.3708071585935579,
                       1.385903824349678],
     [3.428042914433897, 0.9151293749986942, 1.016856230978055, 6.049328068112487]),
    ("gamma", X, {}, [2.991568987687591, 0.9086387328532904, 1.329340388179137, 6.0],
     [-10.478042462570194, 0.18949471883212898, 0.9347346336255761, 7.536706010590802]),
    ("gammaln", X, {}, [1.0957979948180756, -0.09580769740706588, 0.2846828704729192,
                        1.791759469228055],
     [-3.502524095447808, 0.20854792117113607, 0.7031567248971711, 1.2561176684318003]),
    ("hard_sigmoid", H, {"alpha": 0.3, "beta": 0.4}, [0.0, 0.1, 0.55, 1.0],
     [0.0, 0.3, 0.3, 0.0]),
]


@pytest.mark.parametrize("name,data,attrs,want,want_grad", CASES, ids=[c[0] for c in CASES])
def test_special_function_matches_mxnet(ctx, name, data, attrs, want, want_grad):
    a = mx.nd.array(data, ctx=ctx, dtype="float64")
    a.attach_grad()
    with mx.autograd.record():
        y = getattr(mx.nd, name)(a, **attrs)
    y.backward(mx.nd.ones_like(y))
    np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(a.grad.asnumpy(), want_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,data,attrs", [(c[0], c[1], c[2]) for c in CASES[:4]],
                         ids=[c[0] for c in CASES[:4]])
def test_special_function_numeric_gradient(name, data, attrs):
    sym = getattr(mx.sym, name)(mx.sym.Variable("x"), **attrs)
    check_numeric_gradient(sym, [np.array(data, dtype=np.float64)], numeric_eps=1e-6,
                           rtol=1e-4, atol=1e-6, dtype=np.float64)


def test_float32_special_functions_are_computed_in_double():
    a = mx.nd.array([0.999999], dtype="float32")
    assert np.isfinite(mx.nd.erfinv(a).asscalar())
    assert mx.nd.gamma(mx.nd.array([-2.0])).asnumpy()[0] != 0


def test_erfinv_outside_its_domain_is_nan_and_infinite_at_its_ends():
    y = mx.nd.erfinv(mx.nd.array([1.5, 1.0, -1.0])).asnumpy()
    assert np.isnan(y[0]) and y[1] == np.inf and y[2] == -np.inf


def test_hypot_of_arrays_numbers_and_symbols():
    a, b = mx.nd.array([3.0, 5.0]), mx.nd.array([4.0, 12.0])
    np.testing.assert_allclose(mx.nd.hypot(a, b).asnumpy(), [5, 13])
    np.testing.assert_allclose(mx.nd.hypot(a, 4).asnumpy(), [5, np.hypot(5, 4)], rtol=1e-6)
    assert mx.nd.hypot(3, 4) == 5
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    out = mx.sym.hypot(x, y).eval(x=a, y=b)[0]
    np.testing.assert_allclose(out.asnumpy(), [5, 13])
    assert mx.sym.power(x, 2).eval(x=a)[0].asnumpy().tolist() == [9, 25]


@pytest.mark.parametrize("attrs,want,want_grad", [
    ({}, [[0.7310585786300049, 0.2689414213699951, 8.442428349625584e-18],
          [0.9259392562016979, 0.027960942745299075, 0.04609980105300302]],
     [[-0.2949178998622228, 0.2949178998622228, -1.6069420544682344e-17],
      [0.08537123099612777, 0.0025779877956253923, -0.08794921879175312]]),
    ({"temperature": 2.0, "axis": 0},
     [[0.11920292202211755, 0.32082130082460697, 2.0611536181902033e-09],
      [0.8807970779778823, 0.679178699175393, 0.9999999979388463]],
     [[0.02624839635087662, 0.21789499376181398, 1.0305768069709246e-09],
      [-0.02624839635087668, -0.21789499376181404, -1.0305767329373954e-09]]),
])
def test_softmin_matches_mxnet(ctx, attrs, want, want_grad):
    # A large input (40) stays finite: the row's minimum leads, not its maximum.
    x = mx.nd.array([[1.0, 2.0, 40.0], [-3.0, 0.5, 0.0]], ctx=ctx, dtype="float64")
    w = mx.nd.array([[0.5, -1.0, 2.0], [1.0, 1.0, 3.0]], ctx=ctx, dtype="float64")
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.softmin(x, **attrs)
    y.backward(w)
    np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(x.grad.asnumpy(), want_grad, rtol=1e-6, atol=1e-12)


def test_softmin_of_a_wide_range_in_float32_has_no_overflow():
    y = mx.nd.softmin(mx.nd.array([[-100.0, 0.0, 100.0]])).asnumpy()
    assert np.isfinite(y).all() and y[0, 0] == pytest.approx(1.0)

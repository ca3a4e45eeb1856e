"""The ``mx.nd.random``, ``mx.sym.random`` and ``mx.random`` APIs: the functions each
module has, result shapes and types as MXNet 1.9.1 gives them, seeding, parameter
arrays, the ``*_like`` samplers, multinomial draws and shuffling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError

pytestmark = pytest.mark.timeout(60)

SAMPLERS = ["uniform", "normal", "randn", "poisson", "exponential", "gamma", "multinomial",
            "negative_binomial", "generalized_negative_binomial", "shuffle", "randint"]
LIKE = ["uniform_like", "normal_like", "exponential_like", "gamma_like", "poisson_like",
        "negative_binomial_like", "generalized_negative_binomial_like"]


def test_module_contents_as_mxnet():
    assert sorted(mx.nd.random.__all__) == sorted(SAMPLERS)
    assert sorted(mx.sym.random.__all__) == sorted(SAMPLERS)
    assert sorted(mx.random.__all__) == sorted([*SAMPLERS, "seed"])
    for name in LIKE:
        assert callable(getattr(mx.nd.random, name))
        assert callable(getattr(mx.sym.random, name))
        assert not hasattr(mx.random, name)
    assert mx.random.multinomial is mx.nd.random.multinomial


P2 = [[0.2, 0.8], [0.5, 0.5]]

# (call, shape, dtype) as MXNet 1.9.1 gives them.
ND_CASES = [
    (lambda: mx.nd.random.uniform(), (1,), np.float32),
    (lambda: mx.nd.random.uniform(0, 1, shape=3, dtype="float64"), (3,), np.float64),
    (lambda: mx.nd.random.randn(2, 3, dtype="float64"), (2, 3), np.float64),
    (lambda: mx.nd.random.randn(2, 3, loc=mx.nd.array([1, 2]), scale=mx.nd.array([1, 1])),
     (2, 2, 3), np.float32),
    (lambda: mx.nd.random.normal(mx.nd.array([1, 2]), mx.nd.array([1, 1])), (2,), np.float32),
    (lambda: mx.nd.random.exponential(mx.nd.array([1, 2]), shape=3), (2, 3), np.float32),
    (lambda: mx.nd.random.poisson(3, shape=(2,)), (2,), np.float32),
    (lambda: mx.nd.random.negative_binomial(3, 0.4, shape=(2,)), (2,), np.float32),
    (lambda: mx.nd.random.negative_binomial(mx.nd.array([1, 2]), mx.nd.array([0.1, 0.2])),
     (2,), np.float32),
    (lambda: mx.nd.random.generalized_negative_binomial(3, 0.4, shape=(2,), dtype="float64"),
     (2,), np.float64),
    (lambda: mx.nd.random.generalized_negative_binomial(
        mx.nd.array([1, 2]), mx.nd.array([0.1, 0.2]), shape=(2, 3)), (2, 2, 3), np.float32),
    (lambda: mx.nd.random.randint(0, 5), (1,), np.int32),
    (lambda: mx.nd.random.randint(0, 5, shape=(2,), dtype="int64"), (2,), np.int64),
    (lambda: mx.nd.random.multinomial(mx.nd.array(P2)), (2,), np.int32),
    (lambda: mx.nd.random.multinomial(mx.nd.array(P2), shape=(3,)), (2, 3), np.int32),
    (lambda: mx.nd.random.multinomial(mx.nd.array(P2), shape=4, dtype="float32"),
     (2, 4), np.float32),
    (lambda: mx.nd.random.multinomial(mx.nd.array([[0.5, 0.5]]), shape=(2, 3)), (1, 2, 3),
     np.int32),
    (lambda: mx.nd.random.uniform(0, 1, out=mx.nd.zeros((3, 3), dtype="float64")), (3, 3),
     np.float64),
    (lambda: mx.nd.random.normal_like(mx.nd.ones((2, 2), dtype="float64")), (2, 2), np.float64),
    (lambda: mx.nd.random.uniform_like(mx.nd.ones((2, 2), dtype="float16")), (2, 2), np.float16),
    (lambda: mx.nd.random.poisson_like(data=mx.nd.ones((2, 2)), lam=2), (2, 2), np.float32),
    (lambda: mx.random.randn(2), (2,), np.float32),
    (lambda: mx.random.shuffle(mx.nd.array(P2)), (2, 2), np.float32),
]


@pytest.mark.parametrize("i", range(len(ND_CASES)))
def test_nd_shapes_and_types(i):
    call, shape, dtype = ND_CASES[i]
    r = call()
    assert isinstance(r, mx.nd.NDArray)
    assert r.shape == shape and r.dtype == dtype


def test_parameter_type_errors_as_mxnet():
    with pytest.raises(AssertionError, match="same type"):
        mx.nd.random.uniform(mx.nd.array([0]), 1)
    with pytest.raises(TypeError):
        mx.nd.random.normal(0, mx.nd.array([1]))
    with pytest.raises(ValueError, match="NDArray or numbers"):
        mx.nd.random.uniform("a", 1)
    with pytest.raises(TypeError):
        mx.nd.random.randint(mx.nd.array([0]), mx.nd.array([1]))
    with pytest.raises(AssertionError):
        mx.sym.random.gamma(mx.sym.var("a"), 1.0)
    with pytest.raises(ValueError, match="Symbol or numbers"):
        mx.sym.random.uniform(None, 1)


def _draws(f):
    mx.random.seed(123)
    first = f().asnumpy()
    mx.random.seed(123)
    return first, f().asnumpy()


@pytest.mark.parametrize("call", [
    lambda: mx.nd.random.negative_binomial(3, 0.4, shape=(500,)),
    lambda: mx.nd.random.generalized_negative_binomial(2.0, 0.3, shape=(500,)),
    lambda: mx.nd.random.multinomial(mx.nd.array([0.1, 0.2, 0.7]), shape=500),
    lambda: mx.nd.random.shuffle(mx.nd.arange(0, 50)),
    lambda: mx.nd.random.randn(20, 25),
    lambda: mx.nd.random.gamma_like(mx.nd.ones((20, 25)), alpha=2.0, beta=1.0),
    lambda: mx.nd.random.generalized_negative_binomial_like(mx.nd.ones((500,)), mu=2, alpha=0.3),
])
def test_same_seed_same_draws(call):
    a, b = _draws(call)
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(a)) > 1


def test_seed_as_a_c_int():
    def draw(seed, **kw):
        mx.random.seed(seed, **kw)
        return mx.nd.random.uniform(shape=(8,)).asnumpy()

    base = draw(5)
    np.testing.assert_array_equal(base, draw(5 + 2**32))
    np.testing.assert_array_equal(base, draw(np.int64(5)))
    np.testing.assert_array_equal(base, draw(5, ctx=mx.cpu()))
    np.testing.assert_array_equal(draw(-1), draw(2**32 - 1))
    assert not np.array_equal(base, draw(6))
    with pytest.raises(ValueError, match="int"):
        mx.random.seed(1.5)


N = 200_000


@pytest.mark.parametrize("call,mean,std", [
    (lambda: mx.nd.random.negative_binomial(3, 0.4, shape=N), 3 * 0.6 / 0.4,
     math.sqrt(3 * 0.6) / 0.4),
    (lambda: mx.nd.random.generalized_negative_binomial(2.0, 0.3, shape=N), 2.0,
     math.sqrt(2.0 + 0.3 * 4.0)),
    (lambda: mx.nd.random.negative_binomial_like(mx.nd.ones((N,)), k=3, p=0.4), 4.5,
     math.sqrt(1.8) / 0.4),
    (lambda: mx.nd.random.exponential_like(mx.nd.ones((N,)), lam=4.0), 0.25, 0.25),
    (lambda: mx.nd.random.uniform_like(mx.nd.ones((N,)), low=-1.5, high=3.0), 0.75,
     4.5 / math.sqrt(12)),
    (lambda: mx.nd.random.gamma_like(mx.nd.ones((N,)), alpha=9.0, beta=0.5), 4.5, 1.5),
    (lambda: mx.nd.random.normal_like(mx.nd.ones((N,)), loc=10.0, scale=0.5), 10.0, 0.5),
    (lambda: mx.nd.random.poisson_like(mx.nd.ones((N,)), lam=4.0), 4.0, 2.0),
    (lambda: mx.nd.random.exponential(0.25, shape=N), 0.25, 0.25),
    (lambda: mx.nd.random.randn(N, loc=1.0, scale=2.0), 1.0, 2.0),
])
def test_moments(call, mean, std):
    mx.random.seed(11)
    x = call().asnumpy().astype(np.float64)
    assert abs(x.mean() - mean) < 0.02 * max(1.0, abs(mean))
    assert abs(x.std() - std) < 0.02 * max(1.0, std)


def test_parameter_arrays_draw_per_element():
    mx.random.seed(2)
    mu = mx.nd.array([1.0, 6.0])
    alpha = mx.nd.array([0.1, 0.5])
    x = mx.nd.random.generalized_negative_binomial(mu, alpha, shape=N // 2).asnumpy()
    assert x.shape == (2, N // 2)
    np.testing.assert_allclose(x.mean(axis=1), [1.0, 6.0], rtol=0.03)
    np.testing.assert_allclose(x.var(axis=1), [1.0 + 0.1, 6.0 + 0.5 * 36], rtol=0.06)
    scale = mx.nd.array([0.5, 4.0])
    y = mx.nd.random.exponential(scale, shape=N // 2).asnumpy()
    np.testing.assert_allclose(y.mean(axis=1), [0.5, 4.0], rtol=0.03)


def test_multinomial_frequencies_and_log_likelihood():
    probs = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.0, 0.0, 0.3]])
    mx.random.seed(3)
    samples, logp = mx.nd.random.multinomial(mx.nd.array(probs), shape=20000, get_prob=True)
    s = samples.asnumpy()
    assert s.shape == (2, 20000) and s.dtype == np.int32
    for row in range(2):
        freq = np.bincount(s[row], minlength=4) / 20000
        np.testing.assert_allclose(freq, probs[row], atol=0.015)
    want = np.log(np.take_along_axis(probs, s.astype(np.int64), axis=1))
    np.testing.assert_allclose(logp.asnumpy(), want, rtol=1e-5)


def test_multinomial_out_and_outputs():
    out = mx.nd.zeros((2, 4), dtype="int32")
    r = mx.nd.random.multinomial(mx.nd.array(P2), shape=4, out=out)
    assert r is out and set(np.unique(out.asnumpy())) <= {0, 1}
    assert isinstance(mx.nd.random.multinomial(mx.nd.array(P2), shape=3), mx.nd.NDArray)
    both = mx.nd.random.multinomial(mx.nd.array(P2), shape=3, get_prob=True)
    assert isinstance(both, list) and len(both) == 2


@pytest.mark.parametrize("dtype,outcomes", [("uint8", 256), ("float16", 2049)])
def test_multinomial_index_type_too_small(dtype, outcomes):
    with pytest.raises(MXNetError, match="precision"):
        mx.nd.random.multinomial(mx.nd.zeros((outcomes,)), dtype=dtype)
    mx.nd.random.multinomial(mx.nd.ones((outcomes - 1,)) / (outcomes - 1), dtype=dtype)


def test_shuffle_permutes_first_axis():
    data = mx.nd.arange(0, 24).reshape((6, 2, 2))
    mx.random.seed(4)
    seen = set()
    for _ in range(20):
        r = mx.nd.random.shuffle(data).asnumpy()
        rows = r.reshape(6, 4)
        np.testing.assert_array_equal(rows - rows[:, :1], np.tile(np.arange(4), (6, 1)))
        np.testing.assert_array_equal(np.sort(rows[:, 0]), np.arange(0, 24, 4))
        seen.add(tuple(rows[:, 0]))
    assert len(seen) > 10
    np.testing.assert_array_equal(data.asnumpy(), np.arange(24).reshape(6, 2, 2))
    out = mx.nd.zeros((6, 2, 2))
    assert mx.nd.random.shuffle(data, out=out) is out


def test_symbol_samplers():
    d = mx.sym.var("d")
    ctx = mx.cpu()
    cases = [
        (mx.sym.random.uniform(0, 1, shape=(2, 3)), {}, [(2, 3)]),
        (mx.sym.random.normal(d, d, shape=(3,)), {"d": mx.nd.ones((2,))}, [(2, 3)]),
        (mx.sym.random.exponential(d, shape=4), {"d": mx.nd.ones((2,))}, [(2, 4)]),
        (mx.sym.random.multinomial(d, shape=4), {"d": mx.nd.array(P2)}, [(2, 4), (2, 4)]),
        (mx.sym.random.multinomial(d, shape=4, get_prob=False), {"d": mx.nd.array(P2)}, [(2, 4)]),
        (mx.sym.random.randint(0, 4, shape=(2,)), {}, [(2,)]),
        (mx.sym.random.randn(2, 2, loc=1), {}, [(2, 2)]),
        (mx.sym.random.gamma_like(data=d, alpha=1, beta=2), {"d": mx.nd.ones((2, 3))}, [(2, 3)]),
        (mx.sym.random.shuffle(d), {"d": mx.nd.ones((5, 2))}, [(5, 2)]),
    ]
    for sym, args, shapes in cases:
        outs = sym.eval(ctx=ctx, **args)
        assert [o.shape for o in outs] == shapes
    assert mx.sym.random.randint(0, 4, shape=(2,)).eval(ctx=ctx)[0].dtype == np.int32


def test_symbol_node_names_as_mxnet():
    d = mx.sym.var("d")
    assert mx.sym.random.uniform_like(d).list_outputs()[0].startswith("uniform_like")
    assert mx.sym.random.uniform(0, 1, shape=(2,)).name.startswith("_random_uniform")
    assert mx.sym.random.shuffle(d, name="c").name == "c"
    # The number form takes no inputs: a Symbol given to it is dropped, as MXNet does.
    assert mx.sym.random.normal(0, 1, shape=(2,), data=d).list_arguments() == []


def test_symbol_draws_repeat_under_seed():
    x = mx.sym.var("x")
    y = mx.sym.random.uniform(-1, 1, shape=(50,)) + x
    exe = y.bind(mx.cpu(), {"x": mx.nd.zeros((50,))})
    mx.random.seed(9)
    exe.forward()
    first = exe.outputs[0].asnumpy()
    mx.random.seed(9)
    exe.forward()
    np.testing.assert_array_equal(first, exe.outputs[0].asnumpy())
    assert first.min() >= -1 and first.max() < 1
    sorted_back = mx.sym.sort(mx.sym.random.shuffle(mx.sym.var("a")), axis=0)
    data = mx.nd.arange(0, 7)
    np.testing.assert_array_equal(sorted_back.eval(a=data, ctx=mx.cpu())[0].asnumpy(),
                                  data.asnumpy())

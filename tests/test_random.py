"""Random samplers: reproducibility under mx.random.seed, shapes, dtypes, ranges and the
moments of each distribution."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx

pytestmark = pytest.mark.timeout(60)

N = 100_000


def test_seed_reproduces_draws(ctx):
    mx.random.seed(42)
    a = mx.nd.random.uniform(0, 1, shape=(1000,), ctx=ctx).asnumpy()
    b = mx.nd.random.uniform(0, 1, shape=(1000,), ctx=ctx).asnumpy()
    mx.random.seed(42)
    c = mx.nd.random.uniform(0, 1, shape=(1000,), ctx=ctx).asnumpy()
    d = mx.nd.random.uniform(0, 1, shape=(1000,), ctx=ctx).asnumpy()
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, d)
    assert not np.array_equal(a, b)
    mx.random.seed(43)
    e = mx.nd.random.uniform(0, 1, shape=(1000,), ctx=ctx).asnumpy()
    assert not np.array_equal(a, e)


def test_seed_reproduces_large_and_mixed_draws(ctx):
    def draws():
        return [
            mx.nd.random.normal(0, 1, shape=(300_000,), ctx=ctx).asnumpy(),
            mx.nd.random.randint(0, 100, shape=(50,), ctx=ctx).asnumpy(),
            mx.nd.random.uniform(-1, 1, shape=(200_000,), dtype="float64", ctx=ctx).asnumpy(),
        ]

    mx.random.seed(7)
    first = draws()
    mx.random.seed(7)
    for x, y in zip(first, draws(), strict=True):
        np.testing.assert_array_equal(x, y)


def test_uniform(ctx):
    mx.random.seed(0)
    x = mx.nd.random.uniform(-1, 3, shape=(N,), ctx=ctx)
    assert x.shape == (N,) and x.dtype == np.float32
    v = x.asnumpy()
    assert v.min() >= -1 and v.max() < 3
    assert abs(v.mean() - 1) < 0.03
    assert abs(v.std() - 4 / np.sqrt(12)) < 0.03
    y = mx.nd.random.uniform(shape=(2, 3), dtype="float64", ctx=ctx)
    assert y.shape == (2, 3) and y.dtype == np.float64
    assert mx.nd.random.uniform(0, 1, shape=(4,), dtype="float16", ctx=ctx).dtype == np.float16
    assert mx.nd.random.uniform(5, 5, shape=(3,), ctx=ctx).asnumpy().tolist() == [5, 5, 5]


def test_uniform_alias_and_internal_names(ctx):
    assert mx.random.uniform is not None
    r = mx.random.uniform(0, 1, shape=(5,), ctx=ctx)
    assert r.shape == (5,)
    r = mx.nd.random_uniform(low=0, high=2, shape=(3, 2), ctx=ctx)
    assert r.shape == (3, 2) and (r.asnumpy() < 2).all()
    r = mx.nd.uniform(low=0, high=2, shape=(3,), ctx=ctx)
    assert r.shape == (3,)
    r = mx.nd._internal._random_uniform(low=0, high=1, shape=(4,), ctx=ctx)
    assert r.shape == (4,)


def test_normal(ctx):
    mx.random.seed(1)
    x = mx.nd.random.normal(2, 3, shape=(N,), ctx=ctx)
    assert x.dtype == np.float32
    v = x.asnumpy()
    assert abs(v.mean() - 2) < 0.05
    assert abs(v.std() - 3) < 0.05
    assert mx.random.normal(0, 1, shape=(2, 2), ctx=ctx).shape == (2, 2)
    assert mx.nd.random_normal(loc=0, scale=1, shape=(3,), ctx=ctx).shape == (3,)
    assert mx.nd.random.normal(shape=(3,), dtype="float64", ctx=ctx).dtype == np.float64


def test_randint(ctx):
    mx.random.seed(2)
    x = mx.nd.random.randint(0, 10, shape=(100,), ctx=ctx)
    assert x.shape == (100,) and x.dtype == np.int32
    v = x.asnumpy()
    assert v.min() >= 0 and v.max() < 10
    assert len(np.unique(v)) > 5
    y = mx.nd.random.randint(-5, -3, shape=(1000,), dtype="int64", ctx=ctx)
    assert y.dtype == np.int64
    assert set(np.unique(y.asnumpy()).tolist()) == {-5, -4}
    big = mx.nd.random.randint(0, 2**40, shape=(100,), dtype="int64", ctx=ctx).asnumpy()
    assert big.min() >= 0 and big.max() < 2**40 and big.max() > 2**32


def test_randint_errors(ctx):
    # MXNet 1.9.1 crashes (division by zero) on an empty range; rsmx raises.
    for low, high in ((3, 3), (4, 3)):
        with pytest.raises(mx.base.MXNetError):
            mx.nd.random.randint(low, high, shape=(2,), ctx=ctx).asnumpy()
    with pytest.raises(mx.base.MXNetError):
        mx.nd.random.randint(0, 10, shape=(2,), dtype="float32", ctx=ctx).asnumpy()
    # int32 cannot hold the range (MXNet 1.9.1 wraps silently)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.random.randint(0, 2**40, shape=(2,), ctx=ctx).asnumpy()


def test_invalid_parameters(ctx):
    with pytest.raises(mx.base.MXNetError):
        mx.nd.random.uniform(1, 0, shape=(2,), ctx=ctx).asnumpy()
    with pytest.raises(mx.base.MXNetError):
        mx.nd.random.normal(0, -1, shape=(2,), ctx=ctx).asnumpy()
    with pytest.raises(mx.base.MXNetError):
        mx.nd.random.uniform(0, 1, shape=(2,), dtype="int32", ctx=ctx).asnumpy()
    with pytest.raises(mx.base.MXNetError):
        mx.nd._internal._random_exponential(lam=0, shape=(2,), ctx=ctx).asnumpy()
    with pytest.raises(mx.base.MXNetError):
        mx.nd._internal._random_gamma(alpha=-1, shape=(2,), ctx=ctx).asnumpy()
    with pytest.raises(mx.base.MXNetError):
        mx.nd._internal._random_poisson(lam=-1, shape=(2,), ctx=ctx).asnumpy()


def test_other_distributions(ctx):
    mx.random.seed(3)
    v = mx.nd._internal._random_exponential(lam=4, shape=(N,), ctx=ctx).asnumpy()
    assert v.min() >= 0 and abs(v.mean() - 0.25) < 0.01
    v = mx.nd._internal._random_gamma(alpha=2, beta=3, shape=(N,), ctx=ctx).asnumpy()
    assert abs(v.mean() - 6) < 0.1 and abs(v.var() - 18) < 0.6
    v = mx.nd._internal._random_poisson(lam=3, shape=(N,), ctx=ctx).asnumpy()
    assert v.dtype == np.float32
    assert np.all(v == np.round(v)) and abs(v.mean() - 3) < 0.05 and abs(v.var() - 3) < 0.1
    v = mx.nd._internal._random_negative_binomial(k=3, p=0.4, shape=(N,), ctx=ctx).asnumpy()
    assert abs(v.mean() - 4.5) < 0.1
    v = mx.nd._internal._random_generalized_negative_binomial(mu=2, alpha=0.5, shape=(N,), ctx=ctx).asnumpy()
    assert abs(v.mean() - 2) < 0.05 and abs(v.var() - 4) < 0.2


def test_per_element_parameters(ctx):
    mx.random.seed(4)
    low, high = mx.nd.array([0, 10], ctx=ctx), mx.nd.array([1, 11], ctx=ctx)
    x = mx.nd.random.uniform(low, high, shape=(1000,))
    assert x.shape == (2, 1000) and x.dtype == np.float32
    v = x.asnumpy()
    assert (v[0] >= 0).all() and (v[0] < 1).all() and (v[1] >= 10).all() and (v[1] < 11).all()
    y = mx.nd.random.normal(mx.nd.array([0, 100], ctx=ctx), mx.nd.array([1, 2], ctx=ctx), shape=(20_000,)).asnumpy()
    assert abs(y[0].mean()) < 0.05 and abs(y[1].mean() - 100) < 0.1 and abs(y[1].std() - 2) < 0.1
    z = mx.nd._internal._sample_uniform(low, high)
    assert z.shape == (2,)


def test_like_and_shuffle(ctx):
    mx.random.seed(5)
    uniform_like = (
        getattr(mx.nd.random, "uniform_like", None) or mx.nd._internal._random_uniform_like
    )
    like = uniform_like(mx.nd.zeros((2, 3), dtype="float64", ctx=ctx), low=2, high=3)
    assert like.shape == (2, 3) and like.dtype == np.float64
    assert ((like.asnumpy() >= 2) & (like.asnumpy() < 3)).all()
    data = np.arange(30, dtype="float32").reshape(10, 3)
    s = mx.nd.shuffle(mx.nd.array(data, ctx=ctx)).asnumpy()
    assert sorted(s[:, 0].tolist()) == data[:, 0].tolist()
    np.testing.assert_array_equal(s[:, 1] - s[:, 0], np.ones(10))
    # In place: the output is the input.
    a = mx.nd.array(data, ctx=ctx)
    mx.nd.shuffle(a, out=a)
    s = a.asnumpy()
    assert sorted(s[:, 0].tolist()) == data[:, 0].tolist()
    np.testing.assert_array_equal(s[:, 2] - s[:, 0], 2 * np.ones(10))


def test_multinomial(ctx):
    mx.random.seed(6)
    probs = mx.nd.array([[0.1, 0.9, 0.0], [0.5, 0.5, 0.0]], ctx=ctx)
    s, lp = mx.nd._internal._sample_multinomial(probs, shape=(2000,), get_prob=True)
    assert s.shape == (2, 2000) and s.dtype == np.int32
    v = s.asnumpy()
    assert set(np.unique(v).tolist()) <= {0, 1}
    assert abs((v[0] == 1).mean() - 0.9) < 0.03
    np.testing.assert_allclose(lp.asnumpy()[1], np.log(0.5), rtol=1e-6)


def test_samples_into_out_take_its_dtype(ctx):
    for dtype in ("float64", "float16"):
        out = mx.nd.zeros((50,), dtype=dtype, ctx=ctx)
        mx.nd.random.uniform(2, 3, shape=(50,), out=out, ctx=ctx)
        v = out.asnumpy()
        assert v.dtype == np.dtype(dtype) and (v >= 2).all() and (v <= 3).all()
        mx.nd.random.normal(0, 1, out=out, ctx=ctx)
        assert out.asnumpy().std() > 0.3


def test_out_of_range_parameters_surface_at_the_next_wait():
    # As in MXNet: the call returns, the error comes when the result is read, and the
    # engine keeps working.
    bad = mx.nd.random.normal(0, -1, shape=(2, 2))
    c = mx.nd.dot(bad, mx.nd.ones((2, 2)))
    with pytest.raises(mx.base.MXNetError, match="scale must be positive"):
        c.asnumpy()
    assert mx.nd.random.normal(0, 1, shape=(2,)).asnumpy().shape == (2,)
    x = mx.sym.random.normal(0, -1, shape=(2,))
    ex = x.simple_bind(mx.cpu())
    ex.forward()
    with pytest.raises(mx.base.MXNetError, match="scale must be positive"):
        ex.outputs[0].asnumpy()

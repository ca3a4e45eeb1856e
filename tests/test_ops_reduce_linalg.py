"""Reduction and matrix-product operators against numpy and MXNet 1.9.1's behaviour: sum,
mean, prod, max, min, nansum, nanprod, norm, argmax, argmin, argmax_channel, dot, batch_dot."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import rsmx as mx

pytestmark = pytest.mark.timeout(120)

RNG = np.random.RandomState(7)

REDUCERS = {
    "sum": np.sum,
    "mean": np.mean,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "nansum": np.nansum,
    "nanprod": np.nanprod,
}


def nd(a, dtype=None, *, ctx):
    a = np.asarray(a)
    return mx.nd.array(a, ctx=ctx, dtype=dtype or a.dtype)


def np_reduce(name, a, axis, keepdims=False, exclude=False):
    """numpy's result with MXNet's output shape rules."""
    if axis is None or axis == ():
        axes = tuple(range(a.ndim))
    else:
        axes = tuple(ax % a.ndim for ax in ((axis,) if isinstance(axis, int) else axis))
        if exclude:
            axes = tuple(i for i in range(a.ndim) if i not in axes)
    r = REDUCERS[name](a, axis=axes, keepdims=keepdims)
    r = np.asarray(r)
    if r.ndim == 0:
        r = r.reshape(1)
    return r


# --- sum / mean / prod / max / min / nansum / nanprod -----------------------------------


AXES = [None, 0, 1, 2, -1, -3, (0, 2), (1, 2), (0, 1, 2), ()]


@pytest.mark.parametrize("name", list(REDUCERS))
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(name, axis, keepdims, ctx):
    a = RNG.uniform(0.5, 1.5, size=(3, 4, 5)).astype("float32")
    kwargs = {"keepdims": keepdims}
    if axis is not None:
        kwargs["axis"] = axis
    r = getattr(mx.nd, name)(nd(a, ctx=ctx), **kwargs)
    want = np_reduce(name, a, axis, keepdims)
    assert r.shape == want.shape
    assert r.dtype == np.float32
    np.testing.assert_allclose(r.asnumpy(), want, rtol=1e-5)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("axis", [0, 1, -1, (0, 2), (1,)], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_exclude(name, axis, keepdims, ctx):
    a = RNG.uniform(0.5, 1.5, size=(3, 4, 5)).astype("float64")
    r = getattr(mx.nd, name)(nd(a, ctx=ctx), axis=axis, keepdims=keepdims, exclude=True)
    want = np_reduce(name, a, axis, keepdims, exclude=True)
    assert r.shape == want.shape
    np.testing.assert_allclose(r.asnumpy(), want, rtol=1e-12)


def test_output_shapes_follow_mxnet(ctx):
    x = mx.nd.ones((2, 3, 4), ctx=ctx)
    assert mx.nd.sum(x).shape == (1,)
    assert mx.nd.sum(x, keepdims=True).shape == (1, 1, 1)
    assert mx.nd.sum(x, axis=()).shape == (1,)
    assert mx.nd.sum(x, axis=(), exclude=True).shape == (1,)
    assert mx.nd.sum(x, axis=(0, 1, 2)).shape == (1,)
    # Excluding every axis reduces none.
    assert mx.nd.sum(x, axis=(0, 1, 2), exclude=True).shape == (2, 3, 4)
    assert mx.nd.sum(x, axis=1, exclude=True, keepdims=True).shape == (1, 3, 1)
    assert mx.nd.sum(x, axis=(0, 2), exclude=True).shape == (2, 4)
    assert mx.nd.sum(mx.nd.ones((5,), ctx=ctx)).shape == (1,)


def test_aliases_and_methods(ctx):
    a = RNG.rand(3, 4).astype("float32")
    x = nd(a, ctx=ctx)
    np.testing.assert_allclose(mx.nd.sum_axis(x, axis=1).asnumpy(), a.sum(1), rtol=1e-6)
    np.testing.assert_allclose(mx.nd.max_axis(x, axis=0).asnumpy(), a.max(0))
    np.testing.assert_allclose(mx.nd.min_axis(x, axis=0).asnumpy(), a.min(0))
    np.testing.assert_allclose(x.sum(axis=1, keepdims=True).asnumpy(), a.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(x.mean().asnumpy(), [a.mean()], rtol=1e-6)
    np.testing.assert_allclose(x.max(axis=-1).asnumpy(), a.max(-1))
    np.testing.assert_allclose(x.prod(axis=0).asnumpy(), a.prod(0), rtol=1e-6)
    np.testing.assert_allclose(x.nansum().asnumpy(), [a.sum()], rtol=1e-6)
    # A positional argument is the axis.
    np.testing.assert_allclose(mx.nd.sum(x, 0).asnumpy(), a.sum(0), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "int8", "uint8"])
def test_dtypes_are_kept(dtype, ctx):
    a = np.arange(1, 13).reshape(3, 4).astype(dtype)
    for name in ["sum", "max", "min", "prod", "mean"]:
        r = getattr(mx.nd, name)(nd(a, ctx=ctx), axis=1)
        assert r.dtype == np.dtype(dtype), name
    np.testing.assert_array_equal(mx.nd.max(nd(a, ctx=ctx), axis=0).asnumpy(), a.max(0))
    np.testing.assert_array_equal(mx.nd.min(nd(a, ctx=ctx), axis=1).asnumpy(), a.min(1))


def test_integer_semantics_follow_mxnet(ctx):
    # Sums wrap in the integer type; means divide the wrapped sum, truncating.
    u = nd(np.array([200, 200, 200], dtype="uint8"), ctx=ctx)
    np.testing.assert_array_equal(mx.nd.sum(u).asnumpy(), [88])
    np.testing.assert_array_equal(mx.nd.mean(u).asnumpy(), [29])
    i8 = nd(np.array([100, 100, 100], dtype="int8"), ctx=ctx)
    np.testing.assert_array_equal(mx.nd.sum(i8).asnumpy(), [44])
    np.testing.assert_array_equal(mx.nd.mean(i8).asnumpy(), [14])
    i = nd(np.array([1, 2, 2], dtype="int32"), ctx=ctx)
    np.testing.assert_array_equal(mx.nd.mean(i).asnumpy(), [1])
    big = np.arange(1 << 20, dtype="int64") * 12345
    np.testing.assert_array_equal(mx.nd.sum(nd(big, ctx=ctx)).asnumpy(), [big.sum()])
    np.testing.assert_array_equal(mx.nd.nansum(nd(np.array([2, 3], dtype="int32"), ctx=ctx)).asnumpy(), [5])


def test_float16_accumulates_in_float32(ctx):
    h = nd(np.ones(5000, dtype="float16"), ctx=ctx)
    r = mx.nd.sum(h)
    assert r.dtype == np.float16
    np.testing.assert_array_equal(r.asnumpy(), [5000])
    np.testing.assert_array_equal(mx.nd.mean(nd(np.full(5000, 3, dtype="float16"), ctx=ctx)).asnumpy(), [3])
    a = RNG.rand(64, 300).astype("float16")
    want = a.astype("float64").sum(axis=1)
    np.testing.assert_allclose(mx.nd.sum(nd(a, ctx=ctx), axis=1).asnumpy(), want, rtol=2e-3)


def test_nan_handling(ctx):
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], dtype="float32")
    x = nd(a, ctx=ctx)
    assert np.isnan(mx.nd.max(x).asnumpy()[0])
    assert np.isnan(mx.nd.min(x).asnumpy()[0])
    assert np.isnan(mx.nd.sum(x).asnumpy()[0])
    np.testing.assert_array_equal(mx.nd.max(x, axis=1).asnumpy()[1], 6.0)
    np.testing.assert_allclose(mx.nd.nansum(x, axis=1).asnumpy(), [4.0, 15.0])
    np.testing.assert_allclose(mx.nd.nanprod(x, axis=1).asnumpy(), [3.0, 120.0])
    np.testing.assert_allclose(mx.nd.nansum(x).asnumpy(), [19.0])
    h = nd(np.array([1, np.nan], dtype="float16"), ctx=ctx)
    assert np.isnan(mx.nd.max(h).asnumpy()[0])


@pytest.mark.parametrize(
    "shape,axis",
    [
        ((1 << 20,), None),
        ((1024, 1024), 0),
        ((1024, 1024), 1),
        ((3, 1 << 18), 0),
        ((1 << 18, 3), 0),
        ((1 << 18, 3), 1),
        ((2, 300, 2, 300), (1, 3)),
        ((2, 300, 2, 300), (0, 2)),
        ((64, 64, 64), (0, 2)),
        ((4, 100000), 1),
    ],
    ids=str,
)
def test_large_reductions(shape, axis, ctx):
    a = RNG.uniform(-1, 1, size=shape).astype("float32")
    x = nd(a, ctx=ctx)
    kw = {} if axis is None else {"axis": axis}
    axes = None if axis is None else axis
    want = a.astype("float64").sum(axis=axes)
    np.testing.assert_allclose(mx.nd.sum(x, **kw).asnumpy().reshape(np.shape(want)), want, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(mx.nd.max(x, **kw).asnumpy().reshape(np.shape(want)), a.max(axis=axes))
    np.testing.assert_array_equal(mx.nd.min(x, **kw).asnumpy().reshape(np.shape(want)), a.min(axis=axes))
    ai = (a * 100).astype("int32")
    np.testing.assert_array_equal(mx.nd.sum(nd(ai, ctx=ctx), **kw).asnumpy().reshape(np.shape(want)), ai.sum(axis=axes))


def test_reduce_errors(ctx):
    x = mx.nd.ones((2, 3), ctx=ctx)
    with pytest.raises(mx.base.MXNetError, match=r"sum: axis 2 is out of range for an array of shape \(2, 3\)"):
        mx.nd.sum(x, axis=2)
    with pytest.raises(mx.base.MXNetError, match="out of range"):
        mx.nd.mean(x, axis=-3)
    with pytest.raises(mx.base.MXNetError, match="more than once"):
        mx.nd.sum(x, axis=(0, -2))
    with pytest.raises(mx.base.MXNetError, match="axes"):
        mx.nd.sum(x, axes=1)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.max(x, axis="x")


def test_req_add_through_out(ctx):
    a = RNG.rand(3, 4).astype("float32")
    out = mx.nd.zeros((4,), ctx=ctx)
    r = mx.nd.sum(nd(a, ctx=ctx), axis=0, out=out)
    assert r is out
    np.testing.assert_allclose(out.asnumpy(), a.sum(0), rtol=1e-6)


# --- norm --------------------------------------------------------------------------------


@pytest.mark.parametrize("ord", [1, 2])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1), (1, 2), (0, 1, 2)], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_matches_numpy(ord, axis, keepdims, ctx):
    a = RNG.uniform(-2, 2, size=(3, 4, 5)).astype("float32")
    kwargs = {"ord": ord, "keepdims": keepdims}
    if axis is not None:
        kwargs["axis"] = axis
    r = mx.nd.norm(nd(a, ctx=ctx), **kwargs)
    axes = tuple(range(3)) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    f = np.abs(a).astype("float64") if ord == 1 else np.square(a.astype("float64"))
    want = f.sum(axis=axes, keepdims=keepdims)
    if ord == 2:
        want = np.sqrt(want)
    want = np.asarray(want).reshape(want.shape or (1,))
    assert r.shape == want.shape
    assert r.dtype == np.float32
    np.testing.assert_allclose(r.asnumpy(), want, rtol=1e-5)


def test_norm_follows_mxnet(ctx):
    x = mx.nd.arange(24, ctx=ctx).reshape((2, 3, 4))
    assert mx.nd.norm(x).shape == (1,)
    np.testing.assert_allclose(mx.nd.norm(x).asnumpy(), [65.75713], rtol=1e-6)
    np.testing.assert_allclose(x.norm(ord=1).asnumpy(), [276.0])
    assert mx.nd.norm(x, keepdims=True).shape == (1, 1, 1)
    # Large float32 values do not overflow.
    np.testing.assert_allclose(mx.nd.norm(mx.nd.array([1e30, 1e30], ctx=ctx)).asnumpy(), [1.4142135e30], rtol=1e-6)
    # Integer data: MXNet's scaled sum of squares in integer arithmetic.
    np.testing.assert_array_equal(mx.nd.norm(nd(np.array([3, 4], dtype="int32"), ctx=ctx)).asnumpy(), [4])
    np.testing.assert_array_equal(mx.nd.norm(nd(np.array([-3, -4, -12], dtype="int8"), ctx=ctx)).asnumpy(), [12])
    q = nd(np.array([[2, 3, 3], [3, 3, 2]], dtype="int32"), ctx=ctx)
    np.testing.assert_array_equal(mx.nd.norm(q, axis=1).asnumpy(), [4, 4])
    np.testing.assert_array_equal(mx.nd.norm(q, ord=1).asnumpy(), [16])
    assert mx.nd.norm(q).dtype == np.int32
    h = mx.nd.norm(nd(np.array([300, 400], dtype="float16"), ctx=ctx))
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h.asnumpy(), [500])
    d = mx.nd.norm(mx.nd.array([3, 4], ctx=ctx), out_dtype="float64")
    assert d.dtype == np.float64
    np.testing.assert_array_equal(d.asnumpy(), [5.0])


def test_norm_errors(ctx):
    x = mx.nd.ones((2, 3), ctx=ctx)
    with pytest.raises(mx.base.MXNetError, match="ord"):
        mx.nd.norm(x, ord=3)
    with pytest.raises(mx.base.MXNetError, match="exclude"):
        mx.nd.norm(x, exclude=True)
    with pytest.raises(mx.base.MXNetError, match="out of range"):
        mx.nd.norm(x, axis=5)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.norm(x, out_dtype="uint8")


# --- argmax / argmin / argmax_channel -----------------------------------------------------


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -2], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_reductions_match_numpy(name, axis, keepdims, ctx):
    a = RNG.randint(0, 5, size=(3, 4, 5)).astype("float32")  # many ties
    kwargs = {"keepdims": keepdims}
    if axis is not None:
        kwargs["axis"] = axis
    r = getattr(mx.nd, name)(nd(a, ctx=ctx), **kwargs)
    want = np.asarray(getattr(np, name)(a, axis=axis, keepdims=keepdims if axis is not None else False))
    if axis is None:
        want = want.reshape((1, 1, 1) if keepdims else (1,))
    assert r.shape == want.shape
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r.asnumpy(), want)


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32", "int64", "uint8", "int8"])
def test_arg_reductions_keep_the_input_dtype(dtype, ctx):
    a = np.array([[1, 5, 2], [7, 0, 7]], dtype=dtype)
    r = mx.nd.argmax(nd(a, ctx=ctx), axis=1)
    assert r.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(r.asnumpy(), [1, 0])
    np.testing.assert_array_equal(mx.nd.argmin(nd(a, ctx=ctx), axis=0).asnumpy(), [0, 1, 0])


def test_arg_reductions_nan_and_methods(ctx):
    a = np.array([1.0, np.nan, 5.0, np.nan], dtype="float32")
    np.testing.assert_array_equal(mx.nd.argmax(nd(a, ctx=ctx), axis=0).asnumpy(), [1])
    np.testing.assert_array_equal(mx.nd.argmin(nd(a, ctx=ctx), axis=0).asnumpy(), [1])
    np.testing.assert_array_equal(mx.nd.argmax(nd(np.array([-np.inf, -np.inf]), ctx=ctx), axis=0).asnumpy(), [0])
    x = mx.nd.array([[1, 3, 2], [9, 1, 1]], ctx=ctx)
    np.testing.assert_array_equal(x.argmax(axis=1).asnumpy(), [1, 0])
    np.testing.assert_array_equal(x.argmin(axis=0).asnumpy(), [0, 1, 1])
    np.testing.assert_array_equal(x.argmax_channel().asnumpy(), [1, 0])


def test_argmax_channel_uses_axis_1(ctx):
    a = RNG.rand(2, 3, 4).astype("float32")
    r = mx.nd.argmax_channel(nd(a, ctx=ctx))
    assert r.shape == (2, 4)
    np.testing.assert_array_equal(r.asnumpy(), a.argmax(axis=1))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.argmax_channel(mx.nd.array([1, 2, 3], ctx=ctx))


def test_large_arg_reductions(ctx):
    a = RNG.rand(1 << 20).astype("float32")
    a[777_777] = 2.0
    a[999_999] = -1.0
    x = nd(a, ctx=ctx)
    np.testing.assert_array_equal(mx.nd.argmax(x).asnumpy(), [777_777])
    np.testing.assert_array_equal(mx.nd.argmin(x, axis=0).asnumpy(), [999_999])
    m = a.reshape(4, -1)
    xm = nd(m, ctx=ctx)
    np.testing.assert_array_equal(mx.nd.argmax(xm, axis=0).asnumpy(), m.argmax(0))
    np.testing.assert_array_equal(mx.nd.argmax(xm, axis=1).asnumpy(), m.argmax(1))


def test_arg_reduction_errors(ctx):
    x = mx.nd.ones((2, 3, 4), ctx=ctx)
    with pytest.raises(mx.base.MXNetError, match="out of range"):
        mx.nd.argmax(x, axis=3)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.argmax(x, axis=(0, 1))
    with pytest.raises(mx.base.MXNetError, match="exclude"):
        mx.nd.argmax(x, axis=0, exclude=True)


# --- dot -----------------------------------------------------------------------------------


def np_dot(a, b, ta, tb):
    """MXNet's dot: lhs as (all but last, last) or, transposed, (first, rest)^T; rhs as
    (first, rest) or, transposed, (all but last, last)^T."""
    if a.ndim == 1 and b.ndim == 1:
        return np.array([np.dot(a, b)])
    a2 = a.reshape(a.shape[0], -1).T if ta else a.reshape(-1, a.shape[-1])
    b2 = b.reshape(-1, b.shape[-1]).T if tb else b.reshape(b.shape[0], -1)
    out_l = a.shape[1:] if ta else a.shape[:-1]
    out_r = b.shape[:-1] if tb else b.shape[1:]
    shape = (out_l if a.ndim > 1 else ()) + (out_r if b.ndim > 1 else ())
    return (a2.astype("float64") @ b2.astype("float64")).reshape(shape)


DOT_CASES = [
    ((2, 3), (3, 4), False, False),
    ((3, 2), (3, 4), True, False),
    ((2, 3), (4, 3), False, True),
    ((3, 2), (4, 3), True, True),
    ((3,), (3,), False, False),
    ((2, 3), (3,), False, False),
    ((2,), (2, 3), False, False),
    ((3,), (3, 4), True, False),
    ((2, 3), (3,), False, True),
    ((2, 3, 4), (4, 5), False, False),
    ((2, 3, 4), (4, 5, 6), False, False),
    ((4, 3, 2), (4, 5, 6), True, False),
    ((2, 3, 4), (5, 6, 4), False, True),
    ((4, 3, 2), (5, 6, 4), True, True),
    ((2, 6, 2), (2, 5), True, False),
    ((33, 65), (65, 17), False, False),
]


@pytest.mark.parametrize("ls,rs,ta,tb", DOT_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_matches_mxnet_semantics(ls, rs, ta, tb, dtype, ctx):
    a = RNG.uniform(-1, 1, size=ls).astype(dtype)
    b = RNG.uniform(-1, 1, size=rs).astype(dtype)
    r = mx.nd.dot(nd(a, ctx=ctx), nd(b, ctx=ctx), transpose_a=ta, transpose_b=tb)
    want = np_dot(a, b, ta, tb)
    assert r.shape == want.shape
    assert r.dtype == np.dtype(dtype)
    np.testing.assert_allclose(r.asnumpy(), want, rtol=1e-5, atol=1e-5)


def test_dot_shapes_from_mxnet(ctx):
    A = lambda *s: mx.nd.arange(int(np.prod(s)), ctx=ctx).reshape(s)  # noqa: E731
    assert mx.nd.dot(A(3), A(3)).shape == (1,)
    np.testing.assert_array_equal(mx.nd.dot(A(3), A(3)).asnumpy(), [5])
    assert mx.nd.dot(A(4, 3, 2), A(4, 5, 6), transpose_a=True).shape == (3, 2, 5, 6)
    assert mx.nd.dot(A(2, 6, 2), A(2, 5), transpose_a=True).shape == (6, 2, 5)
    np.testing.assert_array_equal(
        mx.nd.dot(A(2, 3), A(3, 4)).asnumpy(), [[20, 23, 26, 29], [56, 68, 80, 92]]
    )
    r = mx.nd.dot(A(2, 3), A(3, 4), forward_stype="default")
    assert r.shape == (2, 4)
    r = A(2, 3) @ A(3, 4)
    assert r.shape == (2, 4)
    assert A(2, 3).dot(A(3, 4)).shape == (2, 4)


def test_dot_other_dtypes(ctx):
    ai = np.array([[1, 2], [3, 4]], dtype="int32")
    bi = np.array([[5, 6], [7, 8]], dtype="int32")
    r = mx.nd.dot(nd(ai, ctx=ctx), nd(bi, ctx=ctx), transpose_b=True)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r.asnumpy(), ai @ bi.T)
    a64 = np.arange(12, dtype="int64").reshape(3, 4)
    np.testing.assert_array_equal(mx.nd.dot(nd(a64, ctx=ctx), nd(a64, ctx=ctx), transpose_a=True).asnumpy(), a64.T @ a64)
    ah = RNG.rand(8, 16).astype("float16")
    bh = RNG.rand(16, 4).astype("float16")
    r = mx.nd.dot(nd(ah, ctx=ctx), nd(bh, ctx=ctx))
    assert r.dtype == np.float16
    np.testing.assert_allclose(r.asnumpy(), ah.astype("float32") @ bh.astype("float32"), rtol=1e-2)


def test_large_dot(ctx):
    a = RNG.rand(300, 500).astype("float32")
    b = RNG.rand(500, 200).astype("float32")
    np.testing.assert_allclose(mx.nd.dot(nd(a, ctx=ctx), nd(b, ctx=ctx)).asnumpy(), a @ b, rtol=1e-4)
    np.testing.assert_allclose(
        mx.nd.dot(nd(a, ctx=ctx), nd(b.T.copy(), ctx=ctx), transpose_b=True).asnumpy(), a @ b, rtol=1e-4
    )
    out = mx.nd.zeros((300, 200), ctx=ctx)
    mx.nd.dot(nd(a, ctx=ctx), nd(b, ctx=ctx), out=out)
    np.testing.assert_allclose(out.asnumpy(), a @ b, rtol=1e-4)


def test_dot_errors(ctx):
    with pytest.raises(mx.base.MXNetError, match=r"dot: shape mismatch: \(2, 3\) X \(4, 5\)"):
        mx.nd.dot(mx.nd.ones((2, 3), ctx=ctx), mx.nd.ones((4, 5), ctx=ctx))
    with pytest.raises(mx.base.MXNetError, match="mismatch"):
        mx.nd.dot(mx.nd.ones((3,), ctx=ctx), mx.nd.ones((4,), ctx=ctx))
    with pytest.raises(mx.base.MXNetError, match="transpose"):
        mx.nd.dot(mx.nd.ones((3,), ctx=ctx), mx.nd.ones((3,), ctx=ctx), transpose_a=True)
    with pytest.raises(mx.base.MXNetError, match="mismatch"):
        mx.nd.dot(mx.nd.ones((2, 3, 4), ctx=ctx), mx.nd.ones((5, 2, 2), ctx=ctx), transpose_b=True)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.dot(mx.nd.ones((2, 3), dtype="float64", ctx=ctx), mx.nd.ones((3, 2), ctx=ctx))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.dot(mx.nd.ones((2, 3), ctx=ctx), mx.nd.ones((3, 2), ctx=ctx), transpose_c=True)


# --- batch_dot ----------------------------------------------------------------------------


@pytest.mark.parametrize("ta,tb", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("batch", [(2,), (3, 2), (40,)], ids=str)
def test_batch_dot_matches_numpy(ta, tb, batch, ctx):
    m, k, n = 3, 4, 5
    a = RNG.uniform(-1, 1, size=batch + ((k, m) if ta else (m, k))).astype("float32")
    b = RNG.uniform(-1, 1, size=batch + ((n, k) if tb else (k, n))).astype("float32")
    r = mx.nd.batch_dot(nd(a, ctx=ctx), nd(b, ctx=ctx), transpose_a=ta, transpose_b=tb)
    at = np.swapaxes(a, -1, -2) if ta else a
    bt = np.swapaxes(b, -1, -2) if tb else b
    want = np.matmul(at, bt)
    assert r.shape == want.shape
    np.testing.assert_allclose(r.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_large_batch_dot(ctx):
    a = RNG.rand(64, 32, 48).astype("float64")
    b = RNG.rand(64, 48, 16).astype("float64")
    np.testing.assert_allclose(mx.nd.batch_dot(nd(a, ctx=ctx), nd(b, ctx=ctx)).asnumpy(), np.matmul(a, b), rtol=1e-12)
    a = RNG.rand(2, 200, 300).astype("float32")
    b = RNG.rand(2, 300, 100).astype("float32")
    np.testing.assert_allclose(mx.nd.batch_dot(nd(a, ctx=ctx), nd(b, ctx=ctx)).asnumpy(), np.matmul(a, b), rtol=1e-4)
    ai = RNG.randint(-5, 5, size=(3, 2, 4)).astype("int32")
    bi = RNG.randint(-5, 5, size=(3, 4, 2)).astype("int32")
    np.testing.assert_array_equal(mx.nd.batch_dot(nd(ai, ctx=ctx), nd(bi, ctx=ctx)).asnumpy(), np.matmul(ai, bi))


def test_batch_dot_errors(ctx):
    with pytest.raises(mx.base.MXNetError, match="batch"):
        mx.nd.batch_dot(mx.nd.ones((2, 3, 4), ctx=ctx), mx.nd.ones((3, 4, 5), ctx=ctx))
    with pytest.raises(mx.base.MXNetError, match="mismatch"):
        mx.nd.batch_dot(mx.nd.ones((2, 3, 4), ctx=ctx), mx.nd.ones((2, 3, 5), ctx=ctx))
    with pytest.raises(mx.base.MXNetError, match="N >= 3"):
        mx.nd.batch_dot(mx.nd.ones((3, 4), ctx=ctx), mx.nd.ones((4, 5), ctx=ctx))

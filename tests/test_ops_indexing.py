"""Indexing and sorting operators against numpy and MXNet 1.9.1's behaviour: take, pick,
one_hot, where, Cast, gather_nd, scatter_nd, topk, sort, argsort."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx

pytestmark = pytest.mark.timeout(60)


def grid(dtype="float32"):
    return np.arange(12, dtype=dtype).reshape(3, 4)


# --- take -------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_matches_numpy(axis, mode, ctx):
    a = np.random.RandomState(0).randn(3, 4, 5).astype("float32")
    idx = np.array([[0, 2], [5, -1], [-7, 1]])
    r = mx.nd.take(mx.nd.array(a, ctx=ctx), mx.nd.array(idx, ctx=ctx), axis=axis, mode=mode)
    np.testing.assert_array_equal(r.asnumpy(), np.take(a, idx, axis=axis, mode=mode))
    assert r.dtype == np.float32


def test_take_index_types_and_truncation(ctx):
    a = grid()
    # Float indices truncate toward zero, then clip.
    r = mx.nd.take(mx.nd.array(a, ctx=ctx), mx.nd.array([1.7, 2.2, -0.5], ctx=ctx))
    np.testing.assert_array_equal(r.asnumpy(), a[[1, 2, 0]])
    for itype in ["int32", "int64", "uint8", "float64"]:
        r = mx.nd.take(mx.nd.array(a, ctx=ctx), mx.nd.array([1, 2], dtype=itype, ctx=ctx), axis=1)
        np.testing.assert_array_equal(r.asnumpy(), a[:, [1, 2]])
    r = mx.nd.take(mx.nd.array(a, dtype="int32", ctx=ctx), mx.nd.array([3, 0], ctx=ctx), axis=1)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r.asnumpy(), a[:, [3, 0]].astype("int32"))


def test_take_raise_and_errors(ctx):
    a = mx.nd.array(grid(), ctx=ctx)
    r = mx.nd.take(a, mx.nd.array([3, 0], ctx=ctx), axis=1, mode="raise")
    np.testing.assert_array_equal(r.asnumpy(), grid()[:, [3, 0]])
    # MXNet 1.9.1 on CPU checks bounds in raise mode; negative indices are out of bounds too.
    for bad in ([0, 7], [1, -1]):
        with pytest.raises(mx.base.MXNetError):
            mx.nd.take(a, mx.nd.array(bad, ctx=ctx), axis=1, mode="raise").asnumpy()
    with pytest.raises(mx.base.MXNetError):
        mx.nd.take(a, mx.nd.array([0], ctx=ctx), axis=2)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.take(a, mx.nd.array([0], ctx=ctx), mode="foo")


# --- pick -------------------------------------------------------------------------------


def test_pick(ctx):
    a = grid()
    x = mx.nd.array(a, ctx=ctx)
    r = mx.nd.pick(x, mx.nd.array([0, 1, 3], ctx=ctx))
    np.testing.assert_array_equal(r.asnumpy(), [0, 5, 11])
    r = mx.nd.pick(x, mx.nd.array([0, 1, 3], ctx=ctx), axis=1, keepdims=True)
    assert r.shape == (3, 1)
    np.testing.assert_array_equal(r.asnumpy(), [[0], [5], [11]])
    r = mx.nd.pick(x, mx.nd.array([0, 1, 2, 2], ctx=ctx), axis=0)
    np.testing.assert_array_equal(r.asnumpy(), [0, 5, 10, 11])
    # clip (default) and wrap
    np.testing.assert_array_equal(
        mx.nd.pick(x, mx.nd.array([0, 1, -1], ctx=ctx), axis=1).asnumpy(), [0, 5, 8]
    )
    np.testing.assert_array_equal(
        mx.nd.pick(x, mx.nd.array([0, 9, -1], ctx=ctx), axis=1, mode="wrap").asnumpy(), [0, 5, 11]
    )
    # the index may carry the kept axis
    np.testing.assert_array_equal(
        mx.nd.pick(x, mx.nd.array([[0], [1], [3]], ctx=ctx), axis=1).asnumpy(), [0, 5, 11]
    )
    b = np.arange(24, dtype="float32").reshape(2, 3, 4)
    idx = np.array([[0, 1, 2, 0], [2, 2, 2, 1]])
    r = mx.nd.pick(mx.nd.array(b, ctx=ctx), mx.nd.array(idx, ctx=ctx), axis=1)
    np.testing.assert_array_equal(r.asnumpy(), np.take_along_axis(b, idx[:, None, :], 1)[:, 0, :])
    r = mx.nd.pick(mx.nd.array(a, dtype="int32", ctx=ctx), mx.nd.array([0, 1, 2], ctx=ctx), axis=1)
    assert r.dtype == np.int32


def test_pick_errors(ctx):
    x = mx.nd.array(grid(), ctx=ctx)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.pick(x, mx.nd.array([0, 1], ctx=ctx), axis=1)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.pick(x, mx.nd.array([0, 1, 2], ctx=ctx), axis=None)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.pick(x, mx.nd.array([0, 1, 2], ctx=ctx), mode="raise")


# --- one_hot ----------------------------------------------------------------------------


def test_one_hot(ctx):
    r = mx.nd.one_hot(mx.nd.array([0, 2, 5, -1], ctx=ctx), depth=4)
    assert r.shape == (4, 4) and r.dtype == np.float32
    # out-of-range indices give a row of off_value
    np.testing.assert_array_equal(
        r.asnumpy(), np.eye(4, dtype="float32")[[0, 2, 0, 0]] * [[1], [1], [0], [0]]
    )
    r = mx.nd.one_hot(
        mx.nd.array([[0, 2], [1, 3]], ctx=ctx), depth=3, on_value=5, off_value=-1, dtype="int32"
    )
    assert r.shape == (2, 2, 3) and r.dtype == np.int32
    np.testing.assert_array_equal(
        r.asnumpy(), [[[5, -1, -1], [-1, -1, 5]], [[-1, 5, -1], [-1, -1, -1]]]
    )
    r = mx.nd.one_hot(mx.nd.array([1.7, 2.2], ctx=ctx), depth=3, dtype="uint8")
    np.testing.assert_array_equal(r.asnumpy(), [[0, 1, 0], [0, 0, 1]])
    assert mx.nd.one_hot(mx.nd.array([1, 2], ctx=ctx), depth=0).shape == (2, 0)
    for bad in ({"depth": -1}, {}, {"depth": 3, "dtype": "bool"}):
        with pytest.raises(mx.base.MXNetError):
            mx.nd.one_hot(mx.nd.array([1, 2], ctx=ctx), **bad)


# --- where ------------------------------------------------------------------------------


def test_where(ctx):
    a = grid()
    c = np.array([[1, 0, 0, 2], [0, 0, 1, 0], [1, 1, 1, np.nan]], dtype="float32")
    r = mx.nd.where(mx.nd.array(c, ctx=ctx), mx.nd.array(a, ctx=ctx), mx.nd.array(-a, ctx=ctx))
    np.testing.assert_array_equal(r.asnumpy(), np.where(c != 0, a, -a))
    # a 1-d condition selects whole rows
    r = mx.nd.where(mx.nd.array([1, 0, 1], ctx=ctx), mx.nd.array(a, ctx=ctx), mx.nd.array(-a, ctx=ctx))
    np.testing.assert_array_equal(r.asnumpy(), np.where(np.array([1, 0, 1])[:, None] != 0, a, -a))
    r = mx.nd.where(
        mx.nd.array([1, 0, 1], dtype="uint8", ctx=ctx),
        mx.nd.array([1, 2, 3], dtype="int32", ctx=ctx),
        mx.nd.array([4, 5, 6], dtype="int32", ctx=ctx),
    )
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r.asnumpy(), [1, 5, 3])


def test_where_errors(ctx):
    x, y = mx.nd.array(grid(), ctx=ctx), mx.nd.array(-grid(), ctx=ctx)
    for cond in ([1, 0], [[1, 0, 1]], [1, 0, 1, 1]):
        with pytest.raises(mx.base.MXNetError):
            mx.nd.where(mx.nd.array(cond, ctx=ctx), x, y)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.where(mx.nd.array(grid(), ctx=ctx), x, y[0])
    with pytest.raises(mx.base.MXNetError):
        mx.nd.where(mx.nd.array(grid(), ctx=ctx), x, y.astype("int32"))


# --- Cast -------------------------------------------------------------------------------


def test_cast_truncates_like_c(ctx):
    x = np.array([-2.7, -0.5, 0.5, 1.5, 2.5, 300.7, -300.2], dtype="float32")
    nd = mx.nd.array(x, ctx=ctx)
    np.testing.assert_array_equal(nd.astype("int32").asnumpy(), x.astype("int32"))
    np.testing.assert_array_equal(mx.nd.cast(nd, dtype="int64").asnumpy(), x.astype("int64"))
    # float -> 8-bit goes through int32 and wraps, as MXNet's C casts do
    np.testing.assert_array_equal(
        mx.nd.cast(nd, dtype="uint8").asnumpy(), [254, 0, 0, 1, 2, 44, 212]
    )
    np.testing.assert_array_equal(mx.nd.Cast(nd, dtype="int8").asnumpy(), [-2, 0, 0, 1, 2, 44, -44])
    special = mx.nd.array([np.nan, np.inf, 1e10], ctx=ctx)
    np.testing.assert_array_equal(special.astype("int32").asnumpy(), [-(2**31)] * 3)
    np.testing.assert_array_equal(mx.nd.cast(special, dtype="bool").asnumpy(), [True] * 3)


@pytest.mark.parametrize(
    "src", ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool"]
)
@pytest.mark.parametrize(
    "dst", ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool"]
)
def test_cast_all_pairs(src, dst, ctx):
    x = np.array([0, 1, 2, 5, 100, 127], dtype=src)
    r = mx.nd.cast(mx.nd.array(x, dtype=src, ctx=ctx), dtype=dst)
    assert r.dtype == np.dtype(dst)
    assert r.shape == x.shape
    np.testing.assert_array_equal(r.asnumpy(), x.astype(dst))


def test_cast_integers_wrap(ctx):
    i = mx.nd.array([300, -1, 255, 128], dtype="int32", ctx=ctx)
    np.testing.assert_array_equal(mx.nd.cast(i, dtype="uint8").asnumpy(), [44, 255, 255, 128])
    np.testing.assert_array_equal(mx.nd.cast(i, dtype="int8").asnumpy(), [44, -1, -1, -128])
    big = mx.nd.array([2**40 + 5], dtype="int64", ctx=ctx)
    np.testing.assert_array_equal(mx.nd.cast(big, dtype="int32").asnumpy(), [5])
    h = mx.nd.cast(mx.nd.array([70000.0, 1e-8], ctx=ctx), dtype="float16")
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h.asnumpy(), np.array([np.inf, 0], dtype="float16"))


def test_cast_errors(ctx):
    with pytest.raises(mx.base.MXNetError):
        mx.nd.cast(mx.nd.array([1], ctx=ctx))
    with pytest.raises((mx.base.MXNetError, TypeError)):
        mx.nd.cast(mx.nd.array([1], ctx=ctx), dtype="foo")


# --- gather_nd / scatter_nd -------------------------------------------------------------


def test_gather_scatter_nd(ctx):
    a = grid()
    idx = np.array([[0, 1, 2], [3, -1, 0]])
    r = mx.nd.gather_nd(mx.nd.array(a, ctx=ctx), mx.nd.array(idx, ctx=ctx))
    np.testing.assert_array_equal(r.asnumpy(), a[tuple(idx)])
    r = mx.nd.gather_nd(mx.nd.array(a, ctx=ctx), mx.nd.array([[2, 0]], dtype="int32", ctx=ctx))
    np.testing.assert_array_equal(r.asnumpy(), a[[2, 0]])
    with pytest.raises(IndexError):
        mx.nd.gather_nd(mx.nd.array(a, ctx=ctx), mx.nd.array([[5, 0]], ctx=ctx)).asnumpy()
    s = mx.nd.scatter_nd(mx.nd.array([1, 2, 3], ctx=ctx), mx.nd.array([[0, 1, 2], [3, 0, 0]], ctx=ctx), shape=(3, 4))
    want = np.zeros((3, 4), "float32")
    want[0, 3], want[1, 0], want[2, 0] = 1, 2, 3
    np.testing.assert_array_equal(s.asnumpy(), want)


# --- topk / sort / argsort --------------------------------------------------------------

X = np.array([[3, 1, 2, 1, 5], [0, 4, 4, -1, 2]], dtype="float32")


def test_topk_defaults_and_ret_types(ctx):
    x = mx.nd.array(X, ctx=ctx)
    r = mx.nd.topk(x)
    assert r.shape == (2, 1) and r.dtype == np.float32
    np.testing.assert_array_equal(r.asnumpy(), [[4], [1]])
    v, i = mx.nd.topk(x, k=2, ret_typ="both")
    np.testing.assert_array_equal(v.asnumpy(), [[5, 3], [4, 4]])
    np.testing.assert_array_equal(i.asnumpy(), [[4, 0], [1, 2]])
    m = mx.nd.topk(x, k=2, ret_typ="mask")
    np.testing.assert_array_equal(m.asnumpy(), [[1, 0, 0, 0, 1], [0, 1, 1, 0, 0]])
    r = mx.nd.topk(x, k=3, ret_typ="value", is_ascend=True)
    np.testing.assert_array_equal(r.asnumpy(), np.sort(X, axis=1)[:, :3])


def test_topk_axes_and_k(ctx):
    x = mx.nd.array(X, ctx=ctx)
    v, i = mx.nd.topk(x, k=1, axis=0, ret_typ="both")
    assert v.shape == (1, 5)
    np.testing.assert_array_equal(i.asnumpy(), [[0, 1, 1, 0, 0]])
    v, i = mx.nd.topk(x, k=3, axis=None, ret_typ="both")
    assert v.shape == (3,)
    np.testing.assert_array_equal(v.asnumpy(), [5, 4, 4])
    np.testing.assert_array_equal(i.asnumpy(), [4, 6, 7])
    assert mx.nd.topk(x, k=3, axis=None, ret_typ="mask").shape == (2, 5)
    # k <= 0 keeps every element
    for k in (0, -1):
        v = mx.nd.topk(x, k=k, ret_typ="value")
        np.testing.assert_array_equal(v.asnumpy(), -np.sort(-X, axis=1))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.topk(x, k=6)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.topk(x, axis=2)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.topk(x, ret_typ="foo")


def test_topk_dtypes(ctx):
    x = mx.nd.array(X, ctx=ctx)
    for d in ["int32", "uint8", "int64", "float16", "float64"]:
        r = mx.nd.topk(x, k=2, dtype=d)
        assert r.dtype == np.dtype(d)
        np.testing.assert_array_equal(r.asnumpy(), [[4, 0], [1, 2]])
    v, i = mx.nd.topk(x, k=2, ret_typ="both", dtype="int64")
    assert v.dtype == np.float32 and i.dtype == np.int64
    # the mask has the data's dtype whatever dtype says
    assert mx.nd.topk(x, k=2, ret_typ="mask", dtype="int64").dtype == np.float32
    v, i = mx.nd.topk(x.astype("int32"), k=2, ret_typ="both")
    assert v.dtype == np.int32 and i.dtype == np.float32
    with pytest.raises(mx.base.MXNetError):
        mx.nd.topk(x, dtype="bool")


def test_ties_are_stable(ctx):
    t = mx.nd.array([2, 1, 2, 1, 2, 1, 2], ctx=ctx)
    np.testing.assert_array_equal(mx.nd.topk(t, k=7).asnumpy(), [0, 2, 4, 6, 1, 3, 5])
    np.testing.assert_array_equal(
        mx.nd.topk(t, k=7, is_ascend=True).asnumpy(), [1, 3, 5, 0, 2, 4, 6]
    )
    np.testing.assert_array_equal(mx.nd.argsort(t).asnumpy(), [1, 3, 5, 0, 2, 4, 6])
    np.testing.assert_array_equal(
        mx.nd.argsort(t, is_ascend=False).asnumpy(), [0, 2, 4, 6, 1, 3, 5]
    )


def check_sorts(a, x, axis):
    s = mx.nd.sort(x, axis=axis)
    assert s.dtype == a.dtype
    np.testing.assert_array_equal(s.asnumpy(), np.sort(a, axis=axis, kind="stable"))
    d = mx.nd.sort(x, axis=axis, is_ascend=False)
    np.testing.assert_array_equal(
        d.asnumpy(), np.flip(np.sort(a, axis=axis), axis=0 if axis is None else axis)
    )
    i = mx.nd.argsort(x, axis=axis)
    assert i.dtype == np.float32
    if axis is None:
        # MXNet 1.9.1 does not order ties of a flattened argsort; rsmx keeps them stable.
        idx = i.asnumpy().astype(int)
        np.testing.assert_array_equal(np.sort(idx), np.arange(a.size))
        np.testing.assert_array_equal(a.ravel()[idx], np.sort(a, axis=None))
    else:
        np.testing.assert_array_equal(i.asnumpy(), np.argsort(a, axis=axis, kind="stable"))
    assert mx.nd.argsort(x, axis=axis, dtype="int64").dtype == np.int64


@pytest.mark.parametrize("axis", [0, 1, -1, None])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8", "uint8", "int64"])
def test_sort_and_argsort_match_numpy(axis, dtype, ctx):
    a = np.random.RandomState(1).randint(0, 50, size=(6, 7)).astype(dtype)
    check_sorts(a, mx.nd.array(a, dtype=dtype, ctx=ctx), axis)


def test_sort_float16(ctx):
    """MXNet 1.9.1's CPU sort rejects float16; rsmx sorts it like any float."""
    a = np.random.RandomState(1).randint(0, 50, size=(6, 7)).astype("float16")
    for axis in (0, -1, None):
        check_sorts(a, mx.nd.array(a, dtype="float16", ctx=ctx), axis)


def test_sort_large(ctx):
    a = np.random.RandomState(2).rand(300, 1000).astype("float32")
    np.testing.assert_array_equal(mx.nd.sort(mx.nd.array(a, ctx=ctx)).asnumpy(), np.sort(a, axis=-1))
    np.testing.assert_array_equal(
        mx.nd.argsort(mx.nd.array(a, ctx=ctx), axis=0, dtype="int32").asnumpy(),
        np.argsort(a, axis=0, kind="stable"),
    )
    flat = a.ravel()
    np.testing.assert_array_equal(
        mx.nd.topk(mx.nd.array(flat, ctx=ctx), k=10, ret_typ="value").asnumpy(), -np.sort(-flat)[:10]
    )


def test_nan_sorts_last_ascending(ctx):
    """rsmx's choice (MXNet 1.9.1 leaves NaN wherever its comparisons put it): NaN is
    greater than every number, as in numpy."""
    x = mx.nd.array([1, np.nan, 3, np.nan, -np.inf], ctx=ctx)
    np.testing.assert_array_equal(mx.nd.argsort(x).asnumpy(), [4, 0, 2, 1, 3])
    s = mx.nd.sort(x).asnumpy()
    np.testing.assert_array_equal(s[:3], [-np.inf, 1, 3])
    assert np.isnan(s[3:]).all()


def test_sorting_rejects_bool(ctx):
    b = mx.nd.array([1, 0, 1], ctx=ctx).astype("bool")
    for f in (mx.nd.sort, mx.nd.argsort, mx.nd.topk):
        with pytest.raises(mx.base.MXNetError):
            f(b).asnumpy()

"""`cumsum`, `histogram` and `khatri_rao`: against numpy and MXNet 1.9.1's results (the
literal expectations below were printed by MXNet 1.9.1), with gradients."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError
from rsmx.test_utils import check_numeric_gradient


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
def test_cumsum_matches_numpy(axis, dtype, ctx):
    rng = np.random.RandomState(0)
    x = (rng.uniform(-5, 5, (3, 4, 5)) if "float" in dtype else rng.randint(-50, 50, (3, 4, 5)))
    x = x.astype(dtype)
    got = mx.nd.cumsum(mx.nd.array(x, dtype=dtype, ctx=ctx), axis=axis)
    want = np.cumsum(x, axis=axis, dtype=x.dtype)  # MXNet keeps int32 sums int32
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 2e-2 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(got.asnumpy().astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol)


def test_cumsum_dtypes_and_wrapping(ctx):
    a = mx.nd.array(np.arange(12).reshape(3, 4), ctx=ctx)
    assert mx.nd.cumsum(a.astype("bool")).dtype == np.int64
    assert mx.nd.cumsum(a.astype("uint8")).dtype == np.uint8
    assert mx.nd.cumsum(a.astype("int8"), dtype="float16").dtype == np.float16
    # uint8 sums wrap, as MXNet's do.
    got = mx.nd.cumsum(a.astype("uint8") * 30, axis=0).asnumpy().tolist()
    assert got == [[0, 30, 60, 90], [120, 180, 240, 44], [104, 194, 28, 118]]
    big = mx.nd.array(np.full((1 << 17) + 3, 0.5), ctx=ctx)
    np.testing.assert_allclose(mx.nd.cumsum(big).asnumpy(), 0.5 * np.arange(1, (1 << 17) + 4))


def test_cumsum_gradient_and_shapes(ctx):
    x = mx.nd.array(np.random.rand(2, 3), ctx=ctx)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.cumsum(x, axis=0)
    y.backward(mx.nd.array(np.arange(6).reshape(2, 3), ctx=ctx))
    assert x.grad.asnumpy().tolist() == [[3, 5, 7], [3, 4, 5]]
    with mx.autograd.record():
        y = mx.nd.cumsum(x)
    y.backward(mx.nd.arange(6, ctx=ctx))
    assert x.grad.asnumpy().tolist() == [[15, 15, 14], [12, 9, 5]]
    s = mx.sym.cumsum(mx.sym.var("a"))
    assert s.infer_shape(a=(2, 3))[1] == [(6,)]
    check_numeric_gradient(mx.sym.cumsum(mx.sym.var("a"), axis=1),
                           [np.random.rand(2, 3, 4)], ctx=ctx)


def test_cumsum_adds_into_its_output(ctx):
    x = mx.nd.array([[1.0, 2.0], [3.0, 4.0]], ctx=ctx)
    x.attach_grad(grad_req="add")
    for _ in range(2):
        with mx.autograd.record():
            y = mx.nd.cumsum(x, axis=1)
        y.backward()
    assert x.grad.asnumpy().tolist() == [[4, 2], [4, 2]]


def test_cumsum_errors(ctx):
    with pytest.raises(MXNetError, match=r"cumsum.*axis 2.*2 dimensions"):
        mx.nd.cumsum(mx.nd.zeros((2, 3), ctx=ctx), axis=2)
    with pytest.raises(MXNetError, match=r"cumsum.*dtype"):
        mx.nd.cumsum(mx.nd.zeros((2, 3), ctx=ctx), dtype="uint16")


def test_histogram_as_mxnet(ctx):
    x = mx.nd.array([[0, 1], [2, 2], [3, 4]], ctx=ctx)
    h, e = mx.nd.histogram(x, bins=5, range=(0, 5))
    assert h.dtype == np.int64 and h.asnumpy().tolist() == [1, 1, 2, 1, 1]
    assert e.asnumpy().tolist() == [0, 1, 2, 3, 4, 5]
    h, e = mx.nd.histogram(x, bins=mx.nd.array([0.0, 2.1, 3.0], ctx=ctx))
    assert h.asnumpy().tolist() == [4, 1]
    np.testing.assert_allclose(e.asnumpy(), [0, 2.1, 3])
    d = np.random.RandomState(1).uniform(-3, 3, 50).astype(np.float16)
    h, e = mx.nd.histogram(mx.nd.array(d, dtype="float16", ctx=ctx), bins=7, range=(-2.5, 2.0))
    assert h.asnumpy().tolist() == [9, 5, 5, 5, 3, 6, 4]
    assert e.dtype == np.float16
    assert e.asnumpy().tolist() == [-2.5, -1.857421875, -1.2138671875, -0.5712890625,
                                    0.0714111328125, 0.71435546875, 1.357421875, 2.0]
    di = [0, 4, -2, 1, 3, -5, -3, 5, 2, 2, 4, 2, -2, 7, 5, 9, 9, -5, 3, 2, 2, -4, -4, 8, -2, -5,
          3, 8, 8, 1, -1, 0, 1, -3, 7, 6, 0, 6, 2, 8]
    h, e = mx.nd.histogram(mx.nd.array(di, dtype="int32", ctx=ctx), bins=4, range=(0, 7))
    assert h.asnumpy().tolist() == [3, 9, 5, 6] and e.asnumpy().tolist() == [0, 1, 3, 5, 7]
    h, e = mx.nd.histogram(mx.nd.array([2.0, 2.0, 3.0, np.nan], ctx=ctx), bins=3, range=(2, 2))
    assert h.asnumpy().tolist() == [0, 2, 0]
    np.testing.assert_allclose(e.asnumpy(), [1.5, 1.8333334, 2.1666667, 2.5])


def test_histogram_without_range_and_as_symbol(ctx):
    d = np.random.RandomState(2).normal(size=200).astype(np.float32)
    h, e = mx.nd.histogram(mx.nd.array(d, ctx=ctx), bins=6)
    wh, we = np.histogram(d, bins=6)
    assert h.dtype == np.float32 and h.asnumpy().tolist() == wh.tolist()
    np.testing.assert_allclose(e.asnumpy(), we, rtol=1e-6)
    s = mx.sym.histogram(mx.sym.var("a"), bins=4, range=(0, 1))
    assert s.infer_shape(a=(3,))[1] == [(4,), (5,)]
    assert s.infer_type(a=np.float64)[1] == [np.int64, np.float64]
    many = np.random.RandomState(3).uniform(0, 1, 100000).astype(np.float32)
    h, e = mx.nd.histogram(mx.nd.array(many, ctx=ctx), bins=mx.nd.array(np.linspace(0, 1, 33),
                                                                         ctx=ctx))
    assert h.asnumpy().tolist() == np.histogram(many, bins=e.asnumpy())[0].tolist()


def test_histogram_errors(ctx):
    x = mx.nd.zeros((4,), ctx=ctx)
    with pytest.raises(MXNetError, match=r"_histogram.*bin_cnt and range"):
        mx.nd._internal._histogram(x, bin_cnt=3)
    with pytest.raises(MXNetError, match=r"_histogram.*range"):
        mx.nd._internal._histogram(x, bin_cnt=3, range=(2, 1))
    with pytest.raises(MXNetError, match=r"_histogram.*at least 2 edges"):
        mx.nd._internal._histogram(x, mx.nd.zeros((1,), ctx=ctx))
    with pytest.raises(MXNetError, match=r"_histogram.*bins have dtype float64"):
        mx.nd._internal._histogram(x, mx.nd.zeros((3,), dtype="float64", ctx=ctx))


def test_khatri_rao(ctx):
    a = mx.nd.array([[1, -1], [2, -3]], ctx=ctx)
    b = mx.nd.array([[1, 4], [2, 5], [3, 6]], ctx=ctx)
    assert mx.nd.khatri_rao(a, b).asnumpy().tolist() == [
        [1, -4], [2, -5], [3, -6], [2, -12], [4, -15], [6, -18]]
    rng = np.random.RandomState(4)
    ms = [rng.uniform(-1, 1, (r, 3)) for r in (2, 4, 3)]
    want = np.stack([np.kron(np.kron(ms[0][:, k], ms[1][:, k]), ms[2][:, k]) for k in range(3)], 1)
    got = mx.nd.khatri_rao(*[mx.nd.array(m, dtype="float64", ctx=ctx) for m in ms])
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-12)
    assert mx.nd.khatri_rao(a).asnumpy().tolist() == [[1, -1], [2, -3]]
    v = mx.sym.var
    check_numeric_gradient(mx.sym.khatri_rao(v("x"), v("y"), num_args=2),
                           [rng.rand(2, 3), rng.rand(3, 3)], ctx=ctx)
    with pytest.raises(MXNetError, match=r"khatri_rao.*columns"):
        mx.nd.khatri_rao(a, mx.nd.zeros((3, 3), ctx=ctx))

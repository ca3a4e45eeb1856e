"""Reductions, index reductions, their gradients and the view operators (broadcast_to and
the other gathers) on GPUs against the CPU operators, for every dtype the CPU supports.
Runs on real GPUs, and in CI on fake ones (``RSMX_FAKE_GPU=2``)."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from gpu_bind import both

pytestmark = pytest.mark.gpu

FLOATS = ["float32", "float64", "float16"]
NUMERIC = FLOATS + ["uint8", "int8", "int32", "int64"]
REDUCERS = ["sum", "mean", "prod", "max", "min", "nansum", "nanprod"]


def data(shape, dtype, rng, nan=False):
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -20), min(info.max, 20), size=shape).astype(dtype)
    x = rng.uniform(0.5, 1.5, size=shape)
    x[..., ::3] *= -1
    if nan and x.size > 4:
        x.reshape(-1)[3] = np.nan
    return x.astype(dtype)


def close(gpu, cpu, dtype, scale=None):
    """The GPU's result against the CPU's: equal for integers, else within the dtype's
    rounding of an accumulation of magnitude `scale`."""
    got, want = gpu.asnumpy(), cpu.asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    if not np.issubdtype(got.dtype, np.floating):
        np.testing.assert_array_equal(got, want)
        return
    rtol = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}[str(got.dtype)]
    atol = rtol * (1 if scale is None else max(1.0, scale))
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=True)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_reductions_match_the_cpu(dtype):
    rng = np.random.default_rng(1)
    x = data((3, 4, 5), dtype, rng, nan=True)
    c, g = both(x)
    forms = [{}, {"axis": 1}, {"axis": (0, 2), "keepdims": True}, {"axis": -1, "exclude": True}]
    for name in REDUCERS:
        for kw in forms:
            close(getattr(mx.nd, name)(g, **kw), getattr(mx.nd, name)(c, **kw), dtype, 100)
    for ord in (1, 2):
        for kw in ({}, {"axis": (1, 2), "keepdims": True}):
            close(mx.nd.norm(g, ord=ord, **kw), mx.nd.norm(c, ord=ord, **kw), dtype, 100)
    for name in ("argmax", "argmin"):
        for kw in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}):
            close(getattr(mx.nd, name)(g, **kw), getattr(mx.nd, name)(c, **kw), dtype)
    close(mx.nd.argmax_channel(g), mx.nd.argmax_channel(c), dtype)


@pytest.mark.parametrize("n", [0, 1, 31, 257, 100003])
def test_long_and_empty_reductions(n):
    rng = np.random.default_rng(n)
    x = rng.uniform(-3, 3, n).astype("float32")
    c, g = both(x)
    scale = float(np.abs(x).sum())
    for name in ("sum", "mean", "max", "min", "prod", "nansum"):
        if n == 0 and name in ("max", "min"):
            # An empty axis has no maximum or minimum, as in MXNet.
            for a in (g, c):
                with pytest.raises(mx.MXNetError, match="empty axis"):
                    getattr(mx.nd, name)(a)
            continue
        close(getattr(mx.nd, name)(g), getattr(mx.nd, name)(c), "float32", scale)
    close(mx.nd.norm(g), mx.nd.norm(c), "float32")
    if n:
        close(mx.nd.argmax(g, axis=0), mx.nd.argmax(c, axis=0), "float32")
    m = rng.uniform(-3, 3, (2, n, 3)).astype("float64")
    cm, gm = both(m)
    for kw in ({"axis": 1}, {"axis": (0, 2)}):
        close(mx.nd.sum(gm, **kw), mx.nd.sum(cm, **kw), "float64", scale)
        if n == 0 and kw["axis"] == 1:
            continue
        close(mx.nd.max(gm, **kw), mx.nd.max(cm, **kw), "float64")
    # No outputs from a long reduction.
    e = np.zeros((0, n, 2), "float32")
    close(mx.nd.sum(mx.nd.array(e, ctx=mx.gpu(0)), axis=1), mx.nd.sum(mx.nd.array(e), axis=1),
          "float32")
    # Many short runs: (2, 40, n) over axis 1, a column reduction.
    if n <= 257:
        w = rng.uniform(-3, 3, (2, 40, n)).astype("float32")
        cw, gw = both(w)
        close(mx.nd.mean(gw, axis=1), mx.nd.mean(cw, axis=1), "float32", 3)


def test_norm_out_dtype_and_integer_norm():
    rng = np.random.default_rng(2)
    c, g = both(rng.uniform(-2, 2, (4, 6)).astype("float32"))
    for out in ("float16", "float64", "int32", "int64", "int8"):
        close(mx.nd.norm(g, axis=1, out_dtype=out), mx.nd.norm(c, axis=1, out_dtype=out), out)
    for dtype in ("int8", "int32", "int64", "uint8"):
        c, g = both(data((5, 7), dtype, rng))
        close(mx.nd.norm(g, axis=0), mx.nd.norm(c, axis=0), dtype)
        close(mx.nd.norm(g), mx.nd.norm(c), dtype)


def grads(sym, x: np.ndarray, head: np.ndarray, ctx, dtype, passes=1, req="write"):
    """The output and the data gradient of a bound `sym` after `passes` backward passes."""
    ex = sym.simple_bind(ctx, grad_req={"data": req}, type_dict={"data": dtype}, data=x.shape)
    ex.arg_dict["data"][:] = x
    ex.grad_dict["data"][:] = 0
    for _ in range(passes):
        out = ex.forward(is_train=True)[0]
        ex.backward(mx.nd.array(head, ctx=ctx, dtype=dtype))
    return out, ex.grad_dict["data"]


def test_reductions_write_given_outputs_and_add_into_gradients():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    g = mx.nd.array(x, ctx=mx.gpu(0))
    out = mx.nd.ones((4,), ctx=mx.gpu(0))
    mx.nd.sum(g, axis=0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), x.sum(0))
    sym = mx.sym.max(mx.sym.Variable("data"), axis=1)
    _, dx = grads(sym, x, np.ones(3, "float32"), mx.gpu(0), "float32", passes=2, req="add")
    np.testing.assert_array_equal(dx.asnumpy(), 2 * (x == x.max(1, keepdims=True)))


@pytest.mark.parametrize("name", REDUCERS + ["norm"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_reduction_gradients_match_the_cpu(name, dtype):
    rng = np.random.default_rng(3)
    x = data((3, 4, 5), dtype, rng, nan=name.startswith("nan"))
    kw = {"axis": (0, 2), "keepdims": name == "mean"}
    if name != "norm":
        kw["exclude"] = name == "sum"
        kw["axis"] = 1 if name == "sum" else kw["axis"]
    sym = getattr(mx.sym, name)(mx.sym.Variable("data"), **kw)
    shape = getattr(mx.nd, name)(mx.nd.array(x, dtype=dtype), **kw).shape
    head = rng.uniform(-1, 1, shape).astype(dtype)
    cpu = grads(sym, x, head, mx.cpu(), dtype)
    gpu = grads(sym, x, head, mx.gpu(0), dtype)
    close(gpu[0], cpu[0], dtype, 10)
    close(gpu[1], cpu[1], dtype)


VIEWS = [
    ("broadcast_to", (3, 1, 5), {"shape": (3, 4, 5)}),
    ("broadcast_axis", (1, 4, 1), {"axis": (0, 2), "size": (2, 3)}),
    ("transpose", (3, 4, 5), {"axes": (2, 0, 1)}),
    ("slice", (6, 7), {"begin": (1, None), "end": (5, None), "step": (2, -1)}),
    ("tile", (2, 3), {"reps": (2, 1, 2)}),
    ("flip", (4, 5), {"axis": 1}),
]


@pytest.mark.parametrize("name, shape, kw", VIEWS + [
    ("repeat", (3, 2), {"repeats": 2, "axis": 0}),
    ("SwapAxis", (3, 4, 2), {"dim1": 0, "dim2": 2}),
    ("slice_axis", (5, 4), {"axis": 0, "begin": 1, "end": 4}),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_view_gradients_match_the_cpu(name, shape, kw, dtype):
    rng = np.random.default_rng(5)
    x = data(shape, dtype, rng)
    sym = getattr(mx.sym, name)(mx.sym.Variable("data"), **kw)
    out_shape = getattr(mx.nd, name)(mx.nd.array(x, dtype=dtype), **kw).shape
    head = rng.uniform(-1, 1, out_shape).astype(dtype)
    for req, passes in (("write", 1), ("add", 2)):
        cpu = grads(sym, x, head, mx.cpu(), dtype, passes, req)
        gpu = grads(sym, x, head, mx.gpu(0), dtype, passes, req)
        close(gpu[0], cpu[0], dtype)
        close(gpu[1], cpu[1], dtype)


@pytest.mark.parametrize("dtype", NUMERIC + ["bool"])
def test_views_match_the_cpu(dtype):
    rng = np.random.default_rng(4)
    for name, shape, kw in VIEWS:
        x = data(shape, "int8" if dtype == "bool" else dtype, rng)
        x = (x > 0) if dtype == "bool" else x
        c, g = both(x, dtype)
        close(getattr(mx.nd, name)(g, **kw), getattr(mx.nd, name)(c, **kw), dtype)
    lhs, rhs = both(data((2, 1, 3), "float32", rng))
    like_c, like_g = both(np.zeros((2, 5, 3), "float32"))
    close(mx.nd.broadcast_like(rhs, like_g), mx.nd.broadcast_like(lhs, like_c), "float32")
    sym = mx.sym.broadcast_to(mx.sym.Variable("data"), shape=(3, 4))
    x = data((1, 4), "float32", rng)
    _, dx = grads(sym, x, np.ones((3, 4), "float32"), mx.gpu(0), "float32", passes=2, req="add")
    np.testing.assert_array_equal(dx.asnumpy(), np.full((1, 4), 6.0, "float32"))

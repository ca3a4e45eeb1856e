"""The data-moving, cast, sorting and loss operators on GPUs against the CPU operators:
joins and splits, casts, reshapes and copies, MakeLoss, the dot backward, sort, argsort
and topk; forward, and backward through bound executors with req write and add, for every
dtype the CPU operator takes. Runs on real GPUs, and in CI on fake ones
(``RSMX_FAKE_GPU=2``)."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from gpu_bind import bind_and_run, both

pytestmark = pytest.mark.gpu

FLOATS = ["float32", "float64", "float16"]
INTS = ["uint8", "int8", "int32", "int64"]
ALL = FLOATS + INTS
TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}


def close(gpu, cpu, exact=False) -> None:
    got, want = gpu.asnumpy(), cpu.asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact or got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    tol = TOL[str(got.dtype)]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol, equal_nan=True)


def data(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in INTS:
        ii = np.iinfo(dtype)
        return rng.integers(max(ii.min, -100), min(ii.max, 100) + 1, shape).astype(dtype)
    return rng.uniform(-5, 5, shape).astype(dtype)


def run(sym, args: dict, ctx, grad, head=None, req="write", passes=1):
    """The outputs and the gradients of `grad` after `passes` backward passes."""
    ex = bind_and_run(sym, args, ctx, grad, head, req, passes)
    return [o.copy() for o in ex.outputs] + [ex.grad_dict[k] for k in grad]


def same_on_both(sym, args: dict, grad=(), head=None, req="write", passes=1, exact=False):
    cpu = run(sym, args, mx.cpu(), grad, head, req, passes)
    gpu = run(sym, args, mx.gpu(0), grad, head, req, passes)
    for g, c in zip(gpu, cpu, strict=True):
        close(g, c, exact)


def heads(sym, args):
    shapes = {k: v.shape for k, v in args.items()}
    types = {k: v.dtype for k, v in args.items()}
    _, outs, _ = sym.infer_shape(**shapes)
    _, otypes, _ = sym.infer_type(**types)
    return [data(np.dtype(t).name, s, 9) for s, t in zip(outs, otypes, strict=True)]


@pytest.mark.parametrize("dtype", ALL + ["bool"])
def test_joins_and_splits_forward(dtype):
    for shapes, dim in [([(2, 3), (2, 1), (2, 0)], 1), ([(4,)] * 20, 0), ([(0, 3)] * 3, 0),
                        ([(2, 3, 5), (2, 3, 1)], -1), ([(33, 7), (1, 7)], 0)]:
        xs = [both(data(dtype, s, i)) for i, s in enumerate(shapes)]
        close(mx.nd.concat(*[g for _, g in xs], dim=dim),
              mx.nd.concat(*[c for c, _ in xs], dim=dim))
    for axis in (0, 1, 2, -1):
        xs = [both(data(dtype, (3, 4), i)) for i in range(5)]
        close(mx.nd.stack(*[g for _, g in xs], axis=axis),
              mx.nd.stack(*[c for c, _ in xs], axis=axis))
    c, g = both(data(dtype, (4, 6, 2), 3))
    for kw in ({"num_outputs": 3}, {"num_outputs": 2, "axis": -1},
               {"num_outputs": 4, "axis": 0, "squeeze_axis": True}, {"num_outputs": 1}):
        for a, b in zip(mx.nd.split(g, **kw), mx.nd.split(c, **kw), strict=True):
            close(a, b)


@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_join_and_split_gradients(dtype):
    a, b, e = (mx.sym.Variable(n) for n in "abe")
    args = {"a": data(dtype, (3, 4, 2), 1), "b": data(dtype, (3, 1, 2), 2),
            "e": data(dtype, (3, 2, 2), 3)}
    sym = mx.sym.concat(a, b, e, dim=1)
    same_on_both(sym, args, ["a", "b", "e"], heads(sym, args))
    same_on_both(sym, args, ["a", "e"], heads(sym, args), req="add", passes=2)
    sym = mx.sym.concat(a, a, dim=-1)
    one = {"a": args["a"]}
    same_on_both(sym, one, ["a"], heads(sym, one))
    same_on_both(sym, one, ["a"], heads(sym, one), req="add", passes=2)
    sargs = {"a": data(dtype, (3, 4, 2), 1), "b": data(dtype, (3, 4, 2), 2)}
    sym = mx.sym.stack(a, b, axis=1)
    same_on_both(sym, sargs, ["a", "b"], heads(sym, sargs))
    same_on_both(sym, sargs, ["a", "b"], heads(sym, sargs), req="add", passes=2)
    for kw in ({"num_outputs": 2, "axis": 1}, {"num_outputs": 3, "axis": 0,
                                                "squeeze_axis": True}):
        sym = mx.sym.split(a, **kw)
        one = {"a": data(dtype, (3, 4, 2), 4)}
        same_on_both(sym, one, ["a"], heads(sym, one))
        same_on_both(sym, one, ["a"], heads(sym, one), req="add", passes=2)


def test_many_joined_parts_and_mixed_requests():
    xs = [mx.sym.Variable(f"x{i}") for i in range(19)]
    args = {f"x{i}": data("float32", (2, i % 3 + 1), i) for i in range(19)}
    sym = mx.sym.concat(*xs, dim=1)
    h = heads(sym, args)
    for req in ("write", "add"):
        same_on_both(sym, args, [f"x{i}" for i in range(0, 19, 2)], h, req=req, passes=2)


@pytest.mark.parametrize("src", ALL + ["bool"])
def test_casts_between_every_dtype(src):
    rng = np.random.default_rng(5)
    if src in FLOATS:
        x = rng.uniform(-400, 400, 1001)
        x[::7] = np.round(x[::7])
        x[:8] = [np.nan, np.inf, -np.inf, -0.0, 3e9, -3e9, 0.5, -0.5]
        with np.errstate(over="ignore"):
            x = x.astype(src)
    else:
        x = data(src, (1001,), 5)
    c, g = both(x)
    for dst in ALL + ["bool"]:
        close(mx.nd.cast(g, dtype=dst), mx.nd.cast(c, dtype=dst))
    y = mx.nd.array(x, ctx=mx.gpu(0), dtype=x.dtype)
    mx.nd.cast(y, dtype=src, out=y)
    close(y, c)


@pytest.mark.parametrize("dtype", FLOATS)
def test_cast_gradients(dtype):
    a = mx.sym.Variable("a")
    args = {"a": data(dtype, (5, 7), 1)}
    for dst in FLOATS:
        sym = mx.sym.Cast(a, dtype=dst)
        same_on_both(sym, args, ["a"], heads(sym, args))
        same_on_both(sym, args, ["a"], heads(sym, args), req="add", passes=2)


@pytest.mark.parametrize("dtype", ALL + ["bool"])
def test_reshapes_and_copies(dtype):
    c, g = both(data(dtype, (2, 3, 1, 4), 6))
    for f in (lambda x: x.reshape((6, -1)), lambda x: mx.nd.Reshape(x, shape=(-3, 0, -1)),
              lambda x: mx.nd.flatten(x), lambda x: mx.nd.expand_dims(x, axis=1),
              lambda x: mx.nd.squeeze(x), lambda x: mx.nd.squeeze(x, axis=2),
              lambda x: x.copy(), lambda x: x.copyto(x.context), mx.nd.zeros_like,
              mx.nd.ones_like):
        close(f(g), f(c))
    if dtype != "bool":  # the CPU's unary operators take no bool
        for f in (mx.nd.identity, mx.nd.BlockGrad):
            close(f(g), f(c))


@pytest.mark.parametrize("dtype", FLOATS)
def test_reshape_gradients(dtype):
    a = mx.sym.Variable("a")
    args = {"a": data(dtype, (2, 3, 4), 7)}
    for sym in (mx.sym.Reshape(a, shape=(4, -1)) * 3, mx.sym.flatten(a) * 3,
                mx.sym.expand_dims(a, axis=0) * 3, mx.sym.identity(a) * 3):
        same_on_both(sym, args, ["a"], heads(sym, args))
        same_on_both(sym, args, ["a"], heads(sym, args), req="add", passes=2)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_elementwise_ops(dtype):
    c, g = both(data(dtype, (5, 9), 8))
    c2, g2 = both(data(dtype, (5, 9), 9))
    close(g + g2, c + c2)
    close(g * g2, c * c2)
    close(g - 3, c - 3)
    close(mx.nd.abs(g), mx.nd.abs(c))
    close(mx.nd.negative(g), mx.nd.negative(c))
    close(mx.nd.relu(g), mx.nd.relu(c))
    close(mx.nd.square(g), mx.nd.square(c))
    close(mx.nd.sign(g), mx.nd.sign(c))


@pytest.mark.parametrize("dtype", FLOATS)
def test_make_loss(dtype):
    a = mx.sym.Variable("a")
    x = data(dtype, (6, 5), 10)
    for kw in ({}, {"grad_scale": 3.0}, {"normalization": "batch", "grad_scale": 2.0},
               {"normalization": "valid", "valid_thresh": 0.5},
               {"normalization": "valid", "valid_thresh": 100.0}):
        sym = mx.sym.MakeLoss(a * 2, **kw)
        same_on_both(sym, {"a": x}, ["a"])
        same_on_both(sym, {"a": x}, ["a"], req="add", passes=2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_gradients(dtype):
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    cases = [((3, 4), (4, 5)), ((4, 3), (4, 5)), ((3, 4), (5, 4)), ((4, 3), (5, 4)),
             ((2, 3, 4), (4, 6)), ((7,), (7,))]
    for (sa, sb), (ta, tb) in zip(cases, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 0), (0, 0)],
                                  strict=True):
        args = {"a": data(dtype, sa, 1), "b": data(dtype, sb, 2)}
        sym = mx.sym.dot(a, b, transpose_a=bool(ta), transpose_b=bool(tb))
        same_on_both(sym, args, ["a", "b"], heads(sym, args))
        same_on_both(sym, args, ["a", "b"], heads(sym, args), req="add", passes=2)
    for ta, tb in ((0, 0), (1, 0), (0, 1), (1, 1)):
        sa = (3, 5, 4) if ta else (3, 4, 5)
        sb = (3, 2, 5) if tb else (3, 5, 2)
        args = {"a": data(dtype, sa, 3), "b": data(dtype, sb, 4)}
        sym = mx.sym.batch_dot(a, b, transpose_a=bool(ta), transpose_b=bool(tb))
        same_on_both(sym, args, ["a", "b"], heads(sym, args))


def sort_data(dtype, shape, seed):
    x = data(dtype, shape, seed)
    flat = x.reshape(-1)
    if flat.size:
        flat[::3] = flat[0]  # ties
    if dtype in FLOATS and flat.size > 10:
        flat[1::7] = np.nan
        flat[2::11] = -0.0
        flat[4::13] = 0.0
    return x


@pytest.mark.parametrize("dtype", ALL)
def test_sorts_match_the_cpu(dtype):
    for shape in [(3, 7), (2, 33, 4), (1, 3000), (5,), (0, 4), (4, 1)]:
        c, g = both(sort_data(dtype, shape, sum(shape)))
        for axis in (-1, 0, None):
            for asc in (True, False):
                close(mx.nd.sort(g, axis=axis, is_ascend=asc),
                      mx.nd.sort(c, axis=axis, is_ascend=asc))
                for it in ("float32", "int32", "int64", "float16", "uint8", "float64"):
                    close(mx.nd.argsort(g, axis=axis, is_ascend=asc, dtype=it),
                          mx.nd.argsort(c, axis=axis, is_ascend=asc, dtype=it))
        n = shape[-1]
        for k in {1, min(3, n), n, 0}:
            if n == 0:
                continue
            for ret in ("value", "indices", "mask", "both"):
                for asc in (True, False):
                    kw = {"k": k, "ret_typ": ret, "is_ascend": asc, "dtype": "int64"}
                    a, b = mx.nd.topk(g, **kw), mx.nd.topk(c, **kw)
                    for x, y in zip(a if ret == "both" else [a], b if ret == "both" else [b],
                                    strict=True):
                        close(x, y)


def test_topk_rejects_k_past_the_axis():
    _, g = both(data("float32", (3, 4), 1))
    with pytest.raises(mx.base.MXNetError, match="topk"):
        mx.nd.topk(g, k=5).wait_to_read()


@pytest.mark.parametrize("dtype", FLOATS)
def test_sort_and_topk_gradients(dtype):
    a = mx.sym.Variable("a")
    args = {"a": sort_data(dtype, (3, 9, 2), 2)}
    for sym in (mx.sym.sort(a, axis=1), mx.sym.sort(a, axis=None, is_ascend=False),
                mx.sym.topk(a, axis=1, k=3, ret_typ="value"),
                mx.sym.topk(a, axis=1, k=2, ret_typ="value", is_ascend=True)):
        same_on_both(sym, args, ["a"], heads(sym, args))
        same_on_both(sym, args, ["a"], heads(sym, args), req="add", passes=2)


def sample_ops():
    return [
        ("sample_uniform", {"low": [0.0, 2.0], "high": [1.0, 5.0]}, [0.5, 3.5]),
        ("sample_normal", {"mu": [0.0, -3.0], "sigma": [1.0, 2.0]}, [0.0, -3.0]),
        ("sample_exponential", {"lam": [1.0, 5.0]}, [1.0, 0.2]),
        ("sample_gamma", {"alpha": [0.5, 4.0], "beta": [1.0, 0.5]}, [0.5, 2.0]),
        ("sample_poisson", {"lam": [2.0, 30.0]}, [2.0, 30.0]),
        ("sample_negative_binomial", {"k": [3.0, 1.0], "p": [0.5, 0.2]}, [3.0, 4.0]),
        ("sample_generalized_negative_binomial", {"mu": [2.0, 3.0], "alpha": [0.3, 0.0]},
         [2.0, 3.0]),
    ]


@pytest.mark.parametrize("dtype", FLOATS)
def test_sample_ops_on_the_gpu(dtype):
    for name, params, mean in sample_ops():
        args = [mx.nd.array(v, ctx=mx.gpu(0), dtype=dtype) for v in params.values()]
        op = getattr(mx.nd, name)
        mx.random.seed(42)
        a = op(*args, shape=(3000,), dtype="float32").asnumpy()
        mx.random.seed(42)
        b = op(*args, shape=(3000,), dtype="float32").asnumpy()
        np.testing.assert_array_equal(a, b)
        assert a.shape == (2, 3000) and a.dtype == np.float32
        np.testing.assert_allclose(a.mean(axis=1), mean, rtol=0.1, atol=0.1, err_msg=name)
        c = op(*args, shape=(4, 5), dtype=dtype)
        assert c.shape == (2, 4, 5) and c.dtype == np.dtype(dtype)
        assert np.all(np.isfinite(c.asnumpy()))
    lo, hi = (mx.nd.array([v], ctx=mx.gpu(0), dtype=dtype) for v in (1.0, 1.001))
    u = mx.nd.sample_uniform(lo, hi, shape=(1000,), dtype=dtype).asnumpy()
    assert np.all(u >= 1.0) and np.all(u < np.float64(np.asarray(1.001, dtype)))


@pytest.mark.parametrize("dtype", FLOATS)
def test_multinomial_on_the_gpu(dtype):
    p = mx.nd.array([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25]], ctx=mx.gpu(0), dtype=dtype)
    mx.random.seed(3)
    cats, logp = mx.nd.sample_multinomial(p, shape=(4000,), get_prob=True)
    assert cats.shape == (2, 4000) and cats.dtype == np.int32
    c = cats.asnumpy()
    assert set(np.unique(c[0])) <= {0, 1}
    np.testing.assert_allclose(np.bincount(c[1], minlength=3) / 4000, [0.5, 0.25, 0.25],
                               atol=0.04)
    want = np.log(p.asnumpy().astype(np.float64)[np.arange(2)[:, None], c])
    close(logp, mx.nd.array(want.astype(dtype), dtype=dtype))
    mx.random.seed(3)
    again = mx.nd.sample_multinomial(p, shape=(4000,))
    np.testing.assert_array_equal(again.asnumpy(), c)
    for out_t in ("float32", "uint8", "float16"):
        d = mx.nd.sample_multinomial(p, dtype=out_t)
        assert d.dtype == np.dtype(out_t) and d.shape == (2,)


@pytest.mark.parametrize("dtype", ALL + ["bool"])
def test_shuffle_on_the_gpu(dtype):
    x = data(dtype, (50, 3), 4)
    x[:, 0] = np.arange(50).astype(x.dtype) if dtype != "bool" else x[:, 0]
    g = mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype)
    mx.random.seed(9)
    a = mx.nd.shuffle(g).asnumpy()
    mx.random.seed(9)
    b = mx.nd.shuffle(g).asnumpy()
    np.testing.assert_array_equal(a, b)
    rows = sorted(map(bytes, np.ascontiguousarray(a)))
    assert rows == sorted(map(bytes, np.ascontiguousarray(x)))
    if dtype not in ("bool", "int8", "uint8"):
        assert not np.array_equal(a, x)
    y = mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype)
    mx.nd.shuffle(y, out=y)
    assert sorted(map(bytes, np.ascontiguousarray(y.asnumpy()))) == rows


@pytest.mark.parametrize("dtype", FLOATS)
def test_attribute_samplers_on_the_gpu(dtype):
    r = mx.nd.random
    cases = [(r.exponential, {"scale": 2.0}, 2.0), (r.gamma, {"alpha": 2.0, "beta": 0.5}, 1.0),
             (r.poisson, {"lam": 7.0}, 7.0),
             (mx.nd.random_negative_binomial, {"k": 2, "p": 0.4}, 3.0),
             (mx.nd.random_generalized_negative_binomial, {"mu": 3.0, "alpha": 0.5}, 3.0)]
    for f, kw, mean in cases:
        mx.random.seed(5)
        a = f(shape=(4000,), ctx=mx.gpu(0), dtype=dtype, **kw)
        mx.random.seed(5)
        b = f(shape=(4000,), ctx=mx.gpu(0), dtype=dtype, **kw)
        assert a.dtype == np.dtype(dtype) and a.shape == (4000,)
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
        np.testing.assert_allclose(a.asnumpy().astype(np.float64).mean(), mean, rtol=0.1)
    for it in ("int32", "int64"):
        x = r.randint(-5, 7, shape=(3000,), ctx=mx.gpu(0), dtype=it).asnumpy()
        assert x.dtype == np.dtype(it) and set(np.unique(x)) == set(range(-5, 7))

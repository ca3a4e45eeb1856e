"""BatchNorm and the indexing operators on GPUs against the CPU operators: forward, and
backward through bound executors, with each operator's options and index dtypes, for
every dtype the CPU supports, with req write and add; BatchNorm's moving statistics; the
same errors for bad indices. Runs on real GPUs, and in CI on fake ones
(``RSMX_FAKE_GPU=2``)."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from gpu_bind import bind_and_run, both

pytestmark = pytest.mark.gpu

FLOATS = ["float32", "float64", "float16"]
INTS = ["uint8", "int8", "int32", "int64"]
INDEX = ["float32", "float64", "float16", "int32", "int64", "uint8", "int8"]
TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}


def close(gpu, cpu, tol=None) -> None:
    got, want = gpu.asnumpy(), cpu.asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind not in "f":
        assert np.array_equal(got, want)
        return
    t = TOL[str(got.dtype)] if tol is None else tol
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=t,
                               atol=t, equal_nan=True)


def run(sym, args: dict, ctx, grad, head=None, req="write", passes=1, is_train=True):
    """The outputs, the gradients of the args in `grad` after `passes` backward passes,
    and the auxiliary states."""
    heads = None if head is None else [head]
    ex = bind_and_run(sym, args, ctx, grad, heads, req, passes, is_train)
    outs = list(ex.outputs) if passes else []
    return outs + [ex.grad_dict[k] for k in grad] + list(ex.aux_dict.values())


def same_on_both(sym, args: dict, grad=(), head=None, req="write", passes=1, is_train=True,
                 tol=None) -> None:
    cpu = run(sym, args, mx.cpu(), grad, head, req, passes, is_train)
    gpu = run(sym, args, mx.gpu(0), grad, head, req, passes, is_train)
    assert len(cpu) == len(gpu)
    for g, c in zip(gpu, cpu, strict=True):
        close(g, c, tol)


def error_of(f) -> str:
    with pytest.raises(mx.MXNetError) as e:
        f().asnumpy()
    return str(e.value)


def same_error(f_cpu, f_gpu, key: str) -> None:
    """Both raise, and the CPU's line naming the operator is in the GPU's message."""
    c, g = error_of(f_cpu), error_of(f_gpu)
    line = next(ln for ln in c.splitlines() if key in ln)
    core = line[line.index(key):]
    assert core in g, (c, g)


# ---------------------------------------------------------------------------------------
# take and Embedding


@pytest.mark.parametrize("dtype", FLOATS + INTS + ["bool"])
def test_take_matches_the_cpu(dtype):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((5, 7, 3)) * 50).astype(dtype)
    for idtype in INDEX:
        for mode in ("clip", "wrap", "raise"):
            for axis in (0, 1, -1):
                n = a.shape[axis]
                lo, hi = (0, n) if mode == "raise" else (-2 * n, 2 * n)
                if idtype == "uint8":
                    lo = 0
                idx = rng.uniform(lo, hi, (4, 3)).astype(idtype)
                (ca, ga), (ci, gi) = both(a), both(idx)
                for req_add in (False, dtype != "bool"):
                    c = mx.nd.take(ca, ci, axis=axis, mode=mode)
                    g = mx.nd.take(ga, gi, axis=axis, mode=mode)
                    if req_add:
                        c += mx.nd.take(ca, ci, axis=axis, mode=mode)
                        g += mx.nd.take(ga, gi, axis=axis, mode=mode)
                    close(g, c)
    empty = np.zeros((0,), "int32")
    (ca, ga), (ci, gi) = both(a), both(empty)
    close(mx.nd.take(ga, gi), mx.nd.take(ca, ci))


@pytest.mark.parametrize("dtype", FLOATS)
def test_take_gradients_match_the_cpu(dtype):
    rng = np.random.default_rng(2)
    d, i = mx.sym.Variable("a"), mx.sym.Variable("indices")
    a = rng.standard_normal((6, 5, 2)).astype(dtype)
    for mode in ("clip", "wrap", "raise"):
        for axis in (0, 1, -1):
            n = a.shape[axis]
            lo = 0 if mode == "raise" else -n - 3
            idx = rng.integers(lo, n + (0 if mode == "raise" else 3), (7,)).astype(dtype)
            sym = mx.sym.take(d, i, axis=axis, mode=mode)
            out_shape = mx.nd.take(mx.nd.array(a), mx.nd.array(idx), axis=axis).shape
            head = rng.standard_normal(out_shape).astype(dtype)
            args = {"a": a, "indices": idx}
            same_on_both(sym, args, ["a"], head)
            same_on_both(sym, args, ["a"], head, req="add", passes=2)


def test_take_errors_match_the_cpu():
    a = np.arange(12, dtype="float32").reshape(3, 4)
    (ca, ga) = both(a)
    for bad in ([0, 7], [-1], [1.5, 2.9]):
        ci, gi = both(np.array(bad, "float32"))
        if bad == [1.5, 2.9]:
            close(mx.nd.take(ga, gi, mode="raise"), mx.nd.take(ca, ci, mode="raise"))
            continue
        same_error(lambda ci=ci: mx.nd.take(ca, ci, mode="raise"),
                   lambda gi=gi: mx.nd.take(ga, gi, mode="raise"), "take:")
    ci, gi = both(np.array([0], "float32"))
    same_error(lambda: mx.nd.take(ca, ci, mode="foo"), lambda: mx.nd.take(ga, gi, mode="foo"),
               "mode")
    z = both(np.zeros((0, 3), "float32"))
    same_error(lambda: mx.nd.take(z[0], ci), lambda: mx.nd.take(z[1], gi), "take:")


@pytest.mark.parametrize("dtype", FLOATS)
def test_embedding_matches_the_cpu(dtype):
    rng = np.random.default_rng(3)
    d, w = mx.sym.Variable("data"), mx.sym.Variable("weight")
    for idtype in INDEX:
        for vocab, dim, shape in ((10, 4, (3, 5)), (50, 33, (257,)), (1, 1, (2, 2))):
            idx = rng.uniform(-3, vocab + 3, shape)
            if idtype == "uint8":
                idx = np.abs(idx)
            if idtype in ("float32", "float64") and idx.size > 4:
                idx.flat[:3] = [np.nan, np.inf, -np.inf]
            idx = idx.astype(idtype)
            weight = rng.standard_normal((vocab, dim)).astype(dtype)
            sym = mx.sym.Embedding(d, w, input_dim=vocab, output_dim=dim, dtype=dtype)
            head = rng.standard_normal(shape + (dim,)).astype(dtype)
            (ci, gi), (cw, gw) = both(idx), both(weight)
            kw = {"input_dim": vocab, "output_dim": dim, "dtype": dtype}
            close(mx.nd.Embedding(gi, gw, **kw), mx.nd.Embedding(ci, cw, **kw))
            # Bound executors take the indices in the weight's dtype.
            args = {"data": idx.astype(dtype), "weight": weight}
            same_on_both(sym, args, ["weight"], head)
            same_on_both(sym, args, ["weight"], head, req="add", passes=2)


@pytest.mark.parametrize("dtype", INTS)
def test_embedding_of_integer_weights_matches_the_cpu(dtype):
    rng = np.random.default_rng(4)
    w = rng.integers(-100, 100, (9, 3)).astype(dtype)
    idx = rng.integers(-2, 12, (4, 2)).astype("int32")
    (cw, gw), (ci, gi) = both(w), both(idx)
    kw = {"input_dim": 9, "output_dim": 3, "dtype": dtype}
    close(mx.nd.Embedding(gi, gw, **kw), mx.nd.Embedding(ci, cw, **kw))


# ---------------------------------------------------------------------------------------
# pick, one_hot, where


@pytest.mark.parametrize("dtype", FLOATS)
def test_pick_matches_the_cpu(dtype):
    rng = np.random.default_rng(5)
    d, i = mx.sym.Variable("data"), mx.sym.Variable("index")
    x = rng.standard_normal((4, 5, 3)).astype(dtype)
    for idtype in INDEX:
        for axis in (0, 1, -1):
            for mode in ("clip", "wrap"):
                for keepdims in (False, True):
                    shape = list(x.shape)
                    shape[axis] = 1
                    if not keepdims:
                        del shape[axis if axis >= 0 else len(shape) + axis]
                    lo = 0 if idtype == "uint8" else -7
                    idx = rng.uniform(lo, 8, shape).astype(idtype)
                    sym = mx.sym.pick(d, i, axis=axis, mode=mode, keepdims=keepdims)
                    head = rng.standard_normal(shape).astype(dtype)
                    (cx, gx), (ci, gi) = both(x), both(idx)
                    kw = {"axis": axis, "mode": mode, "keepdims": keepdims}
                    close(mx.nd.pick(gx, gi, **kw), mx.nd.pick(cx, ci, **kw))
                    if idtype != "float32":
                        continue
                    args = {"data": x, "index": idx.astype(dtype)}
                    same_on_both(sym, args, ["data"], head)
                    same_on_both(sym, args, ["data"], head, req="add", passes=2)


@pytest.mark.parametrize("dtype", INTS)
def test_pick_of_integers_matches_the_cpu(dtype):
    rng = np.random.default_rng(6)
    x = rng.integers(-100, 100, (6, 4)).astype(dtype)
    idx = rng.integers(-1, 5, (6,)).astype("int64")
    (cx, gx), (ci, gi) = both(x), both(idx)
    close(mx.nd.pick(gx, gi, axis=1, mode="wrap"), mx.nd.pick(cx, ci, axis=1, mode="wrap"))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_one_hot_matches_the_cpu(dtype):
    rng = np.random.default_rng(7)
    for idtype in INDEX:
        lo = 0 if idtype == "uint8" else -2
        idx = rng.uniform(lo, 7, (3, 4)).astype(idtype)
        ci, gi = both(idx)
        for kw in ({"depth": 5}, {"depth": 6, "on_value": -1.7, "off_value": 300.5},
                   {"depth": 1, "on_value": 2}):
            c = mx.nd.one_hot(ci, dtype=dtype, **kw)
            g = mx.nd.one_hot(gi, dtype=dtype, **kw)
            close(g, c)
            c += mx.nd.one_hot(ci, dtype=dtype, **kw)
            g += mx.nd.one_hot(gi, dtype=dtype, **kw)
            close(g, c)


@pytest.mark.parametrize("dtype", FLOATS)
def test_where_matches_the_cpu(dtype):
    rng = np.random.default_rng(8)
    c, x, y = (mx.sym.Variable(n) for n in ("condition", "x", "y"))
    sym = mx.sym.where(c, x, y)
    for shape, cshape in (((4, 5), (4, 5)), ((6, 3, 2), (6,)), ((257,), (257,))):
        xv = rng.standard_normal(shape).astype(dtype)
        yv = rng.standard_normal(shape).astype(dtype)
        for cdtype in ("float32", "int32", "uint8", "float16"):
            cond = (rng.uniform(size=cshape) < 0.5).astype(cdtype)
            if cdtype == "float32" and cond.size > 2:
                cond.flat[:2] = [np.nan, -0.0]
            head = rng.standard_normal(shape).astype(dtype)
            (cc, gc), (cx, gx), (cy, gy) = both(cond), both(xv), both(yv)
            close(mx.nd.where(gc, gx, gy), mx.nd.where(cc, cx, cy))
            args = {"condition": cond.astype(dtype), "x": xv, "y": yv}
            same_on_both(sym, args, ["x", "y"], head)
            same_on_both(sym, args, ["x", "y"], head, req="add", passes=2)


@pytest.mark.parametrize("dtype", INTS + ["bool"])
def test_where_of_other_dtypes_matches_the_cpu(dtype):
    rng = np.random.default_rng(9)
    x, y = (rng.integers(0, 100, (5, 3)).astype(dtype) for _ in range(2))
    cond = rng.integers(0, 2, (5,)).astype("bool")
    (cc, gc), (cx, gx), (cy, gy) = both(cond), both(x), both(y)
    close(mx.nd.where(gc, gx, gy), mx.nd.where(cc, cx, cy))


# ---------------------------------------------------------------------------------------
# gather_nd and scatter_nd


@pytest.mark.parametrize("dtype", FLOATS)
def test_gather_nd_matches_the_cpu(dtype):
    rng = np.random.default_rng(10)
    d, i = mx.sym.Variable("data"), mx.sym.Variable("indices")
    sym = mx.sym.gather_nd(d, i)
    x = rng.standard_normal((4, 3, 5)).astype(dtype)
    for idtype in ("float32", "int32", "int64", "float16"):
        for m, count in ((1, (6,)), (2, (3, 4)), (3, (9,))):
            idx = np.stack([rng.integers(-x.shape[a], x.shape[a], count) for a in range(m)])
            idx = idx.astype(idtype)
            out_shape = count + x.shape[m:]
            head = rng.standard_normal(out_shape).astype(dtype)
            (cx, gx), (ci, gi) = both(x), both(idx)
            close(mx.nd.gather_nd(gx, gi), mx.nd.gather_nd(cx, ci))
            args = {"data": x, "indices": idx.astype(dtype)}
            same_on_both(sym, args, ["data"], head)
            same_on_both(sym, args, ["data"], head, req="add", passes=2)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_scatter_nd_matches_the_cpu(dtype):
    rng = np.random.default_rng(11)
    for idtype in ("float32", "int32", "int64"):
        idx = np.stack([rng.integers(0, 3, (20,)), rng.integers(-4, 4, (20,))])
        v = (rng.standard_normal((20, 2)) * 10).astype(dtype)
        (cv, gv), (ci, gi) = both(v), both(idx.astype(idtype))
        c = mx.nd.scatter_nd(cv, ci, shape=(3, 4, 2))
        g = mx.nd.scatter_nd(gv, gi, shape=(3, 4, 2))
        close(g, c)
        c2, g2 = mx.nd.ones((3, 4, 2), dtype=dtype), mx.nd.ones((3, 4, 2), dtype=dtype,
                                                                 ctx=mx.gpu(0))
        mx.nd.scatter_nd(cv, ci, shape=(3, 4, 2), out=c2)
        mx.nd.scatter_nd(gv, gi, shape=(3, 4, 2), out=g2)
        close(g2, c2)
    if dtype in FLOATS:
        d, i = mx.sym.Variable("data"), mx.sym.Variable("indices")
        sym = mx.sym.scatter_nd(d, i, shape=(3, 4, 2))
        args = {"data": v, "indices": idx.astype(dtype)}
        head = rng.standard_normal((3, 4, 2)).astype(dtype)
        same_on_both(sym, args, ["data"], head)
        same_on_both(sym, args, ["data"], head, req="add", passes=2)


def test_gather_and_scatter_nd_errors_match_the_cpu():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    cx, gx = both(x)
    for bad in ([[5.0], [0.0]], [[0.0, 1.0], [2.0, -5.0]], [[np.nan], [0.0]],
                [[2.5], [0.0]]):
        ci, gi = both(np.array(bad, "float32"))
        same_error(lambda ci=ci: mx.nd.gather_nd(cx, ci),
                   lambda gi=gi: mx.nd.gather_nd(gx, gi), "gather_nd:")
        cv, gv = both(np.ones((1,) if len(bad[0]) == 1 else (2,), "float32"))
        same_error(lambda ci=ci, cv=cv: mx.nd.scatter_nd(cv, ci, shape=(3, 4)),
                   lambda gi=gi, gv=gv: mx.nd.scatter_nd(gv, gi, shape=(3, 4)), "scatter_nd:")
    ci, gi = both(np.array([[1, 7]], "int64"))
    same_error(lambda: mx.nd.gather_nd(cx, ci), lambda: mx.nd.gather_nd(gx, gi), "gather_nd:")


# ---------------------------------------------------------------------------------------
# BatchNorm


BN_CASES = [  # shape, options
    ((4, 3, 5), {}),
    ((4, 3, 5), {"fix_gamma": False}),
    ((2, 5, 3, 3), {"fix_gamma": False, "eps": 1e-5, "momentum": 0.7}),
    ((6, 4), {"axis": -1, "fix_gamma": False}),
    ((3, 4, 2), {"axis": 0, "fix_gamma": False, "output_mean_var": True}),
    ((5, 2, 7), {"use_global_stats": True, "fix_gamma": False}),
    ((5, 2, 7), {"use_global_stats": True, "output_mean_var": True}),
    ((257, 2), {"fix_gamma": False, "output_mean_var": True}),
    ((1, 3, 1), {"fix_gamma": False}),
    ((3, 2, 3000), {"fix_gamma": False}),  # long channels: sums in several segments
]


def bn_args(rng, shape, axis, dtype):
    c = shape[axis]
    return {"data": (rng.standard_normal(shape) * 2 + 0.5).astype(dtype),
            "bn_gamma": rng.uniform(0.5, 1.5, c).astype(dtype),
            "bn_beta": rng.standard_normal(c).astype(dtype)}


def run_bn(sym, args, aux, ctx, grad, head, req, passes, is_train):
    shapes = {k: v.shape for k, v in args.items()}
    types = {k: v.dtype for k, v in args.items()}
    reqs = {k: (req if k in grad else "null") for k in args}
    ex = sym.simple_bind(ctx, grad_req=reqs, type_dict=types, **shapes)
    for k, v in args.items():
        ex.arg_dict[k][:] = v
    for k, v in aux.items():
        ex.aux_dict[k][:] = v
    for k in grad:
        ex.grad_dict[k][:] = 0
    outs = []
    for _ in range(passes):
        outs = ex.forward(is_train=is_train)
        if grad:
            ex.backward([mx.nd.array(h, ctx=ctx, dtype=h.dtype) for h in head])
    return list(outs) + [ex.grad_dict[k] for k in grad] + [ex.aux_dict[k] for k in aux]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_matches_the_cpu(dtype):
    rng = np.random.default_rng(12)
    d = mx.sym.Variable("data")
    for shape, kw in BN_CASES:
        axis = kw.get("axis", 1)
        c = shape[axis]
        sym = mx.sym.BatchNorm(d, name="bn", **kw)
        args = bn_args(rng, shape, axis, dtype)
        aux = {"bn_moving_mean": rng.standard_normal(c).astype(dtype),
               "bn_moving_var": rng.uniform(0.5, 2, c).astype(dtype)}
        n_out = 3 if kw.get("output_mean_var") else 1
        head = [rng.standard_normal(shape).astype(dtype)]
        head += [np.zeros(c, dtype)] * (n_out - 1)
        for is_train in (True, False):
            for req, passes in (("write", 1), ("add", 2)):
                grad = ["data", "bn_gamma", "bn_beta"] if is_train else []
                cpu = run_bn(sym, args, aux, mx.cpu(), grad, head, req, passes, is_train)
                gpu = run_bn(sym, args, aux, mx.gpu(0), grad, head, req, passes, is_train)
                assert len(cpu) == len(gpu) == n_out + len(grad) + 2
                for g, cv in zip(gpu, cpu, strict=True):
                    close(g, cv, 1e-4 if dtype == "float32" else 1e-10)


def test_batch_norm_rejects_what_the_cpu_rejects():
    x = np.ones((2, 3), "float16")
    g = np.ones(3, "float16")
    for ctx in (mx.cpu(), mx.gpu(0)):
        xs = [mx.nd.array(v, ctx=ctx, dtype="float16") for v in (x, g, g, g, g)]
        with pytest.raises(mx.MXNetError, match="BatchNorm: dtype float16 is not supported"):
            mx.nd.BatchNorm(*xs).asnumpy()

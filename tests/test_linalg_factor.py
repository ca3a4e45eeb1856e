"""The factorization `linalg` operators (potrf, potri, trmm, trsm, gelqf, syevd, inverse,
det, slogdet): forward values and gradients against MXNet 1.9.1's (the literal
expectations below were printed by MXNet 1.9.1), round trips, numeric gradients, errors,
and every device of the `ctx` fixture."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError
from rsmx.test_utils import check_numeric_gradient

A = np.array([[4, 1, 2], [1, 5, 3], [2, 3, 6]], dtype=np.float64)
H = 0.1 * np.arange(1, 10, dtype=np.float64).reshape(3, 3)
LA = mx.nd.linalg


def grad_of(f, inputs, heads, ctx, dtype="float64"):
    """The outputs of `f` and the gradients of `inputs` for head gradients `heads`."""
    xs = [mx.nd.array(x, dtype=dtype, ctx=ctx) for x in inputs]
    for x in xs:
        x.attach_grad()
    with mx.autograd.record():
        out = f(*xs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    mx.autograd.backward(outs, [mx.nd.array(h, dtype=dtype, ctx=ctx) for h in heads])
    return [o.asnumpy() for o in outs], [x.grad.asnumpy() for x in xs]


def close(got, want, tol=1e-6):
    np.testing.assert_allclose(got, np.asarray(want, dtype=np.float64), rtol=tol, atol=tol)


def test_potrf_potri_inverse(ctx):
    (b,), (da,) = grad_of(LA.potrf, [A], [H], ctx)
    close(b, [[2, 0, 0], [0.5, 2.179449, 0], [1, 1.147079, 1.91943]])
    close(da, [[-0.008663, 0.049166, 0.042743], [0.049166, 0.083055, 0.060141],
               [0.042743, 0.060141, 0.234445]])
    (u,), (da,) = grad_of(lambda x: LA.potrf(x, lower=False), [A], [H], ctx)
    close(u, b.T)
    close(da, [[0.043876, 0.01607, -0.045787], [0.01607, 0.107204, 0.014258],
               [-0.045787, 0.014258, 0.234445]])
    inv = [[0.3, 0, -0.1], [0, 0.285714, -0.142857], [-0.1, -0.142857, 0.271429]]
    (ai,), (db,) = grad_of(LA.potri, [b], [H], ctx)
    close(ai, inv)
    close(db, [[0.02, 0, 0], [-0.014286, -0.036051, 0], [-0.082857, -0.06227, -0.017862]])
    (ai,), (da,) = grad_of(LA.inverse, [A], [H], ctx)
    close(ai, inv)
    close(da, [[0.012, 0.005714, -0.006857], [0, -0.002041, -0.006122],
               [-0.024, -0.017551, -0.004653]])


def test_det_slogdet(ctx):
    (d,), (da,) = grad_of(LA.det, [A], [[0.7]], ctx)
    close(d, [70.0])
    close(da, [[14.7, 0, -4.9], [0, 14, -7], [-4.9, -7, 13.3]])
    (s, logabs), (da,) = grad_of(LA.slogdet, [A], [[0.3], [0.7]], ctx)
    close(s, [1.0])
    close(logabs, [4.248495])
    close(da, [[0.21, 0, -0.07], [0, 0.2, -0.1], [-0.07, -0.1, 0.19]])
    an = np.array([[1, 2, 0], [3, 1, 1], [0, 1, 2]], dtype=np.float64)
    (d,), (da,) = grad_of(LA.det, [an], [[1.0]], ctx)
    close(d, [-11.0])
    close(da, [[1, -6, 3], [-4, 2, -1], [2, -1, -5]])
    singular = np.array([[1, 2, 3], [2, 4, 6], [1, 1, 1]], dtype=np.float64)
    (d,), (da,) = grad_of(LA.det, [singular], [[1.0]], ctx)
    assert d.tolist() == [0.0] and not da.any()
    (s, logabs), (da,) = grad_of(LA.slogdet, [singular], [[1.0], [1.0]], ctx)
    assert s.tolist() == [0.0] and logabs.tolist() == [-np.inf] and not da.any()
    batch = np.stack([A, an, A * 2]).reshape(3, 1, 3, 3)
    d = LA.det(mx.nd.array(batch, dtype="float64", ctx=ctx)).asnumpy()
    assert d.shape == (3, 1)
    close(d.ravel(), [70, -11, 560], 1e-9)


def test_gelqf_syevd(ctx):
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float64)
    dq = np.array([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]])
    dl = np.array([[0.7, 0.8], [-0.9, 1.0]])
    (q, lo), (da,) = grad_of(LA.gelqf, [a], [dq, dl], ctx)
    close(q, [[-0.267261, -0.534522, -0.801784], [0.872872, 0.218218, -0.436436]])
    close(lo, [[-3.741657, 0], [-8.55236, 1.963961]])
    close(da, [[-1.527439, -1.152799, 0.404626], [1.011572, 0.902958, 0.183335]])
    s = np.array([[2, -1, 0.5], [-1, 3, 1], [0.5, 1, 4]])
    du = np.array([[0.1, 0.2, 0.3], [-0.4, 0.5, 0.6], [0.7, -0.8, 0.9]])
    (u, lam), (da,) = grad_of(LA.syevd, [s], [du, [0.1, -0.2, 0.3]], ctx)
    close(u, [[0.764761, 0.559124, -0.32019], [0.642491, -0.624403, 0.444215],
              [-0.048443, 0.545438, 0.83675]])
    close(lam, [1.05955, 3.317544, 4.622905])
    close(da, [[-0.094168, 0.17321, -0.04375], [0.17321, -0.104769, 0.063191],
               [-0.04375, 0.063191, 0.398937]])


TRI_A = {True: [[2, 9, 9], [1, 3, 9], [-1, 2, 4]], False: [[2, 1, -1], [9, 3, 2], [9, 9, 4]]}
TRI = [  # op, lower, transpose, rightside, out, dA, dB (MXNet 1.9.1, alpha 0.5)
    ("trmm", True, False, False, [[1.0, 2.0], [5.0, 7.0], [12.5, 15.0]],
     [[0.25, 0, 0], [0.55, 1.25, 0], [0.85, 1.95, 3.05]], [[0.0, 0.1], [0.95, 1.2], [1.0, 1.2]]),
    ("trmm", True, True, True, [[1.0, 3.5, 7.5], [4.0, 9.5, 15.0]],
     [[0.85, 0, 0], [1.1, 1.45, 0], [1.35, 1.8, 2.25]], [[0.05, 0.6, 0.6], [0.35, 1.35, 1.2]]),
    ("trmm", False, False, True, [[1.0, 3.5, 7.5], [4.0, 9.5, 15.0]],
     [[0.85, 1.1, 1.35], [0, 1.45, 1.8], [0, 0, 2.25]], [[0.05, 0.6, 0.6], [0.35, 1.35, 1.2]]),
    ("trsm", True, False, False, [[0.25, 0.5], [0.416667, 0.5], [0.479167, 0.625]],
     [[-0.105208, 0, 0], [-0.020833, -0.023611, 0], [-0.10625, -0.127083, -0.153646]],
     [[0.052083, 0.079167], [0.008333, 0.016667], [0.0625, 0.075]]),
    ("trsm", True, True, True, [[0.25, 0.25, 0.3125], [1.0, 0.5, 0.75]],
     [[-0.261458, 0, 0], [-0.070833, -0.0375, 0], [-0.16875, -0.09375, -0.135938]],
     [[0.039583, 0.008333, 0.0375], [0.120833, 0.033333, 0.075]]),
    ("trsm", False, True, False, [[0.25, 0.5], [0.416667, 0.5], [0.479167, 0.625]],
     [[-0.105208, -0.020833, -0.10625], [0, -0.023611, -0.127083], [0, 0, -0.153646]],
     [[0.052083, 0.079167], [0.008333, 0.016667], [0.0625, 0.075]]),
]


@pytest.mark.parametrize("case", TRI, ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in TRI])
def test_trmm_trsm(case, ctx):
    name, lower, transpose, rightside, out, want_da, want_db = case
    b = np.array([[1, 2, 3], [4, 5, 6]] if rightside else [[1, 2], [3, 4], [5, 6]], np.float64)
    head = 0.1 * np.arange(1, b.size + 1).reshape(b.shape)
    f = getattr(LA, name)
    (c,), (da, db) = grad_of(
        lambda a, x: f(a, x, lower=lower, transpose=transpose, rightside=rightside, alpha=0.5),
        [np.array(TRI_A[lower], np.float64), b], [head], ctx)
    close(c, out)
    close(da, want_da)
    close(db, want_db)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_trips_on_batches(dtype, ctx):
    rng = np.random.RandomState(7)
    m = rng.uniform(-1, 1, (2, 3, 6, 6))
    spd = m @ np.swapaxes(m, -1, -2) + 6 * np.eye(6)
    tol = 1e-4 if dtype == "float32" else 1e-10
    x = mx.nd.array(spd, dtype=dtype, ctx=ctx)
    lo = LA.potrf(x).asnumpy()
    close(lo @ np.swapaxes(lo, -1, -2), spd, tol)
    close(LA.potri(LA.potrf(x)).asnumpy(), np.linalg.inv(spd), tol)
    close(LA.inverse(x).asnumpy(), np.linalg.inv(spd), tol)
    close(LA.det(x).asnumpy(), np.linalg.det(spd), tol * 1e3)
    u, lam = LA.syevd(x)
    u, lam = u.asnumpy(), lam.asnumpy()
    close(np.swapaxes(u, -1, -2) @ (lam[..., None] * u), spd, tol * 10)
    wide = mx.nd.array(rng.uniform(-1, 1, (2, 3, 7)), dtype=dtype, ctx=ctx)
    q, lo = LA.gelqf(wide)
    close(lo.asnumpy() @ q.asnumpy(), wide.asnumpy(), tol)
    b = mx.nd.array(rng.uniform(-1, 1, (2, 3, 6, 4)), dtype=dtype, ctx=ctx)
    lf = LA.potrf(x)
    close(LA.trmm(lf, LA.trsm(lf, b)).asnumpy(), b.asnumpy(), tol)


def test_numeric_gradients(ctx):
    rng = np.random.RandomState(3)
    m = rng.uniform(-1, 1, (2, 4, 4))
    spd = m @ np.swapaxes(m, -1, -2) + 4 * np.eye(4)
    v = mx.sym.var("a")
    for sym, x in [(mx.sym.linalg.inverse(v), spd), (mx.sym.linalg.det(v), spd),
                   (mx.sym.linalg.slogdet(v)[1], spd),
                   (mx.sym.linalg.gelqf(v)[1], rng.uniform(-1, 1, (2, 3, 5)))]:
        check_numeric_gradient(sym, [x], numeric_eps=1e-5, rtol=1e-3, atol=1e-5, ctx=ctx,
                               dtype=np.float64)
    b = mx.sym.var("b")
    low = np.tril(rng.uniform(1, 2, (2, 4, 4)))
    check_numeric_gradient(mx.sym.linalg.trsm(v, b, alpha=0.5, transpose=True),
                           [low, rng.uniform(-1, 1, (2, 4, 3))], numeric_eps=1e-5, rtol=1e-3,
                           atol=1e-5, ctx=ctx, dtype=np.float64, grad_nodes=["b"])


def test_errors(ctx):
    not_pd = mx.nd.array([[1, 2], [2, 1]], ctx=ctx)
    with pytest.raises(MXNetError, match=r"_linalg_potrf.*potrf failed"):
        LA.potrf(not_pd).asnumpy()
    singular = mx.nd.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype="float64", ctx=ctx)
    with pytest.raises(MXNetError, match=r"_linalg_inverse.*non-convertible"):
        LA.inverse(singular).asnumpy()
    with pytest.raises(MXNetError, match=r"_linalg_gelqf.*no more rows than columns"):
        LA.gelqf(mx.nd.zeros((3, 2), ctx=ctx))
    with pytest.raises(MXNetError, match=r"_linalg_inverse.*square"):
        LA.inverse(mx.nd.zeros((2, 3), ctx=ctx))
    with pytest.raises(MXNetError, match=r"_linalg_trsm.*do not multiply"):
        LA.trsm(mx.nd.zeros((3, 3), ctx=ctx), mx.nd.zeros((2, 2), ctx=ctx))
    with pytest.raises(MXNetError, match=r"_linalg_det.*float32 and float64"):
        LA.det(mx.nd.zeros((2, 2), dtype="float16", ctx=ctx))
    # The engine keeps working after a failed factorization.
    close(LA.potrf(mx.nd.array([[4.0]], ctx=ctx)).asnumpy(), [[2.0]])


def test_symbols_and_names():
    v = mx.sym.var("a")
    u, lam = mx.sym.linalg.syevd(v)
    assert mx.sym.linalg.syevd(v).infer_shape(a=(2, 4, 4))[1] == [(2, 4, 4), (2, 4)]
    assert mx.sym.linalg.det(v).infer_shape(a=(4, 4))[1] == [(1,)]
    assert mx.sym.linalg.slogdet(v).infer_shape(a=(5, 4, 4))[1] == [(5,), (5,)]
    assert hasattr(mx.nd, "linalg_potrf") and not hasattr(mx.nd, "linalg_syevd")
    sym = mx.sym.linalg.det(v)
    back = mx.sym.load_json(sym.tojson())
    assert back.infer_shape(a=(3, 3))[1] == [(1,)]


@pytest.mark.parametrize("name", ["inverse", "det", "gelqf", "syevd"])
def test_gradients_accumulate(name, ctx):
    # MXNet 1.9.1 gets grad_req='add' wrong for these (wrong values or a crash).
    f = getattr(LA, name)
    a = mx.nd.array(A if name != "gelqf" else A[:2], dtype="float64", ctx=ctx)
    a.attach_grad(grad_req="add")
    grads = []
    for _ in range(2):
        with mx.autograd.record():
            out = f(a)
            loss = sum(o.sum() for o in out) if isinstance(out, (list, tuple)) else out.sum()
        loss.backward()
        grads.append(a.grad.asnumpy().copy())
    close(grads[1], 2 * grads[0], 1e-9)

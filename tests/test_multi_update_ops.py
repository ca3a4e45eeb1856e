"""The multi-weight SGD updates and the AdamW updates against MXNet 1.9.1's results.

The fixture ``fixtures/update_ops/multi_update_ops.npz`` was made by
``gen_multi_update_ops.py`` (beside it) with MXNet 1.9.1: each case holds the op's inputs,
its arguments, and every input after one update.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import rsmx as mx
from mxnet_cases import load_cases
from rsmx.base import MXNetError

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "update_ops", "multi_update_ops.npz")
STRIDE = {"multi_sgd_update": 2, "multi_sgd_mom_update": 3, "multi_mp_sgd_update": 3,
          "multi_mp_sgd_mom_update": 4}


CASES = load_cases(FIXTURE)


def _tol(dtype: np.dtype) -> dict:
    if dtype == np.float16:
        return {"rtol": 1e-3, "atol": 1e-3}
    if dtype == np.float32:
        return {"rtol": 1e-6, "atol": 1e-7}
    return {"rtol": 1e-13, "atol": 1e-14}


def _run(name, arrs, attrs):
    if name in STRIDE:
        outs = arrs[:: STRIDE[name]]
        res = getattr(mx.nd, name)(*arrs, out=outs, **attrs)
        assert all(r is o for r, o in zip(res, outs, strict=True))
    else:
        res = getattr(mx.nd._internal, name)(*arrs, out=arrs[0], **attrs)
        assert res is arrs[0]


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_matches_mxnet(case, ctx):
    arrs = [mx.nd.array(a, dtype=a.dtype, ctx=ctx) for a in case["inputs"]]
    _run(case["op"], arrs, case["attrs"])
    for j, (a, want) in enumerate(zip(arrs, case["after"], strict=True)):
        if j in case["skip"]:
            continue
        got = a.asnumpy()
        assert got.dtype == want.dtype, (j, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, err_msg=f"array {j}", **_tol(want.dtype))


def test_multi_sgd_equals_one_update_per_weight(ctx):
    rng = np.random.RandomState(3)
    ws = [rng.uniform(-1, 1, s).astype(np.float32) for s in [(4, 3), (7,)]]
    gs = [rng.uniform(-1, 1, w.shape).astype(np.float32) for w in ws]
    ms = [rng.uniform(-1, 1, w.shape).astype(np.float32) for w in ws]
    arrs = []
    for w, g, m in zip(ws, gs, ms, strict=True):
        arrs += [mx.nd.array(w, ctx=ctx), mx.nd.array(g, ctx=ctx), mx.nd.array(m, ctx=ctx)]
    mx.nd.multi_sgd_mom_update(*arrs, out=arrs[::3], lrs=(0.1, 0.2), wds=(0.01, 0.0),
                               momentum=0.9, num_weights=2)
    for t, (w, g, m) in enumerate(zip(ws, gs, ms, strict=True)):
        rw, rm = mx.nd.array(w, ctx=ctx), mx.nd.array(m, ctx=ctx)
        mx.nd.sgd_mom_update(rw, mx.nd.array(g, ctx=ctx), rm, out=rw, lr=(0.1, 0.2)[t],
                             wd=(0.01, 0.0)[t], momentum=0.9)
        np.testing.assert_array_equal(arrs[3 * t].asnumpy(), rw.asnumpy())
        np.testing.assert_array_equal(arrs[3 * t + 2].asnumpy(), rm.asnumpy())


def test_multi_sgd_symbol_lists_momenta_as_auxiliary():
    v = mx.sym.var
    sym = mx.sym.multi_sgd_mom_update(v("w0"), v("g0"), v("m0"), v("w1"), v("g1"), v("m1"),
                                      lrs=(0.1, 0.1), wds=(0, 0), num_weights=2)
    assert sym.list_arguments() == ["w0", "g0", "w1", "g1"]
    assert sym.list_auxiliary_states() == ["m0", "m1"]
    assert len(sym.list_outputs()) == 2


def test_multi_sgd_errors(ctx):
    w = mx.nd.zeros((2, 3), ctx=ctx)
    with pytest.raises(MXNetError, match=r"multi_sgd_update.*1 learning rates.*num_weights=2"):
        mx.nd.multi_sgd_update(w, w, w, w, lrs=(0.1,), wds=(0, 0), num_weights=2)
    with pytest.raises(MXNetError, match=r"multi_sgd_update.*expected 4 inputs.*got 3"):
        mx.nd.multi_sgd_update(w, w, w, lrs=(0.1, 0.1), wds=(0, 0), num_weights=2)
    with pytest.raises(MXNetError, match=r"multi_sgd_mom_update.*mom_1.*\(3,\).*\(2, 3\)"):
        mx.nd.multi_sgd_mom_update(w, w, w, w, w, mx.nd.zeros((3,), ctx=ctx), lrs=(0.1, 0.1),
                                   wds=(0, 0), num_weights=2)
    w16 = mx.nd.zeros((2,), dtype="float16", ctx=ctx)
    with pytest.raises(MXNetError, match=r"multi_mp_sgd_update.*float32"):
        mx.nd.multi_mp_sgd_update(w16, w16, w16, lrs=(0.1,), wds=(0,), num_weights=1)
    before = w.asnumpy()
    with pytest.raises(MXNetError):
        mx.nd.multi_sgd_update(w, mx.nd.zeros((3, 2), ctx=ctx), out=[w], lrs=(0.1,), wds=(0,))
    np.testing.assert_array_equal(w.asnumpy(), before)


def test_adamw_contrib_function(ctx):
    rng = np.random.RandomState(5)
    w0 = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    g = mx.nd.array(rng.uniform(-1, 1, (3, 4)), ctx=ctx)
    w, m, v = mx.nd.array(w0, ctx=ctx), mx.nd.zeros((3, 4), ctx=ctx), mx.nd.zeros((3, 4), ctx=ctx)
    mx.nd.contrib.adamw_update(w, g, m, v, rescale_grad=1.0, lr=0.1, eta=1.0, wd=0.1, out=w)
    gn = g.asnumpy()
    one = np.float32(1)
    mean = (one - np.float32(0.9)) * gn
    var = (one - np.float32(0.999)) * gn * gn
    want = w0 - (0.1 * mean / (np.sqrt(var) + 1e-8) + 0.1 * w0)
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.asnumpy(), mean, rtol=1e-6)
    # A scale that is not finite skips the update, states included.
    before = [a.asnumpy() for a in (w, m, v)]
    mx.nd.contrib.adamw_update(w, g, m, v, rescale_grad=mx.nd.array([np.nan], ctx=ctx), lr=0.1,
                               eta=1.0, out=w)
    for a, b in zip((w, m, v), before, strict=True):
        np.testing.assert_array_equal(a.asnumpy(), b)
    with pytest.raises(MXNetError, match=r"_adamw_update.*rescale_grad.*one value"):
        mx.nd._internal._adamw_update(w, g, m, v, mx.nd.ones((2,), ctx=ctx), lr=0.1, eta=1.0, out=w)
    with pytest.raises(MXNetError, match=r"_adamw_update.*eta"):
        mx.nd._internal._adamw_update(w, g, m, v, mx.nd.ones((1,), ctx=ctx), lr=0.1, out=w)


def test_adamw_symbol():
    v = mx.sym.var
    sym = mx.sym.contrib.adamw_update(v("w"), v("g"), v("m"), v("v"), rescale_grad=0.5, lr=0.1,
                                      eta=1.0)
    assert sym.list_arguments() == ["w", "g"]
    assert sym.list_auxiliary_states() == ["m", "v"]
    ex = sym.bind(mx.cpu(), {"w": mx.nd.ones((2,)), "g": mx.nd.ones((2,))},
                  aux_states={"m": mx.nd.zeros((2,)), "v": mx.nd.zeros((2,))})
    out = ex.forward()[0].asnumpy()
    g, one = np.float32(0.5), np.float32(1)
    mean, var = (one - np.float32(0.9)) * g, (one - np.float32(0.999)) * g * g
    np.testing.assert_allclose(out, 1 - 0.1 * mean / (np.sqrt(var) + 1e-8), rtol=1e-6)

"""LAMB's update phases (``lamb_update_phase1``/``2`` and the ``mp_`` forms) against
MXNet 1.9.1's results, composed into a LAMB step, and their errors.

The fixture ``fixtures/update_ops/lamb_phases.npz`` was made by ``gen_lamb_phases.py``
(beside it) with MXNet 1.9.1: each case holds the op's inputs and arguments, its output
and every input after the call.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import rsmx as mx
from mxnet_cases import load_cases
from rsmx.base import MXNetError

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "update_ops", "lamb_phases.npz")


CASES = load_cases(FIXTURE)


def _tol(dtype: np.dtype) -> dict:
    if dtype == np.float16:
        # MXNet runs the float16 phases in float16 arithmetic, rsmx in float32: the
        # direction's rounding differs by up to a few float16 steps.
        return {"rtol": 2e-2, "atol": 2e-3}
    if dtype == np.float32:
        return {"rtol": 1e-5, "atol": 1e-6}
    return {"rtol": 1e-12, "atol": 1e-13}


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_matches_mxnet(case, ctx):
    arrs = [mx.nd.array(a, dtype=a.dtype, ctx=ctx) for a in case["inputs"]]
    out = getattr(mx.nd, case["op"])(*arrs, **case["attrs"]).asnumpy()
    assert out.dtype == case["out"].dtype
    np.testing.assert_allclose(out, case["out"], **_tol(case["inputs"][0].dtype))
    for j, (a, want) in enumerate(zip(arrs, case["after"], strict=True)):
        np.testing.assert_allclose(a.asnumpy(), want, err_msg=f"input {j}", **_tol(want.dtype))


def test_phases_make_a_lamb_step(ctx):
    rng = np.random.RandomState(4)
    w0, g = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
    w, grad = mx.nd.array(w0, ctx=ctx), mx.nd.array(g, ctx=ctx)
    mean, var = mx.nd.zeros((3, 4), ctx=ctx), mx.nd.zeros((3, 4), ctx=ctx)
    d = mx.nd.lamb_update_phase1(w, grad, mean, var, t=1, wd=0.01)
    r1, r2 = w.norm(), d.norm()
    mx.nd.lamb_update_phase2(w, d, r1, r2, lr=0.1, out=w)
    # With zero moments and t=1 the bias-corrected direction is g / (|g| + eps) + wd * w.
    direction = g / (np.abs(g) + 1e-6) + 0.01 * w0
    rate = 0.1 * np.linalg.norm(w0) / np.linalg.norm(direction)
    np.testing.assert_allclose(w.asnumpy(), w0 - rate * direction, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean.asnumpy(), 0.1 * g, rtol=1e-5)


def test_symbols_list_the_moments_as_auxiliary():
    v = mx.sym.var
    p1 = mx.sym.lamb_update_phase1(v("w"), v("g"), v("m"), v("v"), t=1, wd=0.0)
    assert p1.list_arguments() == ["w", "g"]
    assert p1.list_auxiliary_states() == ["m", "v"]
    p2 = mx.sym.mp_lamb_update_phase2(v("w"), v("d"), v("r1"), v("r2"), v("w32"), lr=0.1)
    assert p2.list_auxiliary_states() == ["w32"]


def test_errors(ctx):
    w = mx.nd.zeros((2, 3), ctx=ctx)
    with pytest.raises(MXNetError, match=r"lamb_update_phase1.*t"):
        mx.nd.lamb_update_phase1(w, w, w, w, wd=0.0)
    with pytest.raises(MXNetError, match=r"lamb_update_phase1.*var.*\(3, 2\)"):
        mx.nd.lamb_update_phase1(w, w, w, mx.nd.zeros((3, 2), ctx=ctx), t=1, wd=0.0)
    with pytest.raises(MXNetError, match=r"lamb_update_phase2.*r1.*\(1,\)"):
        mx.nd.lamb_update_phase2(w, w, mx.nd.zeros((2,), ctx=ctx), mx.nd.zeros((1,), ctx=ctx),
                                 lr=0.1)
    with pytest.raises(MXNetError, match=r"mp_lamb_update_phase1.*float16"):
        mx.nd.mp_lamb_update_phase1(w, w, w, w, w, t=1, wd=0.0)
    w16 = w.astype("float16")
    with pytest.raises(MXNetError, match=r"mp_lamb_update_phase2.*g.*float32"):
        mx.nd.mp_lamb_update_phase2(w16, w16, mx.nd.ones((1,), ctx=ctx),
                                    mx.nd.ones((1,), ctx=ctx), w, lr=0.1)

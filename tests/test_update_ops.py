"""Fused optimizer update operators against MXNet 1.9.1's results.

The fixture ``fixtures/update_ops/update_ops.npz`` was made by ``gen_update_ops.py`` (beside
it) with MXNet 1.9.1: each case holds the inputs, the op's arguments, and the weight and
states after one update.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "update_ops", "update_ops.npz")


def _cases() -> list[tuple[str, dict]]:
    data = np.load(FIXTURE)
    meta = json.loads(str(data["meta"]))
    out = []
    for i, c in enumerate(meta):
        c = dict(c)
        c["inputs"] = [data[f"c{i}_in{j}"] for j in range(c["n_in"])]
        c["outputs"] = [data[f"c{i}_out{j}"] for j in range(c["n_out"])]
        dt = c["inputs"][0].dtype.name
        out.append((f"{c['op']}-{dt}-{i}", c))
    return out


CASES = _cases()


def _tol(dtype: np.dtype) -> dict:
    if dtype == np.float16:
        return {"rtol": 1e-3, "atol": 1e-3}
    if dtype == np.float32:
        return {"rtol": 1e-5, "atol": 1e-6}
    return {"rtol": 1e-12, "atol": 1e-13}


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_matches_mxnet(case, ctx):
    arrs = [mx.nd.array(a, dtype=a.dtype, ctx=ctx) for a in case["inputs"]]
    name = case["op"]
    op = getattr(mx.nd._internal if name.startswith("_") else mx.nd, name)
    res = op(*arrs, out=arrs[0], **case["attrs"])
    assert res is arrs[0] or np.array_equal(res.asnumpy(), arrs[0].asnumpy())
    got = [arrs[0].asnumpy()] + [a.asnumpy() for a in arrs[2:]]
    for j, (g, want) in enumerate(zip(got, case["outputs"], strict=True)):
        assert g.dtype == want.dtype, (j, g.dtype, want.dtype)
        np.testing.assert_allclose(g, want, err_msg=f"array {j}", **_tol(want.dtype))
    # The gradient is only read.
    np.testing.assert_array_equal(arrs[1].asnumpy(), case["inputs"][1])


def test_new_output_leaves_weight_alone(ctx):
    w = mx.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3), ctx=ctx)
    g = mx.nd.ones((2, 3), ctx=ctx)
    mom = mx.nd.zeros((2, 3), ctx=ctx)
    out = mx.nd.sgd_mom_update(w, g, mom, lr=0.5, momentum=0.9)
    np.testing.assert_allclose(out.asnumpy(), np.arange(6).reshape(2, 3) - 0.5)
    np.testing.assert_allclose(w.asnumpy(), np.arange(6).reshape(2, 3))
    np.testing.assert_allclose(mom.asnumpy(), np.full((2, 3), -0.5))


def test_state_write_orders_with_later_readers(ctx):
    # Every update writes mom; reads of mom queued after it must see each step.
    n = 1 << 18
    w = mx.nd.zeros((n,), ctx=ctx)
    g = mx.nd.ones((n,), ctx=ctx)
    mom = mx.nd.zeros((n,), ctx=ctx)
    seen = []
    for _ in range(4):
        mx.nd.sgd_mom_update(w, g, mom, out=w, lr=1.0, momentum=1.0)
        seen.append(mom * 1.0)
    got = [float(s.asnumpy()[n // 2]) for s in seen]
    assert got == [-1.0, -2.0, -3.0, -4.0]
    assert float(w.asnumpy()[-1]) == -10.0


def test_lazy_update_accepted_for_dense(ctx):
    w = mx.nd.ones((3,), ctx=ctx)
    mx.nd.sgd_update(w, mx.nd.ones((3,), ctx=ctx), out=w, lr=0.25, lazy_update=False)
    np.testing.assert_allclose(w.asnumpy(), np.full(3, 0.75))


def test_wrong_shape_names_op_and_shapes(ctx):
    w, g = mx.nd.zeros((2, 3), ctx=ctx), mx.nd.zeros((2, 3), ctx=ctx)
    with pytest.raises(MXNetError, match=r"sgd_mom_update.*mom.*\(3, 2\).*\(2, 3\)"):
        mx.nd.sgd_mom_update(w, g, mx.nd.zeros((3, 2), ctx=ctx), out=w, lr=0.1)
    with pytest.raises(MXNetError, match=r"adam_update.*grad.*\(6,\).*\(2, 3\)"):
        mx.nd.adam_update(w, mx.nd.zeros((6,), ctx=ctx), g, g, out=w, lr=0.1)


def test_mismatched_dtypes_are_rejected(ctx):
    w = mx.nd.zeros((4,), ctx=ctx)
    with pytest.raises(MXNetError, match=r"sgd_update.*grad.*float64"):
        mx.nd.sgd_update(w, mx.nd.zeros((4,), dtype="float64", ctx=ctx), out=w, lr=0.1)
    w16 = mx.nd.zeros((4,), dtype="float16", ctx=ctx)
    with pytest.raises(MXNetError, match=r"mp_sgd_update.*weight32.*float16"):
        mx.nd.mp_sgd_update(w16, w16, mx.nd.zeros((4,), dtype="float16", ctx=ctx), out=w16, lr=0.1)
    wi = mx.nd.zeros((4,), dtype="int32", ctx=ctx)
    with pytest.raises(MXNetError, match=r"signsgd_update.*int32"):
        mx.nd.signsgd_update(wi, wi, out=wi, lr=0.1)


def test_missing_lr_and_unknown_argument(ctx):
    w = mx.nd.zeros((2,), ctx=ctx)
    with pytest.raises(MXNetError, match=r"sgd_update.*lr"):
        mx.nd.sgd_update(w, w, out=w)
    with pytest.raises(MXNetError, match=r"adam_update.*momentum"):
        mx.nd.adam_update(w, w, w, w, out=w, lr=0.1, momentum=0.9)


def test_symbol_lists_states_as_auxiliary():
    sym = mx.sym.adam_update(mx.sym.var("w"), mx.sym.var("g"), mx.sym.var("m"),
                             mx.sym.var("v"), lr=0.1)
    assert sym.list_arguments() == ["w", "g"]
    assert sym.list_auxiliary_states() == ["m", "v"]


def test_fused_optimizer_matches_the_ops(ctx):
    from rsmx import _core

    opt = _core.FusedOptimizer("SGD", {"learning_rate": "0.1", "momentum": "0.9",
                                       "wd": "0.01", "lr_mult": '[["b", 2.0]]'})
    rng = np.random.RandomState(0)
    w0 = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    g = mx.nd.array(rng.uniform(-1, 1, (3, 4)).astype(np.float32), ctx=ctx)
    for key, lr in [(3, 0.1), ("b", 0.2)]:
        w = mx.nd.array(w0, ctx=ctx)
        states = opt.create_state(key, w)
        assert len(states) == 1
        rw, rm = mx.nd.array(w0, ctx=ctx), mx.nd.zeros((3, 4), ctx=ctx)
        for _ in range(3):
            opt.update(key, w, g, states, priority=-1)
            mx.nd.sgd_mom_update(rw, g, rm, out=rw, lr=lr, wd=0.01, momentum=0.9)
        np.testing.assert_array_equal(w.asnumpy(), rw.asnumpy())
        np.testing.assert_array_equal(states[0].asnumpy(), rm.asnumpy())
    assert opt.num_update == 3
    counts = opt.get_counts()
    # Counts are kept per device id, device 0's from the start, as in MXNet's optimizers.
    assert counts == {0: {}} | {ctx.device_id: {3: 3, "b": 3}}
    other = _core.FusedOptimizer("sgd", {"momentum": "0.9"})
    other.set_counts(counts)
    assert other.num_update == 3 and other.get_counts() == counts
    other.set_learning_rate(0.5)
    assert other.learning_rate == 0.5


def test_fused_optimizer_errors(ctx):
    from rsmx import _core

    with pytest.raises(MXNetError, match="lbsgd"):
        _core.FusedOptimizer("lbsgd", {})
    sched = '{"type": "FactorScheduler", "step": 2, "factor": 0.5, "base_lr": 0.1}'
    opt = _core.FusedOptimizer("adam", {"lr_scheduler": sched})
    with pytest.raises(MXNetError, match="LRScheduler"):
        opt.set_learning_rate(0.1)
    w = mx.nd.zeros((2,), ctx=ctx)
    with pytest.raises(MXNetError, match="state"):
        opt.update(0, w, w, [])
    with pytest.raises(MXNetError, match="key"):
        opt.create_state(1.5, w)
    states = opt.create_state(0, w)
    with pytest.raises(MXNetError, match="adam_update.*grad.*\\(3,\\)"):
        opt.update(0, w, mx.nd.zeros((3,), ctx=ctx), states)

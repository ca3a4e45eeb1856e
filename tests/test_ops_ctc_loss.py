"""CTCLoss against MXNet 1.9.1's losses and gradients, against a brute-force sum over
alignments, under every input convention, and its errors.

The fixture ``fixtures/ctc/ctc_loss.npz`` was made by ``gen_ctc_loss.py`` (beside it) with
MXNet 1.9.1. MXNet leaves the gradient of a sequence whose label cannot fit unwritten
(stored as NaN); rsmx gives it zeros. Where a label given with its length holds the blank's
class, MXNet's backward recursion allows transitions its forward one does not, so its
gradient is not the loss's derivative; rsmx's is (the losses agree).
"""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "ctc", "ctc_loss.npz")


def _cases() -> list[dict]:
    data = np.load(FIXTURE)
    out = []
    for i, c in enumerate(json.loads(str(data["cases"]))):
        c = dict(c)
        for key in ("data", "label", "data_lengths", "label_lengths", "head", "start", "loss",
                    "grad"):
            c[key] = data[f"c{i}_{key}"] if f"c{i}_{key}" in data else None
        out.append(c)
    return out


CASES = _cases()


def _ctc(data, label, attrs, data_lengths=None, label_lengths=None, head=None, start=None,
         grad_req="write", ctx=None, dtype="float32"):
    """The loss and the data's gradient for `head` (ones by default)."""
    ctx = ctx or mx.cpu()
    d = mx.nd.array(data, dtype=dtype, ctx=ctx)
    d.attach_grad(grad_req=grad_req)
    if start is not None:
        d.grad[:] = mx.nd.array(start, dtype=dtype, ctx=ctx)
    args = [d, mx.nd.array(label, dtype=label.dtype, ctx=ctx)]
    for extra in (data_lengths, label_lengths):
        if extra is not None:
            args.append(mx.nd.array(extra, dtype=extra.dtype, ctx=ctx))
    with mx.autograd.record():
        loss = mx.nd.CTCLoss(*args, **attrs)
    loss.backward(None if head is None else mx.nd.array(head, dtype=dtype, ctx=ctx))
    return loss.asnumpy(), d.grad.asnumpy()


def _blank_inside(c: dict) -> bool:
    """True if a label given with its length holds the blank's class."""
    if c["label_lengths"] is None:
        return False
    blank = c["data"].shape[2] - 1 if c["attrs"].get("blank_label") == "last" else 0
    return any(blank in np.round(row[: int(np.round(n))])
               for row, n in zip(c["label"], c["label_lengths"], strict=True))


@pytest.mark.parametrize("i", range(len(CASES)))
def test_matches_mxnet(i, ctx):
    c = CASES[i]
    loss, grad = _ctc(c["data"], c["label"], c["attrs"], c["data_lengths"], c["label_lengths"],
                      c["head"], c["start"], c["grad_req"], ctx)
    np.testing.assert_allclose(loss, c["loss"], rtol=1e-5, atol=1e-5)
    if _blank_inside(c):
        return
    want = c["grad"]
    unwritten = np.isnan(want)
    np.testing.assert_allclose(grad[~unwritten], want[~unwritten], rtol=1e-4, atol=1e-5)
    start = c["start"] if c["start"] is not None else np.zeros_like(grad)
    np.testing.assert_array_equal(grad[unwritten], start[unwritten])


def _brute_force(acts: np.ndarray, label: list[int], blank: int) -> float:
    """Minus the log of the summed probabilities of every path collapsing to `label`."""
    steps, classes = acts.shape
    p = np.exp(acts - acts.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(classes), repeat=steps):
        collapsed = [k for j, k in enumerate(path) if k != blank and (j == 0 or k != path[j - 1])]
        if collapsed == label:
            total += np.prod([p[t, k] for t, k in enumerate(path)])
    return -np.log(total)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_sums_every_alignment(dtype, ctx):
    rng = np.random.RandomState(3)
    data = rng.randn(5, 3, 3)
    label = np.array([[1, 2, 0], [2, 2, 0], [1, 0, 0]], np.float32)
    loss, grad = _ctc(data, label, {}, ctx=ctx, dtype=dtype)
    want = [_brute_force(data[:, b], lab, 0) for b, lab in enumerate([[1, 2], [2, 2], [1]])]
    tol = 1e-2 if dtype == "float16" else 1e-10 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(loss, want, rtol=tol)
    # Each step's gradient is a softmax minus a distribution: it sums to zero.
    np.testing.assert_allclose(grad.astype(np.float64).sum(-1), 0, atol=tol * 10)
    assert loss.dtype == np.dtype(dtype) and grad.dtype == np.dtype(dtype)


def test_gradient_is_the_numeric_derivative():
    rng = np.random.RandomState(5)
    data = rng.randn(6, 2, 4)
    label = np.array([[1, 3, 3], [2, 0, 0]], np.float64)
    _, grad = _ctc(data, label, {}, dtype="float64")
    eps = 1e-6
    for idx in [(0, 0, 1), (2, 1, 0), (5, 0, 3), (3, 1, 2)]:
        up, down = data.copy(), data.copy()
        up[idx] += eps
        down[idx] -= eps
        numeric = (_ctc(up, label, {}, dtype="float64")[0].sum()
                   - _ctc(down, label, {}, dtype="float64")[0].sum()) / (2 * eps)
        assert abs(numeric - grad[idx]) < 1e-6, idx


def test_symbol_names_outputs_and_shapes():
    v = mx.sym.var
    sym = mx.sym.CTCLoss(v("data"), v("label"), name="ctc")
    assert sym.list_arguments() == ["data", "label"]
    assert sym.list_outputs() == ["ctc_output0"]
    both = mx.sym.contrib.ctc_loss(v("data"), v("label"), v("dl"), v("ll"), use_data_lengths=True,
                                   use_label_lengths=True)
    assert both.list_arguments() == ["data", "label", "dl", "ll"]
    _, out_shapes, _ = both.infer_shape(data=(7, 3, 5), label=(3, 4), dl=(3,), ll=(3,))
    assert out_shapes == [(3,)]
    for fn in (mx.nd.ctc_loss, mx.nd.contrib.CTCLoss, mx.nd.contrib.ctc_loss):
        loss = fn(mx.nd.ones((4, 2, 3)), mx.nd.array([[1, 2], [1, 0]]))
        assert loss.shape == (2,)


def test_inference_matches_training(ctx):
    rng = np.random.RandomState(8)
    data, label = rng.randn(6, 2, 4), np.array([[1, 2], [3, 0]], np.float32)
    sym = mx.sym.CTCLoss(mx.sym.var("data"), mx.sym.var("label"))
    ex = sym.bind(ctx, {"data": mx.nd.array(data, ctx=ctx), "label": mx.nd.array(label, ctx=ctx)})
    infer = ex.forward(is_train=False)[0].asnumpy()
    train, _ = _ctc(data, label, {}, ctx=ctx)
    np.testing.assert_allclose(infer, train, rtol=1e-6)


def test_errors(ctx):
    x = mx.nd.ones((5, 2, 4), ctx=ctx)
    lab = mx.nd.array([[1, 2], [3, 0]], ctx=ctx)
    with pytest.raises(MXNetError, match=r"CTCLoss.*batch size"):
        mx.nd.CTCLoss(x, mx.nd.ones((3, 2), ctx=ctx))
    with pytest.raises(MXNetError, match=r"CTCLoss.*labels of length 6.*length 5"):
        mx.nd.CTCLoss(x, mx.nd.ones((2, 6), ctx=ctx))
    with pytest.raises(MXNetError, match=r"CTCLoss.*3-D"):
        mx.nd.CTCLoss(x[0], lab)
    with pytest.raises(MXNetError, match=r"CTCLoss.*data_lengths.*batch size 2"):
        mx.nd.CTCLoss(x, lab, mx.nd.array([5, 5, 5], ctx=ctx), use_data_lengths=True)
    with pytest.raises(MXNetError, match=r"CTCLoss.*blank_label"):
        mx.nd.CTCLoss(x, lab, blank_label="middle")
    with pytest.raises(MXNetError, match=r"CTCLoss.*float"):
        mx.nd.CTCLoss(x.astype("int32"), lab)
    # Values the shapes cannot show surface at the next wait; the engine goes on.
    with pytest.raises(MXNetError, match=r"CTCLoss.*label 4.*alphabet 0\.\.4"):
        mx.nd.CTCLoss(x, mx.nd.array([[1, 4], [1, 2]], ctx=ctx)).asnumpy()
    with pytest.raises(MXNetError, match=r"CTCLoss.*data_lengths\[1\] is 9"):
        mx.nd.CTCLoss(x, lab, mx.nd.array([5, 9], ctx=ctx), use_data_lengths=True).asnumpy()
    with pytest.raises(MXNetError, match=r"CTCLoss.*label_lengths\[0\] is -1"):
        mx.nd.CTCLoss(x, lab, mx.nd.array([-1, 1], ctx=ctx), use_label_lengths=True).asnumpy()
    assert mx.nd.CTCLoss(x, lab).shape == (2,)

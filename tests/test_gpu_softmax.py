"""The softmax family and the regression output layers on GPUs against the CPU operators:
forward, and backward through bound executors, with each operator's options, for every
float dtype. Runs on real GPUs, and in CI on fake ones (``RSMX_FAKE_GPU=2``)."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from gpu_bind import bind_and_run

pytestmark = pytest.mark.gpu

FLOATS = ["float32", "float64", "float16"]
TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}


def close(gpu, cpu) -> None:
    got, want = gpu.asnumpy(), cpu.asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = TOL[str(got.dtype)]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol, equal_nan=True)


def run(sym, args: dict, ctx, grad: dict, head=None, req="write", passes=1):
    """The output and the gradients of the args named in `grad` after `passes` passes."""
    ex = bind_and_run(sym, args, ctx, grad, None if head is None else [head], req, passes)
    return [ex.outputs[0]] + [ex.grad_dict[k] for k in grad]


def same_on_both(sym, args: dict, grad=(), head=None, req="write", passes=1) -> None:
    cpu = run(sym, args, mx.cpu(), grad, head, req, passes)
    gpu = run(sym, args, mx.gpu(0), grad, head, req, passes)
    for g, c in zip(gpu, cpu, strict=True):
        close(g, c)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_and_log_softmax_match_the_cpu(dtype):
    rng = np.random.default_rng(1)
    for shape in [(3, 4, 5), (2, 300), (1, 100003), (0, 4), (4, 1)]:
        x = (rng.standard_normal(shape) * 2).astype(dtype)
        c, g = mx.nd.array(x, dtype=dtype), mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype)
        for name in ("softmax", "log_softmax"):
            op = getattr(mx.nd, name)
            for kw in ({}, {"axis": 0, "temperature": 0.5}, {"axis": -1, "temperature": 3.0}):
                close(op(g, **kw), op(c, **kw))
        for out in FLOATS:
            close(mx.nd.softmax(g, dtype=out), mx.nd.softmax(c, dtype=out))
    x = rng.standard_normal((3, 6, 2)).astype(dtype)
    length = np.array([[2, 6], [0, 9], [5, -1]], "int32")
    c, g = mx.nd.array(x, dtype=dtype), mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype)
    for kw in ({"axis": 1}, {"axis": 1, "temperature": 2.0}):
        close(mx.nd.softmax(g, mx.nd.array(length, ctx=mx.gpu(0), dtype="int32"),
                            use_length=True, **kw),
              mx.nd.softmax(c, mx.nd.array(length, dtype="int32"), use_length=True, **kw))
    y = mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype)
    mx.nd.softmax(y, axis=1, out=y)
    close(y, mx.nd.softmax(c, axis=1))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_gradients_match_the_cpu(dtype):
    rng = np.random.default_rng(2)
    d = mx.sym.Variable("data")
    x = rng.standard_normal((3, 5, 4)).astype(dtype)
    head = rng.uniform(-1, 1, x.shape).astype(dtype)
    for sym in (mx.sym.softmax(d, axis=1, temperature=2.0), mx.sym.log_softmax(d),
                mx.sym.SoftmaxActivation(d), mx.sym.SoftmaxActivation(d, mode="channel")):
        same_on_both(sym, {"data": x}, ["data"], head)
        same_on_both(sym, {"data": x}, ["data"], head, req="add", passes=2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_output_matches_the_cpu(dtype):
    rng = np.random.default_rng(3)
    d, lab = mx.sym.Variable("data"), mx.sym.Variable("label")
    cases = [  # data shape, label, options
        ((4, 5), rng.integers(0, 5, 4), {}),
        ((4, 5), rng.integers(-1, 6, 4), {"grad_scale": 2.0, "normalization": "batch"}),
        ((6, 3), rng.integers(0, 3, 6), {"use_ignore": True, "ignore_label": 1,
                                         "normalization": "valid"}),
        ((5, 4), rng.integers(0, 4, 5), {"smooth_alpha": 0.2}),
        ((2, 3, 4), rng.integers(0, 3, (2, 4)), {"multi_output": True,
                                                 "normalization": "valid"}),
        ((2, 3, 4), rng.integers(0, 3, (2, 4)), {"multi_output": True, "use_ignore": True,
                                                 "ignore_label": 0, "normalization": "null"}),
        ((2, 3, 4), rng.integers(0, 4, (2, 3)), {"preserve_shape": True,
                                                 "normalization": "batch"}),
        ((3, 4), rng.uniform(0, 1, (3, 4)), {}),  # probability labels
        ((300, 7), rng.integers(0, 7, 300), {"normalization": "valid", "ignore_label": 3}),
    ]
    for shape, label, kw in cases:
        x = rng.standard_normal(shape).astype(dtype)
        sym = mx.sym.SoftmaxOutput(d, lab, **kw)
        same_on_both(sym, {"data": x, "label": label.astype(dtype)}, ["data"])
    x = rng.standard_normal((4, 5)).astype(dtype)
    sym = mx.sym.SoftmaxOutput(d, lab, out_grad=True)
    same_on_both(sym, {"data": x, "label": rng.integers(0, 5, 4).astype(dtype)}, ["data"],
                 rng.uniform(-1, 1, (4, 5)).astype(dtype), req="add", passes=2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_regression_outputs_match_the_cpu(dtype):
    rng = np.random.default_rng(4)
    d, lab = mx.sym.Variable("data"), mx.sym.Variable("label")
    for name in ("LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"):
        for shape, lshape in (((6, 3), (6, 3)), ((5, 1), (5,)), ((257,), (257,))):
            x = rng.uniform(-3, 3, shape).astype(dtype)
            label = rng.uniform(-3, 3, lshape).astype(dtype)
            sym = getattr(mx.sym, name)(d, lab, grad_scale=0.5)
            same_on_both(sym, {"data": x, "label": label}, ["data"])
            same_on_both(sym, {"data": x, "label": label}, ["data"], req="add", passes=2)
        x = rng.uniform(-3, 3, (4, 2)).astype(dtype)
        g = mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype)
        close(getattr(mx.nd, name)(g, g), getattr(mx.nd, name)(mx.nd.array(x, dtype=dtype),
                                                              mx.nd.array(x, dtype=dtype)))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("linear", [False, True])
def test_svm_output_matches_the_cpu(dtype, linear):
    rng = np.random.default_rng(5)
    d, lab = mx.sym.Variable("data"), mx.sym.Variable("label")
    sym = mx.sym.SVMOutput(d, lab, margin=0.75, regularization_coefficient=0.5,
                           use_linear=linear)
    for shape in ((6, 4), (3, 2, 5), (300, 7)):
        x = rng.uniform(-2, 2, shape).astype(dtype)
        label = rng.integers(0, shape[-1], shape[:-1]).astype(dtype)
        same_on_both(sym, {"data": x, "label": label}, ["data"])
        same_on_both(sym, {"data": x, "label": label}, ["data"], req="add", passes=2)

"""Convolution, Deconvolution and Pooling on GPUs against the CPU operators: forward, and
backward through bound executors, over many option combinations, for every float dtype
and both gradient requests; and a small LeNet trained one step under Module. Runs on
real GPUs, and in CI on fake ones (``RSMX_FAKE_GPU=2``)."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from gpu_bind import bind_and_run

pytestmark = pytest.mark.gpu

FLOATS = ["float32", "float64", "float16"]
TOL = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-10}


def close(gpu, cpu, what="") -> None:
    got, want = gpu.asnumpy(), cpu.asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape, what
    tol = TOL[str(got.dtype)]
    want64 = want.astype(np.float64)
    scale = max(1.0, float(np.abs(want64).max(initial=0.0)))
    np.testing.assert_allclose(got.astype(np.float64), want64, rtol=tol, atol=tol * scale,
                               equal_nan=True, err_msg=what)


def run(sym, args: dict, ctx, grad, head, req, passes):
    """The output and the gradients of the args in `grad` after `passes` passes; the
    gradients start at 0.5, so that add-requests must keep what was there."""
    ex = bind_and_run(sym, args, ctx, grad, [head], req, passes, start=0.5)
    return [ex.outputs[0]] + [ex.grad_dict[k] for k in grad]


def same_on_both(sym, args: dict, grad, seed, what="", reqs=(("write", 1), ("add", 2))) -> None:
    rng = np.random.default_rng(seed)
    dtype = next(iter(args.values())).dtype
    _, out_shapes, _ = sym.infer_shape(**{k: v.shape for k, v in args.items()})
    head = rng.uniform(-1, 1, out_shapes[0]).astype(dtype)
    for req, passes in reqs:
        cpu = run(sym, args, mx.cpu(), grad, head, req, passes)
        gpu = run(sym, args, mx.gpu(0), grad, head, req, passes)
        for name, g, c in zip(["output", *grad], gpu, cpu, strict=True):
            close(g, c, f"{what} {name} req={req}")


def layer_args(sym, data_shape, dtype, seed):
    rng = np.random.default_rng(seed)
    arg_shapes, _, _ = sym.infer_shape(data=data_shape)
    return {name: rng.uniform(-1, 1, shape).astype(dtype)
            for name, shape in zip(sym.list_arguments(), arg_shapes, strict=True)}


CONV_CASES = [
    ((2, 3, 11), dict(kernel=(3,), stride=(2,), pad=(1,), dilate=(2,), num_filter=4)),
    ((3, 2, 5), dict(kernel=(1,), num_filter=3)),
    ((2, 3, 7, 6), dict(kernel=(3, 3), pad=(1, 1), num_filter=5)),
    ((2, 3, 7, 6), dict(kernel=(3, 2), stride=(2, 1), dilate=(1, 2), num_filter=4, no_bias=True)),
    ((2, 6, 5, 5), dict(kernel=(3, 3), num_group=3, num_filter=6, pad=(2, 0))),
    ((1, 4, 5, 4), dict(kernel=(1, 1), num_filter=6, num_group=2, layout="NCHW")),
    ((2, 3, 6, 7), dict(kernel=(1, 1), stride=(2, 2), num_filter=2)),
    ((1, 2, 4, 5, 4), dict(kernel=(2, 3, 2), stride=(1, 2, 1), pad=(1, 0, 1), num_filter=3)),
    ((2, 4, 3, 4, 5), dict(kernel=(1, 2, 2), dilate=(2, 1, 2), num_group=2, num_filter=2)),
]


@pytest.mark.parametrize("dtype", FLOATS)
def test_convolution_matches_the_cpu(dtype):
    for i, (shape, kw) in enumerate(CONV_CASES):
        sym = mx.sym.Convolution(mx.sym.Variable("data"), name="conv", **kw)
        args = layer_args(sym, shape, dtype, i)
        same_on_both(sym, args, list(args), i, f"{shape} {kw}")


DECONV_CASES = [
    ((2, 3, 6), dict(kernel=(3,), stride=(2,), pad=(1,), adj=(1,), num_filter=2)),
    ((2, 3, 4, 5), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), adj=(1, 0), num_filter=4,
                        no_bias=False)),
    ((1, 4, 3, 3), dict(kernel=(4, 4), stride=(2, 2), target_shape=(7, 8), num_filter=2,
                        num_group=2, no_bias=False)),
    ((2, 2, 4, 4), dict(kernel=(2, 3), dilate=(2, 1), num_filter=3)),
    ((2, 4, 3, 5), dict(kernel=(1, 1), num_filter=2, no_bias=False)),
    ((1, 2, 2, 3, 2), dict(kernel=(2, 2, 3), stride=(2, 1, 2), pad=(0, 1, 1), num_filter=2,
                           no_bias=False)),
]


@pytest.mark.parametrize("dtype", FLOATS)
def test_deconvolution_matches_the_cpu(dtype):
    for i, (shape, kw) in enumerate(DECONV_CASES):
        sym = mx.sym.Deconvolution(mx.sym.Variable("data"), name="deconv", **kw)
        args = layer_args(sym, shape, dtype, i + 20)
        same_on_both(sym, args, list(args), i, f"{shape} {kw}")


POOL_CASES = [
    ((2, 3, 8, 8), dict(kernel=(2, 2), stride=(2, 2), pool_type="max")),
    ((2, 3, 7, 6), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max",
                        pooling_convention="full")),
    ((2, 3, 7, 6), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                        pooling_convention="full", count_include_pad=False)),
    ((2, 3, 7, 6), dict(kernel=(3, 2), stride=(1, 2), pad=(1, 0), pool_type="avg")),
    ((1, 2, 5, 5), dict(kernel=(2, 2), pool_type="sum")),
    ((1, 2, 5, 5), dict(kernel=(3, 3), stride=(2, 2), pool_type="lp", p_value=2)),
    ((1, 2, 5, 5), dict(kernel=(2, 2), pool_type="lp", p_value=1)),
    ((1, 2, 5, 5), dict(kernel=(2, 2), pool_type="lp", p_value=3)),
    ((2, 3, 5, 4), dict(global_pool=True, pool_type="max")),
    ((2, 3, 5, 4), dict(kernel=(1, 1), global_pool=True, pool_type="avg")),
    ((2, 3, 9), dict(kernel=(3,), stride=(2,), pool_type="max")),
    ((2, 3, 9), dict(kernel=(4,), stride=(3,), pad=(1,), pool_type="avg",
                     pooling_convention="full")),
    ((2, 3, 9), dict(kernel=(4,), stride=(2,), pool_type="max", pooling_convention="same")),
    ((1, 2, 4, 5, 4), dict(kernel=(2, 2, 2), stride=(2, 1, 2), pool_type="max")),
    ((1, 2, 4, 5, 4), dict(kernel=(2, 3, 2), pad=(1, 1, 0), pool_type="avg")),
    ((1, 2, 64, 40), dict(global_pool=True, pool_type="max")),
]


@pytest.mark.parametrize("dtype", FLOATS)
def test_pooling_matches_the_cpu(dtype):
    for i, (shape, kw) in enumerate(POOL_CASES):
        sym = mx.sym.Pooling(mx.sym.Variable("data"), **kw)
        rng = np.random.default_rng(i)
        x = rng.uniform(-2, 2, shape).astype(dtype)
        if kw["pool_type"] == "lp":
            x = np.abs(x) + 0.25
        same_on_both(sym, {"data": x.astype(dtype)}, ["data"], i, f"{shape} {kw}")


@pytest.mark.parametrize("dtype", FLOATS)
def test_imperative_layers_match_the_cpu(dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 4, 9, 7)).astype(dtype)
    w = rng.uniform(-1, 1, (6, 2, 3, 3)).astype(dtype)
    b = rng.uniform(-1, 1, (6,)).astype(dtype)
    for ctx_args in ((x, w, b),):
        c = [mx.nd.array(v, dtype=dtype) for v in ctx_args]
        g = [mx.nd.array(v, ctx=mx.gpu(0), dtype=dtype) for v in ctx_args]
        kw = dict(kernel=(3, 3), num_filter=6, num_group=2, stride=(2, 1), pad=(1, 1))
        close(mx.nd.Convolution(*g, **kw), mx.nd.Convolution(*c, **kw))
        close(mx.nd.Pooling(g[0], kernel=(3, 2), stride=(2, 2), pool_type="max"),
              mx.nd.Pooling(c[0], kernel=(3, 2), stride=(2, 2), pool_type="max"))
        dw = rng.uniform(-1, 1, (4, 3, 2, 2)).astype(dtype)
        kw = dict(kernel=(2, 2), num_filter=3, stride=(2, 2), no_bias=True)
        close(mx.nd.Deconvolution(g[0], mx.nd.array(dw, ctx=mx.gpu(0), dtype=dtype), **kw),
              mx.nd.Deconvolution(c[0], mx.nd.array(dw, dtype=dtype), **kw))


def test_bad_shapes_raise_the_cpu_errors():
    x = mx.nd.zeros((1, 3, 2, 2), ctx=mx.gpu(0))
    w = mx.nd.zeros((4, 3, 3, 3), ctx=mx.gpu(0))
    with pytest.raises(mx.base.MXNetError, match="Convolution"):
        mx.nd.Convolution(x, w, kernel=(3, 3), num_filter=4, no_bias=True).asnumpy()
    with pytest.raises(mx.base.MXNetError, match="Pooling"):
        mx.nd.Pooling(x, kernel=(3, 3), pool_type="max").asnumpy()
    with pytest.raises(mx.base.MXNetError, match="Deconvolution"):
        mx.nd.Deconvolution(x, w, kernel=(3, 3), num_filter=4, pad=(4, 4)).asnumpy()


def lenet():
    data = mx.sym.Variable("data")
    c1 = mx.sym.Convolution(data, kernel=(5, 5), num_filter=6, name="c1")
    p1 = mx.sym.Pooling(mx.sym.Activation(c1, act_type="tanh"), pool_type="max",
                        kernel=(2, 2), stride=(2, 2))
    c2 = mx.sym.Convolution(p1, kernel=(5, 5), num_filter=8, name="c2")
    p2 = mx.sym.Pooling(mx.sym.Activation(c2, act_type="tanh"), pool_type="max",
                        kernel=(2, 2), stride=(2, 2))
    f1 = mx.sym.FullyConnected(p2, num_hidden=24, name="f1")  # flattens its input
    f2 = mx.sym.FullyConnected(mx.sym.Activation(f1, act_type="tanh"), num_hidden=10,
                               name="f2")
    return mx.sym.SoftmaxOutput(f2, name="softmax")


def lenet_step(ctx, params, x, y):
    mod = mx.mod.Module(lenet(), context=ctx, data_names=["data"],
                        label_names=["softmax_label"])
    mod.bind(data_shapes=[("data", x.shape)], label_shapes=[("softmax_label", y.shape)],
             inputs_need_grad=True)
    mod.init_params(arg_params={k: mx.nd.array(v) for k, v in params.items()},
                    aux_params={})
    batch = mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(y)])
    mod.forward(batch, is_train=True)
    mod.backward()
    grads = {name: g[0] for name, g in zip(mod._param_names, mod._exec_group.grad_arrays,
                                           strict=True)}
    return mod.get_outputs()[0], mod.get_input_grads()[0], grads


def test_lenet_module_gives_the_same_outputs_and_gradients_on_gpu():
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (5, 1, 28, 28)).astype("float32")
    y = rng.integers(0, 10, 5).astype("float32")
    arg_shapes, _, _ = lenet().infer_shape(data=x.shape, softmax_label=y.shape)
    params = {name: rng.uniform(-0.3, 0.3, shape).astype("float32")
              for name, shape in zip(lenet().list_arguments(), arg_shapes, strict=True)
              if name not in ("data", "softmax_label")}
    out_c, dx_c, grads_c = lenet_step(mx.cpu(), params, x, y)
    out_g, dx_g, grads_g = lenet_step(mx.gpu(0), params, x, y)
    close(out_g, out_c, "output")
    close(dx_g, dx_c, "data gradient")
    assert set(grads_g) == set(params)
    for name in params:
        close(grads_g[name], grads_c[name], name)



def test_column_matrices_too_big_for_one_run_go_in_several():
    # 16 channels x 9x9 taps x 120x120 positions: about 150 MB of float64 columns per image,
    # more than one run of the GPU kernels unfolds at once.
    for op, kw, shape in (("Convolution", dict(num_filter=2), (2, 16, 128, 128)),
                          ("Deconvolution", dict(num_filter=16, no_bias=False), (2, 2, 120, 120))):
        sym = getattr(mx.sym, op)(mx.sym.Variable("data"), kernel=(9, 9), name="big", **kw)
        args = layer_args(sym, shape, "float64", 11)
        same_on_both(sym, args, list(args), 11, op, reqs=(("write", 1),))

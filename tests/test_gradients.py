"""Numeric gradient checks through bound executors: every layer's backward, as the graph
runs it (gradient pass, memory plan, in-place), against central differences in float64."""

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError


def numeric_check(ctx, sym, shapes, rtol=1e-4, atol=1e-6, eps=1e-4, seed=0, skip=(), ints=None):
    """Compares the executor's gradients of ``sum(out * head)`` with central differences."""
    rng = np.random.RandomState(seed)
    ints = ints or {}
    args = {}
    for name in sym.list_arguments():
        shape = shapes[name]
        if name in ints:
            args[name] = rng.randint(0, ints[name], shape).astype(np.float64)
        else:
            args[name] = rng.uniform(-1, 1, shape)
    aux_names = sym.list_auxiliary_states()
    _, _, aux_shapes = sym.infer_shape(**shapes)
    aux = {n: np.abs(rng.uniform(0.5, 1.5, s)) for n, s in zip(aux_names, aux_shapes, strict=True)}
    wrt = [n for n in args if n not in skip and n not in ints]
    grad_req = {n: ("write" if n in wrt else "null") for n in args}
    ex = sym.simple_bind(ctx, grad_req=grad_req,
                         type_dict={n: np.float64 for n in args}, **shapes)
    for n, v in args.items():
        ex.arg_dict[n][:] = v
    for n, v in aux.items():
        ex.aux_dict[n][:] = v
    out = ex.forward(is_train=True)[0]
    head = rng.uniform(-1, 1, out.shape)
    ex.backward(mx.nd.array(head, ctx=ctx, dtype=np.float64))
    grads = {n: ex.grad_dict[n].asnumpy() for n in wrt}

    def objective() -> float:
        for n, v in aux.items():
            ex.aux_dict[n][:] = v
        return float((ex.forward(is_train=True)[0].asnumpy() * head).sum())

    for n in wrt:
        base = args[n]
        numeric = np.zeros_like(base)
        flat = base.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            ex.arg_dict[n][:] = base
            plus = objective()
            flat[i] = old - eps
            ex.arg_dict[n][:] = base
            minus = objective()
            flat[i] = old
            ex.arg_dict[n][:] = base
            numeric.reshape(-1)[i] = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(grads[n], numeric, rtol=rtol, atol=atol, err_msg=n)


d = mx.sym.Variable("data")

CASES = {
    "fc": (mx.sym.FullyConnected(d, num_hidden=3, name="fc"), {"data": (2, 4)}),
    "fc_noflat": (mx.sym.FullyConnected(d, num_hidden=3, flatten=False, name="fc"),
                  {"data": (2, 2, 4)}),
    "fc_nobias": (mx.sym.FullyConnected(d, num_hidden=3, no_bias=True, name="fc"),
                  {"data": (2, 2, 2)}),
    "conv2d": (mx.sym.Convolution(d, kernel=(3, 3), num_filter=2, pad=(1, 1), stride=(2, 1),
                                  name="c"), {"data": (2, 2, 5, 4)}),
    "conv1d_group": (mx.sym.Convolution(d, kernel=(3,), num_filter=4, num_group=2, dilate=(2,),
                                        name="c"), {"data": (1, 4, 8)}),
    "deconv": (mx.sym.Deconvolution(d, kernel=(3, 3), num_filter=2, stride=(2, 2), name="dc"),
               {"data": (1, 2, 3, 3)}),
    "pool_max": (mx.sym.Pooling(d, kernel=(2, 2), stride=(2, 2), pool_type="max"),
                 {"data": (1, 2, 4, 4)}),
    "pool_avg_full": (mx.sym.Pooling(d, kernel=(3, 3), stride=(2, 2), pool_type="avg",
                                     pooling_convention="full"), {"data": (1, 1, 5, 5)}),
    "pool_max_same": (mx.sym.Pooling(d, kernel=(3,), stride=(2,), pool_type="max",
                                     pooling_convention="same"), {"data": (1, 2, 9)}),
    "batchnorm": (mx.sym.BatchNorm(d, fix_gamma=False, name="bn"), {"data": (4, 3, 2)}),
    "relu_tanh": (mx.sym.Activation(mx.sym.Activation(d, act_type="tanh"), act_type="softrelu"),
                  {"data": (3, 4)}),
    "leaky_prelu": (mx.sym.LeakyReLU(d, act_type="prelu", name="p"), {"data": (2, 3, 2)}),
    "elu": (mx.sym.LeakyReLU(d, act_type="elu", slope=0.3), {"data": (3, 4)}),
    "softmax": (mx.sym.softmax(d, axis=1), {"data": (2, 5)}),
    "log_softmax": (mx.sym.log_softmax(d), {"data": (2, 5)}),
    "embedding": (mx.sym.Embedding(d, input_dim=5, output_dim=3, dtype="float64", name="emb"),
                  {"data": (2, 3)}),
    "branches": (
        mx.sym.broadcast_mul(mx.sym.sum(d * d, axis=1, keepdims=True), mx.sym.exp(d) + d / 3),
        {"data": (2, 3)},
    ),
    "dot_transpose": (
        mx.sym.dot(d, mx.sym.Variable("w"), transpose_b=True),
        {"data": (2, 3), "w": (4, 3)},
    ),
    "concat_slice": (
        mx.sym.concat(mx.sym.slice_axis(d, axis=1, begin=0, end=2), mx.sym.tanh(d), dim=1),
        {"data": (2, 3)},
    ),
    "reshape_transpose": (mx.sym.transpose(mx.sym.Reshape(d, shape=(0, -1, 2))),
                          {"data": (2, 4)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_numeric_gradient(case, ctx):
    sym, shapes = CASES[case]
    shapes = dict(shapes)
    arg_shapes, _, _ = sym.infer_shape(**shapes)
    shapes.update(zip(sym.list_arguments(), arg_shapes, strict=True))
    ints = {"data": 5} if case == "embedding" else None
    numeric_check(ctx, sym, shapes, ints=ints)


def test_loss_outputs_give_their_own_gradient(ctx):
    label = mx.sym.Variable("label")
    for make, grad in [
        # As MXNet, scaled by one over the number of outputs per sample.
        (mx.sym.LinearRegressionOutput, lambda p, y: (p - y) / 2),
        (mx.sym.LogisticRegressionOutput, lambda p, y: (p - y) / 2),
        (mx.sym.MAERegressionOutput, lambda p, y: np.sign(p - y) / 2),
    ]:
        net = make(d, label)
        ex = net.simple_bind(ctx, data=(3, 2), label=(3, 2))
        x = np.array([[0.5, -1.0], [2.0, 0.1], [-0.3, 0.7]], np.float32)
        y = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.5]], np.float32)
        p = ex.forward(is_train=True, data=x, label=y)[0].asnumpy()
        ex.backward()
        np.testing.assert_allclose(ex.grad_dict["data"].asnumpy(), grad(p, y), rtol=1e-5,
                                   atol=1e-6)


def _svm_grad(y, label, margin, coef, linear):
    """MXNet's SVMOutput gradient: rows over all axes but the last, one label each."""
    y2 = y.reshape(-1, y.shape[-1])
    is_label = np.arange(y2.shape[1])[None, :] == label.reshape(-1, 1).astype(np.int64)
    if linear:
        g = np.where(is_label, -1.0 * (margin > y2), 1.0 * (margin > -y2))
    else:
        g = np.where(is_label, -2 * np.maximum(margin - y2, 0), 2 * np.maximum(margin + y2, 0))
    return (g * coef).astype(y.dtype).reshape(y.shape)


@pytest.mark.parametrize("linear", [False, True])
def test_svm_output_passes_data_and_takes_the_hinge_gradient(ctx, linear):
    rng = np.random.default_rng(11)
    label = mx.sym.Variable("label")
    for shape, margin, coef in (((6, 5), 1.0, 1.0), ((2, 3, 4), 0.5, 0.25)):
        net = mx.sym.SVMOutput(d, label, margin=margin, regularization_coefficient=coef,
                               use_linear=linear)
        assert net.infer_shape(data=shape)[0][1] == shape[:-1]
        x = rng.uniform(-2, 2, shape).astype(np.float32)
        y = rng.integers(0, shape[-1], shape[:-1]).astype(np.float32)
        ex = net.simple_bind(ctx, data=shape)
        out = ex.forward(is_train=True, data=x, label=y)[0].asnumpy()
        np.testing.assert_array_equal(out, x)
        ex.backward()
        np.testing.assert_allclose(ex.grad_dict["data"].asnumpy(),
                                   _svm_grad(x, y, margin, coef, linear), rtol=1e-6)


def test_same_pooling_gives_one_output_per_stride():
    x = np.arange(20, dtype=np.float32).reshape(1, 2, 10)
    for kernel, stride in ((2, 2), (3, 3), (5, 1), (1, 4)):
        y = mx.nd.Pooling(mx.nd.array(x), kernel=(kernel,), stride=(stride,), pool_type="max",
                          pad=(0, 0, 0), pooling_convention="same").asnumpy()
        starts = range(0, 10, stride)
        want = np.stack([x[..., s:min(s + kernel, 10)].max(-1) for s in starts], -1)
        np.testing.assert_array_equal(y, want)
    with pytest.raises(MXNetError, match="same.*pad"):
        mx.nd.Pooling(mx.nd.array(x), kernel=(2,), pad=(1,), pooling_convention="same")
    with pytest.raises(MXNetError, match="same.*3-D"):
        mx.nd.Pooling(mx.nd.ones((1, 1, 4, 4)), kernel=(2, 2), pooling_convention="same")


def test_svm_output_rejects_a_label_of_the_wrong_shape():
    net = mx.sym.SVMOutput(d, mx.sym.Variable("label"))
    with pytest.raises(MXNetError, match="SVMOutput.*label"):
        net.infer_shape(data=(4, 3), label=(4, 3))


def test_dropout_is_identity_at_inference_and_masks_in_training(ctx):
    net = mx.sym.Dropout(d, p=0.5)
    ex = net.simple_bind(ctx, data=(200,))
    ex.arg_dict["data"][:] = 1
    np.testing.assert_array_equal(ex.forward(is_train=False)[0].asnumpy(), np.ones(200))
    out = ex.forward(is_train=True)[0].asnumpy()
    assert set(np.unique(out)) <= {0.0, 2.0} and 40 < (out == 0).sum() < 160
    ex.backward(mx.nd.ones(200, ctx=ctx))
    np.testing.assert_array_equal(ex.grad_dict["data"].asnumpy(), out)


def test_blockgrad_stops_gradient(ctx):
    w = mx.sym.Variable("w")
    net = mx.sym.BlockGrad(d * 2) + d * w
    ex = net.simple_bind(ctx, data=(3,), w=(3,))
    ex.arg_dict["w"][:] = 5
    ex.forward(is_train=True)
    ex.backward(mx.nd.ones(3, ctx=ctx))
    np.testing.assert_array_equal(ex.grad_dict["data"].asnumpy(), [5, 5, 5])


def test_batchnorm_updates_moving_stats_in_training(ctx):
    net = mx.sym.BatchNorm(d, momentum=0.5, name="bn")
    ex = net.simple_bind(ctx, data=(4, 2))
    ex.aux_dict["bn_moving_var"][:] = 1
    ex.arg_dict["data"][:] = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32)
    ex.forward(is_train=False)
    np.testing.assert_array_equal(ex.aux_dict["bn_moving_mean"].asnumpy(), [0, 0])
    ex.forward(is_train=True)
    np.testing.assert_allclose(ex.aux_dict["bn_moving_mean"].asnumpy(), [2.0, 2.5])

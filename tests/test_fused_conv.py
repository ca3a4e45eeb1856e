"""Bind-time fusion of Convolution with the BatchNorm, residual add and ReLU after it, in
executors bound without gradients: which chains fuse, and that fused executors compute
what the layers compute one by one (the same graph bound with fusion turned off), in
inference and in training mode, and raise the layers' errors."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx

FUSED = "_sg_rsmx_conv"


@pytest.fixture
def unfused(monkeypatch):
    """Binds in the `with` block see fusion turned off, as `MXNET_SUBGRAPH_BACKEND=NONE`
    turns it off."""

    class Off:
        def __enter__(self):
            monkeypatch.setenv("MXNET_SUBGRAPH_BACKEND", "NONE")

        def __exit__(self, *exc):
            monkeypatch.delenv("MXNET_SUBGRAPH_BACKEND")

    return Off()


def conv(x, name, filters=6, kernel=3, stride=1, groups=1, no_bias=True, nd=2):
    return mx.sym.Convolution(
        x, name=name, num_filter=filters, kernel=(kernel,) * nd, stride=(stride,) * nd,
        pad=(kernel // 2,) * nd, num_group=groups, no_bias=no_bias,
    )


def bn(x, name, **kw):
    return mx.sym.BatchNorm(x, name=name, **kw)


def relu(x, name):
    return mx.sym.Activation(x, name=name, act_type="relu")


def fill(ex, seed=0):
    rng = np.random.RandomState(seed)
    for k, v in ex.arg_dict.items():
        if k.endswith("gamma"):
            v[:] = rng.uniform(0.5, 1.5, v.shape)
        else:
            v[:] = rng.uniform(-1, 1, v.shape)
    for k, v in ex.aux_dict.items():
        v[:] = rng.uniform(0.5, 1.5, v.shape) if k.endswith("var") else rng.uniform(-0.3, 0.3, v.shape)


def bind_pair(sym, unfused, dtype="float32", **shapes):
    """The same graph bound with and without fusion, holding the same values."""
    types = {k: dtype for k in shapes}
    fused = sym.simple_bind(mx.cpu(), grad_req="null", type_dict=types, **shapes)
    with unfused:
        plain = sym.simple_bind(mx.cpu(), grad_req="null", type_dict=types, **shapes)
    fill(fused)
    fill(plain)
    return fused, plain


def fused_nodes(ex) -> int:
    return ex.debug_str().count(FUSED)


def residual_net():
    x = mx.sym.Variable("data")
    y = relu(bn(conv(x, "c1"), "bn1"), "r1")
    y = bn(conv(y, "c2"), "bn2")
    sc = bn(conv(x, "csc", kernel=1), "bnsc")
    return relu(y + sc, "out")


def twice(c):
    return relu(c * 2 + c, "r")


CASES = {
    # (symbol builder, data shape, fused nodes expected)
    "conv_bn_relu": (lambda x: relu(bn(conv(x, "c"), "b"), "r"), (2, 3, 9, 8), 1),
    "conv_bn": (lambda x: bn(conv(x, "c"), "b", fix_gamma=False), (2, 3, 9, 8), 1),
    "conv_bias_relu": (lambda x: mx.sym.relu(conv(x, "c", no_bias=False)), (2, 3, 9, 8), 1),
    "conv_bias_bn_relu": (lambda x: relu(bn(conv(x, "c", no_bias=False), "b"), "r"), (1, 3, 7, 7), 1),
    "depthwise_strided": (
        lambda x: relu(bn(conv(x, "c", filters=4, stride=2, groups=4), "b"), "r"), (2, 4, 15, 13), 1),
    "winograd": (lambda x: relu(bn(conv(x, "c", filters=16), "b"), "r"), (3, 16, 20, 20), 1),
    "one_by_one": (lambda x: relu(bn(conv(x, "c", filters=8, kernel=1), "b"), "r"), (2, 5, 6, 6), 1),
    "conv1d": (lambda x: relu(bn(conv(x, "c", nd=1), "b"), "r"), (2, 3, 11), 1),
    "conv3d": (lambda x: relu(bn(conv(x, "c", nd=3), "b"), "r"), (2, 3, 5, 6, 4), 1),
    "grouped": (lambda x: relu(bn(conv(x, "c", filters=6, groups=3), "b"), "r"), (2, 6, 9, 8), 1),
    "global_stats_fix_gamma": (
        lambda x: relu(bn(conv(x, "c"), "b", use_global_stats=True, fix_gamma=True), "r"), (2, 3, 9, 8), 1),
    "residual_left": (
        lambda x: relu(bn(conv(x, "c", filters=3), "b") + x, "r"), (2, 3, 9, 8), 1),
    "residual_right": (
        lambda x: relu(x + bn(conv(x, "c", filters=3), "b"), "r"), (2, 3, 9, 8), 1),
    "resnet_block": (lambda x: residual_net(), (2, 3, 10, 10), 3),
    # Not fused: a BatchNorm over another axis, a BatchNorm's statistics read, an
    # intermediate read twice, or nothing after the convolution that fuses.
    "bn_axis_3": (lambda x: relu(bn(conv(x, "c"), "b", axis=3), "r"), (2, 3, 9, 8), 0),
    "bn_mean_var_read": (
        lambda x: mx.sym.Group([relu(bn(conv(x, "c"), "b", output_mean_var=True)[0], "r"),
                                bn(conv(x, "c2"), "b2", output_mean_var=True)[1]]), (2, 3, 9, 8), 1),
    "conv_read_twice": (lambda x: twice(conv(x, "c")), (2, 3, 9, 8), 0),
    "conv_tanh": (lambda x: mx.sym.tanh(conv(x, "c")), (2, 3, 9, 8), 0),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_inference_matches_the_layers_one_by_one(case, dtype, unfused):
    build, shape, count = CASES[case]
    sym = build(mx.sym.Variable("data"))
    fused, plain = bind_pair(sym, unfused, dtype, data=shape)
    assert fused_nodes(fused) == count
    assert fused_nodes(plain) == 0
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for a, b in zip(fused.forward(is_train=False), plain.forward(is_train=False), strict=True):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=rtol, atol=rtol)
    # Bit for bit the same run after run.
    again = fused.forward(is_train=False)[0].asnumpy()
    assert again.tobytes() == fused.outputs[0].asnumpy().tobytes()


@pytest.mark.parametrize("case", ["conv_bn_relu", "resnet_block", "depthwise_strided", "conv_bn"])
def test_training_mode_uses_batch_statistics_and_updates_the_moving_ones(case, unfused):
    build, shape, _ = CASES[case]
    sym = build(mx.sym.Variable("data"))
    fused, plain = bind_pair(sym, unfused, data=shape)
    for _ in range(2):
        a = fused.forward(is_train=True)[0].asnumpy()
        b = plain.forward(is_train=True)[0].asnumpy()
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for k in plain.aux_dict:
        np.testing.assert_allclose(fused.aux_dict[k].asnumpy(), plain.aux_dict[k].asnumpy(), rtol=1e-5, atol=1e-6)
    # And back to inference, now with the moved statistics.
    np.testing.assert_allclose(fused.forward(is_train=False)[0].asnumpy(),
                               plain.forward(is_train=False)[0].asnumpy(), rtol=1e-5, atol=1e-5)


def test_executors_with_gradients_and_other_dtypes_are_not_fused():
    sym = relu(bn(conv(mx.sym.Variable("data"), "c"), "b"), "r")
    assert fused_nodes(sym.simple_bind(mx.cpu(), data=(1, 3, 8, 8))) == 0
    f16 = sym.simple_bind(mx.cpu(), data=(1, 3, 8, 8), grad_req="null", type_dict={"data": "float16"})
    assert fused_nodes(f16) == 0


def test_module_predict_is_fused_and_matches_training_bind(unfused):
    """Module binds for inference without gradients: its predictions equal those of a
    module bound for training."""
    sym = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Flatten(residual_net()), num_hidden=4, name="fc"),
                               name="softmax")
    data = np.random.RandomState(1).uniform(-1, 1, (6, 3, 10, 10)).astype("float32")
    it = mx.io.NDArrayIter(data, np.zeros(6), batch_size=3)
    train = mx.mod.Module(sym)
    train.bind(it.provide_data, it.provide_label)
    train.init_params(mx.init.Xavier())
    args, auxs = train.get_params()
    infer = mx.mod.Module(sym)
    infer.bind(it.provide_data, it.provide_label, for_training=False)
    infer.set_params(args, auxs)
    assert fused_nodes(infer._exec_group.execs[0]) == 3
    np.testing.assert_allclose(infer.predict(it).asnumpy(), train.predict(it).asnumpy(), rtol=1e-5, atol=1e-6)


def test_shapes_flow_back_through_the_residual(unfused):
    """A residual of unknown batch size (a zero state, as recurrent cells begin with) takes
    the output's shape, as it does through the unfused `elemwise_add`."""
    x = mx.sym.Variable("data")
    state = mx.sym.zeros(shape=(0, 6, 9, 8))
    sym = relu(conv(x, "c", no_bias=False) + conv(state, "h", no_bias=False), "r")
    fused, plain = bind_pair(sym, unfused, data=(2, 3, 9, 8))
    assert fused_nodes(fused) == 1
    np.testing.assert_allclose(fused.forward(is_train=False)[0].asnumpy(),
                               plain.forward(is_train=False)[0].asnumpy(), rtol=1e-5, atol=1e-6)
    assert fused.outputs[0].shape == (2, 6, 9, 8)


def test_errors_name_the_layer():
    sym = relu(bn(conv(mx.sym.Variable("data"), "c"), "b"), "r")
    with pytest.raises(mx.MXNetError, match="Convolution|c"):
        sym.simple_bind(mx.cpu(), data=(1, 3, 1, 1), grad_req="null", c_weight=(6, 3, 5, 5))
    ex = sym.simple_bind(mx.cpu(), data=(1, 3, 8, 8), grad_req="null")
    fill(ex)
    with pytest.raises(mx.MXNetError):
        ex.forward(is_train=False, data=mx.nd.ones((1, 3, 9, 9)))
    # The executor still works after the refused call.
    assert np.isfinite(ex.forward(is_train=False, data=mx.nd.ones((1, 3, 8, 8)))[0].asnumpy()).all()

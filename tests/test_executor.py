"""Executors: bind, simple_bind, forward, backward, grad_req, reshape, monitor, errors;
the examples of MXNet's Executor documentation with their printed numbers."""

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError


def test_doc_example_loss_output(ctx):
    net = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(net, name="fc", num_hidden=6)
    net = mx.sym.Activation(net, name="relu", act_type="relu")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    args = {
        "data": mx.nd.ones((1, 4), ctx=ctx),
        "fc_weight": mx.nd.ones((6, 4), ctx=ctx),
        "fc_bias": mx.nd.array((1, 4, 4, 4, 5, 6), ctx=ctx),
        "softmax_label": mx.nd.ones(1, ctx=ctx),
    }
    args_grad = {"fc_weight": mx.nd.zeros((6, 4), ctx=ctx), "fc_bias": mx.nd.zeros(6, ctx=ctx)}
    texec = net.bind(ctx=ctx, args=args, args_grad=args_grad)
    out = texec.forward(is_train=True)[0].copy()
    np.testing.assert_allclose(
        out.asnumpy(),
        [[0.00378404, 0.07600445, 0.07600445, 0.07600445, 0.20660152, 0.5616011]],
        rtol=1e-5,
    )
    texec.backward()
    g = texec.grad_arrays[1].asnumpy()
    col = [0.00378404, -0.92399555, 0.07600445, 0.07600445, 0.20660152, 0.5616011]
    np.testing.assert_allclose(g, np.repeat(np.array(col)[:, None], 4, axis=1), rtol=1e-5)
    assert texec.grad_arrays[0] is None and texec.grad_arrays[3] is None


def test_doc_example_head_gradient(ctx):
    a = mx.sym.Variable("a")
    b = mx.sym.Variable("b")
    c = 2 * a + b
    args = {"a": mx.nd.array([1, 2], ctx=ctx), "b": mx.nd.array([2, 3], ctx=ctx)}
    args_grad = {"a": mx.nd.zeros(2, ctx=ctx), "b": mx.nd.zeros(2, ctx=ctx)}
    texec = c.bind(ctx=ctx, args=args, args_grad=args_grad)
    out = texec.forward(is_train=True)[0].copy()
    np.testing.assert_array_equal(out.asnumpy(), [4.0, 7.0])
    texec.backward(out)
    np.testing.assert_array_equal(texec.grad_arrays[0].asnumpy(), [8.0, 14.0])
    np.testing.assert_array_equal(texec.grad_arrays[1].asnumpy(), [4.0, 7.0])
    with pytest.raises(MXNetError, match="head gradient"):
        texec.backward()


def test_doc_example_debug_str(ctx):
    a = mx.sym.Variable("a")
    b = mx.sym.sin(a)
    c = 2 * a + b
    texec = c.bind(ctx, {"a": mx.nd.array([1, 2], ctx=ctx), "b": mx.nd.array([2, 3], ctx=ctx)})
    s = texec.debug_str()
    assert "Op:_mul_scalar" in s and "Op:sin" in s and "Op:elemwise_add" in s
    assert "Total 0 MB allocated" in s
    np.testing.assert_allclose(texec.forward()[0].asnumpy(), 2 * np.array([1, 2]) +
                               np.sin([1, 2]), rtol=1e-6)


def test_forward_kwargs_and_dicts(ctx):
    x = mx.sym.Variable("x")
    y = mx.sym.Variable("y")
    z = x * y + x
    ex = z.simple_bind(ctx, x=(2, 3), y=(2, 3))
    assert set(ex.arg_dict) == {"x", "y"}
    assert list(ex.output_dict) == z.list_outputs()
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = ex.forward(x=mx.nd.array(xv, ctx=ctx), y=np.full((2, 3), 2.0, np.float32))
    np.testing.assert_array_equal(out[0].asnumpy(), xv * 3)
    assert out[0] is ex.outputs[0]
    with pytest.raises(TypeError):
        ex.forward(nope=mx.nd.ones((2, 3), ctx=ctx))
    with pytest.raises(ValueError):
        ex.forward(x=mx.nd.ones((3, 3), ctx=ctx))


def test_grad_req_add_and_null(ctx):
    x = mx.sym.Variable("x")
    w = mx.sym.Variable("w")
    y = x * 3 + w
    ex = y.bind(ctx, {"x": mx.nd.ones(2, ctx=ctx), "w": mx.nd.ones(2, ctx=ctx)},
                args_grad={"x": mx.nd.ones(2, ctx=ctx), "w": mx.nd.zeros(2, ctx=ctx)},
                grad_req={"x": "add", "w": "null"})
    ex.forward(is_train=True)
    ex.backward(mx.nd.ones(2, ctx=ctx))
    ex.backward(mx.nd.ones(2, ctx=ctx))
    np.testing.assert_array_equal(ex.grad_dict["x"].asnumpy(), [7.0, 7.0])
    assert ex.grad_dict["w"] is None


def test_mlp_matches_numpy_gradients(ctx):
    rng = np.random.RandomState(0)
    data = mx.sym.Variable("data")
    h = mx.sym.FullyConnected(data, num_hidden=5, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh")
    out = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(h, num_hidden=1, name="fc2"),
                                        name="lro")
    ex = out.simple_bind(ctx, data=(4, 3))
    vals = {k: rng.uniform(-1, 1, v.shape).astype(np.float32) for k, v in ex.arg_dict.items()}
    for k, v in vals.items():
        ex.arg_dict[k][:] = v
    ex.forward(is_train=True)
    ex.backward()
    x, w1, b1, w2, b2 = (vals[k] for k in ["data", "fc1_weight", "fc1_bias", "fc2_weight",
                                          "fc2_bias"])
    label = vals["lro_label"].reshape(4, 1)
    a = np.tanh(x @ w1.T + b1)
    pred = a @ w2.T + b2
    d = pred - label
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), pred, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.grad_dict["fc2_weight"].asnumpy(), d.T @ a, rtol=1e-4,
                               atol=1e-6)
    da = (d @ w2) * (1 - a * a)
    np.testing.assert_allclose(ex.grad_dict["fc1_weight"].asnumpy(), da.T @ x, rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(ex.grad_dict["data"].asnumpy(), da @ w1, rtol=1e-4, atol=1e-6)


def test_reshape_shares_memory(ctx):
    a = mx.sym.Variable("a")
    b = mx.sym.Variable("b")
    c = 2 * a + b
    texec = c.bind(ctx, {"a": mx.nd.zeros((2, 1), ctx=ctx), "b": mx.nd.ones((2, 1), ctx=ctx)})
    bigger = texec.reshape(allow_up_sizing=True, a=(4, 2), b=(4, 2))
    assert bigger.arg_dict["a"].shape == (4, 2) and bigger.outputs[0].shape == (4, 2)
    with pytest.raises(MXNetError, match="allow_up_sizing"):
        texec.reshape(a=(4, 2), b=(4, 2))
    small = texec.reshape(a=(1, 1), b=(1, 1))
    assert small.outputs[0].shape == (1, 1)
    small.arg_dict["a"][:] = 5
    # The smaller executor's argument is a view of the original one.
    assert texec.arg_dict["a"].asnumpy()[0, 0] == 5
    np.testing.assert_array_equal(small.forward()[0].asnumpy(), [[11.0]])


def test_copy_params_from(ctx):
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    ex = net.simple_bind(ctx, data=(1, 3), grad_req="null")
    ex.copy_params_from({"fc_weight": mx.nd.ones((2, 3), ctx=ctx), "fc_bias": mx.nd.array([1, 2], ctx=ctx)})
    np.testing.assert_array_equal(ex.arg_dict["fc_bias"].asnumpy(), [1, 2])
    with pytest.raises(ValueError):
        ex.copy_params_from({"other": mx.nd.ones(1, ctx=ctx)})
    ex.copy_params_from({"other": mx.nd.ones(1, ctx=ctx)}, allow_extra_params=True)
    ex.forward(data=mx.nd.ones((1, 3), ctx=ctx))
    np.testing.assert_array_equal(ex.outputs[0].asnumpy(), [[4.0, 5.0]])


def test_monitor_callback(ctx):
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    net = mx.sym.relu(net, name="r")
    ex = net.simple_bind(ctx, data=(1, 3))
    seen = []
    ex.set_monitor_callback(lambda name, arr: seen.append((name, arr.shape)))
    ex.forward()
    assert seen == [("fc_output", (1, 2)), ("r_output", (1, 2))]
    seen.clear()
    ex.set_monitor_callback(lambda name, arr: seen.append(name), monitor_all=True)
    ex.forward()
    assert seen[:7] == ["data", "fc_data", "fc_weight", "fc_weight", "fc_bias", "fc_bias",
                        "fc_output"]

    mon = mx.monitor.Monitor(1, pattern=".*output")
    mon.install(ex)
    mon.tic()
    ex.forward()
    stats = mon.toc()
    assert [name for _, name, _ in stats] == ["fc_output", "r_output"]


def test_bind_errors_leave_things_usable(ctx):
    net = mx.sym.FullyConnected(mx.sym.Variable("d"), num_hidden=3, name="fc")
    with pytest.raises(MXNetError, match="fc_weight"):
        net.bind(ctx, {"d": mx.nd.ones((2, 4), ctx=ctx)})
    with pytest.raises(MXNetError, match="d"):
        net.simple_bind(ctx)
    with pytest.raises(MXNetError, match="fc"):
        net.bind(ctx, {"d": mx.nd.ones((2, 4), ctx=ctx), "fc_weight": mx.nd.ones((3, 5), ctx=ctx),
                            "fc_bias": mx.nd.ones(3, ctx=ctx)})
    with pytest.raises(MXNetError, match="grad_req"):
        net.simple_bind(ctx, d=(2, 4), grad_req="sometimes")
    ex = net.simple_bind(ctx, d=(2, 4))
    # As in MXNet, backward may run before any forward; it reads zeros for the forward.
    ex.backward(mx.nd.ones((2, 3), ctx=ctx))
    np.testing.assert_array_equal(ex.grad_dict["fc_weight"].asnumpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(ex.grad_dict["fc_bias"].asnumpy(), [2, 2, 2])
    ex.forward(is_train=True)
    with pytest.raises(MXNetError, match="shape"):
        ex.backward(mx.nd.ones((5, 3), ctx=ctx))
    ex.backward(mx.nd.ones((2, 3), ctx=ctx))
    np.testing.assert_array_equal(ex.grad_dict["fc_bias"].asnumpy(), [2, 2, 2])


def test_group2ctx_places_nodes_on_contexts():
    with mx.AttrScope(ctx_group="dev1"):
        a = mx.sym.Variable("a")
        b = a * 2
    with mx.AttrScope(ctx_group="dev2"):
        c = b + 1
    ex = c.simple_bind(mx.cpu(0), group2ctx={"dev1": mx.cpu(1), "dev2": mx.cpu(2)}, a=(3,))
    assert ex.arg_dict["a"].context == mx.cpu(1)
    assert ex.outputs[0].context == mx.cpu(2)
    ex.arg_dict["a"][:] = 1
    ex.forward(is_train=True)
    np.testing.assert_array_equal(ex.outputs[0].asnumpy(), [3, 3, 3])
    ex.backward(mx.nd.ones(3, ctx=mx.cpu(2)))
    np.testing.assert_array_equal(ex.grad_dict["a"].asnumpy(), [2, 2, 2])


def test_shared_exec_reuses_blocks(ctx):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=64, name="fc1")
    net = mx.sym.relu(net)
    net = mx.sym.FullyConnected(net, num_hidden=8, name="fc2")
    big = net.simple_bind(ctx, data=(32, 16))
    small = net.simple_bind(ctx, data=(8, 16), shared_exec=big,
                            shared_arg_names=["fc1_weight", "fc1_bias", "fc2_weight",
                                              "fc2_bias"])
    assert small.arg_dict["fc1_weight"] is big.arg_dict["fc1_weight"]
    small.arg_dict["data"][:] = 1
    small.forward()
    assert small.outputs[0].shape == (8, 8)


def test_errors_in_async_ops_surface_at_wait(ctx):
    x = mx.sym.Variable("x")
    idx = mx.sym.Variable("i")
    y = mx.sym.take(x, idx, mode="raise")
    ex = y.bind(ctx, {"x": mx.nd.ones((3, 2), ctx=ctx), "i": mx.nd.array([7], ctx=ctx)}, grad_req="null")
    ex.forward()
    with pytest.raises(MXNetError):
        ex.outputs[0].asnumpy()
    ex.arg_dict["i"][:] = 1
    ex.forward()
    np.testing.assert_array_equal(ex.outputs[0].asnumpy(), [[1, 1]])


def test_sum_gradients_pass_through(ctx):
    a = mx.sym.Variable("a")
    b = mx.sym.Variable("b")
    # The backward of a sum is its output gradient: used directly, copied per argument.
    y = a + b
    ex = y.bind(ctx, {"a": mx.nd.ones(3, ctx=ctx), "b": mx.nd.ones(3, ctx=ctx)},
                args_grad={"a": mx.nd.ones(3, ctx=ctx), "b": mx.nd.zeros(3, ctx=ctx)},
                grad_req={"a": "add", "b": "write"})
    ex.forward(is_train=True)
    ex.backward(mx.nd.array([1, 2, 3], ctx=ctx))
    ex.backward(mx.nd.array([1, 2, 3], ctx=ctx))
    np.testing.assert_array_equal(ex.grad_dict["a"].asnumpy(), [3, 5, 7])
    np.testing.assert_array_equal(ex.grad_dict["b"].asnumpy(), [1, 2, 3])
    # A residual connection: the sum's gradient feeds a layer and the shortcut.
    x = mx.sym.Variable("x")
    w = mx.sym.Variable("w")
    z = mx.sym.add_n(mx.sym.dot(x, w), x, x * 2)
    xv = np.array([[1.0, 2.0]], np.float32)
    wv = np.array([[1.0, 0.5], [-1.0, 2.0]], np.float32)
    ex = z.bind(ctx, {"x": mx.nd.array(xv, ctx=ctx), "w": mx.nd.array(wv, ctx=ctx)},
                args_grad={"x": mx.nd.zeros((1, 2), ctx=ctx), "w": mx.nd.zeros((2, 2), ctx=ctx)})
    ex.forward(is_train=True)
    g = np.array([[1.0, -1.0]], np.float32)
    ex.backward(mx.nd.array(g, ctx=ctx))
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), g @ wv.T + 3 * g)
    np.testing.assert_allclose(ex.grad_dict["w"].asnumpy(), xv.T @ g)
    assert "_backward_add_n" not in ex.debug_str()

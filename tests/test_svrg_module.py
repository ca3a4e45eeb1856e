"""``mx.contrib.svrg_optimization.SVRGModule``: full gradients at the snapshot, the
corrected step ``g(w) - g(snapshot) + full gradient``, training with ``fit`` on one and
two devices, and bad arguments."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from rsmx.contrib.svrg_optimization import SVRGModule


def regression(n: int = 40, batch: int = 10, seed: int = 0):
    rng = np.random.RandomState(seed)
    x = rng.uniform(-1, 1, (n, 2)).astype("float32")
    y = x.dot(np.array([1.5, -2.0], dtype="float32")) + 0.5
    it = mx.io.NDArrayIter(x, y, batch_size=batch, label_name="lin_reg_label")
    net = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=1, name="fc1"),
                                        label=mx.sym.var("lin_reg_label"), name="lro")
    return x, y, it, net


def make(net, it, context=None, update_freq=2, lr=0.1, kvstore="local"):
    mod = SVRGModule(net, data_names=["data"], label_names=["lin_reg_label"], update_freq=update_freq,
                     context=context)
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(initializer=mx.init.Constant(0.3))
    mod.init_optimizer(kvstore=kvstore, optimizer="sgd", optimizer_params={"learning_rate": lr})
    return mod


def grads(x, y, w, b):
    """Summed gradients of the linear regression loss ``(xw + b - y)^2 / 2`` over a batch."""
    r = x.dot(w) + b - y
    return r.dot(x), r.sum()


def test_full_gradients_are_the_average_batch_gradient_at_the_snapshot():
    x, y, it, net = regression()
    mod = make(net, it)
    mod.update_full_grads(it)
    w, b = np.full(2, 0.3, dtype="float32"), np.float32(0.0)  # a bias starts at 0
    per_batch = [grads(x[i:i + 10], y[i:i + 10], w, b) for i in range(0, 40, 10)]
    np.testing.assert_allclose(mod._param_dict[0]["fc1_weight"].asnumpy()[0],
                               np.mean([g[0] for g in per_batch], axis=0), rtol=1e-5)
    np.testing.assert_allclose(mod._param_dict[0]["fc1_bias"].asnumpy(), [np.mean([g[1] for g in per_batch])],
                               rtol=1e-5)


def test_a_step_applies_the_corrected_gradient():
    x, y, it, net = regression()
    mod = make(net, it)
    snap_w, snap_b = np.full(2, 0.3, dtype="float32"), np.float32(0.0)
    mod.update_full_grads(it)
    full_w = mod._param_dict[0]["fc1_weight"].asnumpy()[0]
    full_b = mod._param_dict[0]["fc1_bias"].asnumpy()[0]
    it.reset()
    w, b = snap_w.copy(), snap_b
    for k, batch in enumerate(it):
        mod.forward_backward(batch)
        mod.update()
        xb, yb = x[k * 10:(k + 1) * 10], y[k * 10:(k + 1) * 10]
        gw, gb = grads(xb, yb, w, b)
        sw, sb = grads(xb, yb, snap_w, snap_b)
        w = w - 0.1 / 10 * (gw - sw + full_w)
        b = b - 0.1 / 10 * (gb - sb + full_b)
        arg, _ = mod.get_params()
        np.testing.assert_allclose(arg["fc1_weight"].asnumpy()[0], w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(arg["fc1_bias"].asnumpy()[0], b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("context", [None, [mx.cpu(0), mx.cpu(1)]], ids=["one-device", "two-devices"])
def test_fit_learns_a_regression(context):
    x, y, it, net = regression(n=200, batch=20)
    mod = SVRGModule(net, data_names=["data"], label_names=["lin_reg_label"], update_freq=2, context=context)
    mod.fit(it, eval_metric="mse", optimizer="sgd", optimizer_params={"learning_rate": 0.2}, num_epoch=12,
            initializer=mx.init.Zero(), kvstore="device" if context else "local")
    arg, _ = mod.get_params()
    np.testing.assert_allclose(arg["fc1_weight"].asnumpy()[0], [1.5, -2.0], atol=0.05)
    np.testing.assert_allclose(arg["fc1_bias"].asnumpy(), [0.5], atol=0.05)


def test_two_devices_share_the_full_gradients_through_the_kvstore():
    x, y, it, net = regression()
    mod = make(net, it, context=[mx.cpu(0), mx.cpu(1)], kvstore="device")
    assert mod._ctx_len == 2 and len(mod._param_dict) == 2
    mod.update_full_grads(it)
    one = make(net, it)
    one.update_full_grads(it)
    # Each device saw half of every batch; the KVStore sums them and each keeps half.
    total = one._param_dict[0]["fc1_weight"].asnumpy()
    for c in range(2):
        np.testing.assert_allclose(mod._param_dict[c]["fc1_weight"].asnumpy(), total / 2, rtol=1e-5)


def test_update_freq_must_be_a_positive_int():
    _, _, _, net = regression()
    with pytest.raises(TypeError, match="update_freq"):
        SVRGModule(net, label_names=["lin_reg_label"], update_freq=None)
    with pytest.raises(ValueError, match="positive"):
        SVRGModule(net, label_names=["lin_reg_label"], update_freq=0)

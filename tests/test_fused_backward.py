"""Bind-time fusion in executors bound with gradients on the CPU: a ReLU's backward whose
gradient only a BatchNorm's backward reads is computed inside it
(`_backward_rsmx_bn_relu`). Fused executors compute bit for bit what the graph bound with
fusion turned off computes: outputs, moving statistics and every gradient."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx

FUSED = "_backward_rsmx_bn_relu"


@pytest.fixture
def unfused(monkeypatch):
    """Binds in the `with` block see fusion turned off (`RSMX_FUSE=0`)."""

    class Off:
        def __enter__(self):
            monkeypatch.setenv("RSMX_FUSE", "0")

        def __exit__(self, *exc):
            monkeypatch.delenv("RSMX_FUSE")

    return Off()


def conv(x, name, filters=6, kernel=3, stride=1):
    return mx.sym.Convolution(
        x, name=name, num_filter=filters, kernel=(kernel, kernel), stride=(stride, stride),
        pad=(kernel // 2, kernel // 2), no_bias=True,
    )


def bn(x, name, **kw):
    return mx.sym.BatchNorm(x, name=name, fix_gamma=False, **kw)


def relu(x, name):
    return mx.sym.Activation(x, name=name, act_type="relu")


def loss(y):
    return mx.sym.MakeLoss(mx.sym.sum(y * y), name="loss")


def resnet_block():
    """A basic block: its inner ReLU fuses; the one after the residual add does not (its
    gradient goes to both branches)."""
    x = mx.sym.Variable("data")
    y = relu(bn(conv(x, "c1"), "bn1"), "r1")
    y = bn(conv(y, "c2"), "bn2")
    sc = bn(conv(x, "csc", kernel=1), "bnsc")
    return loss(relu(y + sc, "out"))


def stem():
    x = mx.sym.Variable("data")
    return loss(conv(relu(bn(conv(x, "c1"), "bn1", axis=1), "r1"), "c2"))


def dense():
    """BatchNorm over the features of a fully connected layer: one element per block."""
    x = mx.sym.Variable("data")
    h = relu(bn(mx.sym.FullyConnected(x, num_hidden=5, name="fc1"), "bn1"), "r1")
    return loss(mx.sym.FullyConnected(h, num_hidden=3, name="fc2"))


def read_twice():
    """The BatchNorm's output is read by the ReLU and the sum: the ReLU's gradient is
    summed with another before the BatchNorm's backward reads it."""
    x = mx.sym.Variable("data")
    b = bn(conv(x, "c1"), "bn1")
    return loss(relu(b, "r1") + b)


def unary_relu():
    """`relu` (not `Activation`) is not fused."""
    x = mx.sym.Variable("data")
    return loss(conv(mx.sym.relu(bn(conv(x, "c1"), "bn1")), "c2"))


CASES = {
    "resnet_block": (resnet_block, (4, 3, 9, 9), 1),
    "stem": (stem, (2, 3, 8, 8), 1),
    "dense": (dense, (6, 4), 1),
    "read_twice": (read_twice, (2, 3, 6, 6), 0),
    "unary_relu": (unary_relu, (2, 3, 6, 6), 0),
}


def fill(ex, seed=0, nan=False):
    rng = np.random.RandomState(seed)
    for k, v in ex.arg_dict.items():
        v[:] = rng.uniform(0.5, 1.5, v.shape) if k.endswith("gamma") else rng.uniform(-1, 1, v.shape)
    for k, v in ex.aux_dict.items():
        v[:] = 1.0 if k.endswith("var") else 0.0
    if nan:
        d = ex.arg_dict["data"].asnumpy()
        d.flat[3] = np.nan
        ex.arg_dict["data"][:] = d


def bind_pair(sym, shape, unfused, dtype="float32", grad_req="write"):
    fused = sym.simple_bind(mx.cpu(), grad_req=grad_req, type_dict={"data": dtype}, data=shape)
    with unfused:
        plain = sym.simple_bind(mx.cpu(), grad_req=grad_req, type_dict={"data": dtype}, data=shape)
    return fused, plain


def state(ex):
    arrays = {f"out{i}": o for i, o in enumerate(ex.outputs)}
    arrays.update({f"grad:{k}": v for k, v in ex.grad_dict.items() if v is not None})
    arrays.update({f"aux:{k}": v for k, v in ex.aux_dict.items()})
    return {k: v.asnumpy() for k, v in arrays.items()}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_training_step_matches_the_unfused_graph(case, dtype, unfused):
    make, shape, count = CASES[case]
    fused, plain = bind_pair(make(), shape, unfused, dtype)
    assert fused.debug_str().count(FUSED) == count
    assert plain.debug_str().count(FUSED) == 0
    for ex in (fused, plain):
        fill(ex)
        for _ in range(2):
            ex.forward(is_train=True)
            ex.backward()
    a, b = state(fused), state(plain)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k, strict=True)


def test_accumulated_gradients_and_nan_match(unfused):
    fused, plain = bind_pair(resnet_block(), (4, 3, 9, 9), unfused, grad_req="add")
    for ex in (fused, plain):
        fill(ex, seed=3, nan=True)
        for v in ex.grad_dict.values():
            v[:] = 0.5
        for _ in range(2):
            ex.forward(is_train=True)
            ex.backward()
    a, b = state(fused), state(plain)
    assert np.isnan(a["grad:c1_weight"]).any()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_gradients_match_numeric_ones():
    sym = stem()
    ex = sym.simple_bind(mx.cpu(), grad_req="write", type_dict={"data": "float64"}, data=(2, 3, 5, 5))
    assert ex.debug_str().count(FUSED) == 1
    fill(ex, seed=1)
    ex.forward(is_train=True)
    ex.backward()
    gamma = ex.arg_dict["bn1_gamma"]
    analytic = ex.grad_dict["bn1_gamma"].asnumpy()
    base = gamma.asnumpy()
    eps = 1e-6
    for c in range(base.size):
        vals = []
        for d in (eps, -eps):
            g = base.copy()
            g[c] += d
            gamma[:] = g
            vals.append(float(ex.forward(is_train=True)[0].asnumpy().sum()))
        np.testing.assert_allclose(analytic[c], (vals[0] - vals[1]) / (2 * eps), rtol=1e-5, atol=1e-6)
        gamma[:] = base


def test_inference_binds_are_not_fused_and_a_data_gradient_alone_is():
    ex = stem().simple_bind(mx.cpu(), grad_req="null", data=(2, 3, 8, 8))
    assert FUSED not in ex.debug_str()
    only_data = stem().simple_bind(
        mx.cpu(), grad_req={"data": "write", "c1_weight": "null", "c2_weight": "null",
                            "bn1_gamma": "null", "bn1_beta": "null"}, data=(2, 3, 8, 8))
    assert only_data.debug_str().count(FUSED) == 1


def test_module_training_is_fused_and_learns():
    x = mx.sym.Variable("data")
    h = relu(bn(conv(x, "c1", filters=4), "bn1"), "r1")
    h = mx.sym.FullyConnected(mx.sym.Flatten(h), num_hidden=2, name="fc")
    net = mx.sym.SoftmaxOutput(h, name="softmax")
    rng = np.random.RandomState(0)
    data = rng.uniform(-1, 1, (32, 1, 6, 6)).astype(np.float32)
    label = (data.reshape(32, -1).mean(axis=1) > 0).astype(np.float32)
    it = mx.io.NDArrayIter(data, label, batch_size=8)
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.fit(it, num_epoch=15, optimizer_params={"learning_rate": 0.1})
    assert FUSED in mod._exec_group.execs[0].debug_str()
    assert mod.score(it, "acc")[0][1] >= 0.9

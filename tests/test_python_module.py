"""mx.mod.PythonModule and PythonLossModule, alone and as the last stage of a
SequentialModule."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx


def _data(n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    w = rng.normal(size=(8,))
    return x, (x @ w > 0).astype(np.float32)


def _softmax_grad(scores, labels) -> np.ndarray:
    s = scores.asnumpy()
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(p)), labels.asnumpy().astype(int)] -= 1
    return p


def test_a_python_loss_trains_the_module_before_it() -> None:
    x, y = _data()
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16)
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=2, name="fc2")
    seq = mx.mod.SequentialModule()
    seq.add(mx.mod.Module(net, label_names=None))
    seq.add(
        mx.mod.PythonLossModule(data_names=["fc2_output"], grad_func=_softmax_grad),
        take_labels=True,
        auto_wiring=True,
    )
    seq.fit(
        mx.io.NDArrayIter(x, y, 40, shuffle=True),
        num_epoch=8,
        optimizer_params={"learning_rate": 0.5},
        initializer=mx.init.Xavier(),
    )
    ((_, acc),) = seq.score(mx.io.NDArrayIter(x, y, 40), "acc")
    assert acc > 0.9


def test_loss_module_passes_scores_through_and_returns_the_gradient() -> None:
    loss = mx.mod.PythonLossModule(grad_func=lambda s, _labels: s.asnumpy() * 2)
    loss.bind([("data", (2, 3))], [("softmax_label", (2,))])
    assert loss.binded and loss.output_shapes == [("pyloss_output", (2, 3))]
    assert loss.get_params() == ({}, {})
    loss.init_params()
    loss.init_optimizer()
    scores = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    batch = mx.io.DataBatch([scores], [mx.nd.array([2, 2])])
    loss.forward(batch, is_train=True)
    assert loss.get_outputs()[0] is scores
    loss.backward()
    np.testing.assert_allclose(loss.get_input_grads()[0].asnumpy(), scores.asnumpy() * 2)
    metric = mx.metric.create("acc")
    loss.update_metric(metric, batch.label)
    assert metric.get()[1] == 1.0


def test_python_module_checks_its_bindings() -> None:
    loss = mx.mod.PythonLossModule()
    with pytest.raises(mx.MXNetError, match="data names"):
        loss.bind([("other", (2, 3))], [("softmax_label", (2,))])
    with pytest.raises(mx.MXNetError, match="write gradient"):
        loss.bind([("data", (2, 3))], [("softmax_label", (2,))], grad_req="add")
    with pytest.raises(mx.MXNetError, match="exactly one"):
        mx.mod.PythonLossModule(data_names=("a", "b"))
    loss.bind([("data", (2, 3))], [("softmax_label", (2,))], for_training=False)
    with pytest.raises(mx.MXNetError, match="out_grads"):
        loss.backward([mx.nd.ones((2, 3))])
    with pytest.raises(mx.MXNetError, match="not bound for training"):
        loss.backward()
    with pytest.raises(NotImplementedError):
        mx.mod.PythonModule(["data"], None, ["out"]).bind([("data", (1,))])

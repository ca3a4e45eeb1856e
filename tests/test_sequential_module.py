"""mx.mod.SequentialModule: a chain of modules trains exactly as the one network it
splits."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import rsmx as mx


def _parts():
    data = mx.sym.Variable("data")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=16, name="fc1"), act_type="relu", name="relu1")
    head_in = mx.sym.Variable("hidden")
    head = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(head_in, num_hidden=3, name="fc2"), name="softmax")
    whole = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(hidden, num_hidden=3, name="fc2"), name="softmax")
    return hidden, head, whole


def _data(n=64):
    rng = np.random.RandomState(0)
    x = rng.randn(n, 5).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32) + (x[:, 1] > 1).astype(np.float32)
    return mx.io.NDArrayIter(x, y, batch_size=16, label_name="softmax_label")


def _chain():
    hidden, head, _ = _parts()
    seq = mx.mod.SequentialModule()
    seq.add(mx.mod.Module(hidden, label_names=None)).add(
        mx.mod.Module(head, data_names=["hidden"]), take_labels=True, auto_wiring=True
    )
    return seq


def test_chain_matches_the_whole_network_step_for_step():
    it = _data()
    seq, whole = _chain(), mx.mod.Module(_parts()[2])
    for mod in (seq, whole):
        mod.bind(it.provide_data, it.provide_label)
    whole.init_params(mx.init.Xavier())
    arg, aux = whole.get_params()
    seq.init_params(arg_params=arg, aux_params=aux)
    for mod in (seq, whole):
        mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    it.reset()
    for batch in it:
        for mod in (seq, whole):
            mod.forward(batch, is_train=True)
            mod.backward()
            mod.update()
        np.testing.assert_allclose(seq.get_outputs()[0].asnumpy(), whole.get_outputs()[0].asnumpy(), rtol=1e-5, atol=1e-6)
    got, want = seq.get_params()[0], whole.get_params()[0]
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name].asnumpy(), want[name].asnumpy(), rtol=1e-5, atol=1e-6)
    assert seq.label_shapes == it.provide_label and seq.output_shapes == whole.output_shapes


def test_chain_fits_and_scores():
    it = _data(192)
    seq = _chain()
    seq.fit(it, num_epoch=12, optimizer_params={"learning_rate": 0.2}, initializer=mx.init.Xavier())
    assert seq.score(it, "acc")[0][1] > 0.8
    assert seq.predict(it).shape == (192, 3)


def test_input_gradients_and_bad_use(caplog):
    seq = _chain()
    with pytest.raises(mx.MXNetError, match="unknown meta"):
        seq.add(mx.mod.Module(_parts()[0], label_names=None), take_label=True)
    with pytest.raises(mx.MXNetError, match="empty"):
        mx.mod.SequentialModule().bind([("data", (2, 5))])
    it = _data()
    seq.bind(it.provide_data, it.provide_label, inputs_need_grad=True)
    seq.init_params()
    batch = next(iter(it))
    seq.forward(batch, is_train=True)
    seq.backward()
    assert seq.get_input_grads()[0].shape == (16, 5)
    with caplog.at_level(logging.WARNING):
        seq.bind(it.provide_data, it.provide_label)
    assert "Already bound" in caplog.text
    hidden, head, _ = _parts()
    dup = mx.mod.SequentialModule().add(mx.mod.Module(hidden, label_names=None))
    dup.add(mx.mod.Module(hidden, label_names=None, data_names=["data"]), auto_wiring=True)
    dup.bind([("data", (2, 5))], for_training=False)
    with pytest.raises(mx.MXNetError, match="duplicated parameter name 'fc1_weight'"):
        dup.init_params()

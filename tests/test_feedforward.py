"""mx.model.FeedForward: fit on numpy arrays and iterators, predict, score, checkpoints."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import rsmx as mx


def _data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    w = rng.normal(size=(8,))
    return x, (x @ w > 0).astype(np.float32)


def _net() -> mx.sym.Symbol:
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=2, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _model(**kwargs) -> mx.model.FeedForward:
    kwargs.setdefault("num_epoch", 6)
    kwargs.setdefault("learning_rate", 0.2)
    kwargs.setdefault("numpy_batch_size", 40)
    kwargs.setdefault("initializer", mx.init.Xavier())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return mx.model.FeedForward(_net(), **kwargs)


def test_fit_learns_and_predict_and_score_agree() -> None:
    x, y = _data()
    m = _model()
    epochs: list[int] = []
    m.fit(x[:320], y[:320], eval_data=(x[320:], y[320:]),
          epoch_end_callback=lambda e, sym, arg, aux: epochs.append(e))
    assert epochs == list(range(6))
    probs = m.predict(x[320:])
    assert probs.shape == (80, 2)
    acc = float((probs.argmax(axis=1) == y[320:]).mean())
    assert acc > 0.85
    assert m.score(mx.io.NDArrayIter(x[320:], y[320:], 40)) == pytest.approx(acc)
    out, data, label = m.predict(mx.io.NDArrayIter(x[320:], y[320:], 30), return_data=True)
    # The padding of the last batch is left out.
    assert out.shape == (80, 2) and data.shape == (80, 8)
    np.testing.assert_array_equal(label, y[320:])


def test_epoch_size_counts_batches_across_passes() -> None:
    x, y = _data(120)
    batches: list[tuple[int, int]] = []
    m = _model(num_epoch=2, epoch_size=5)
    m.fit(mx.io.NDArrayIter(x, y, 40), batch_end_callback=lambda p: batches.append((p.epoch, p.nbatch)))
    # Three batches a pass: epoch 0 runs 1..5 (resetting once); epoch 1 goes on counting.
    assert [b for e, b in batches if e == 0] == [1, 2, 3, 4, 5]
    assert len([b for e, b in batches if e == 1]) >= 1


def test_checkpoints_round_trip_and_training_resumes(tmp_path) -> None:
    x, y = _data()
    m = _model(num_epoch=3)
    m.fit(x, y)
    prefix = str(tmp_path / "ff")
    m.save(prefix)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loaded = mx.model.FeedForward.load(prefix, 3, numpy_batch_size=40)
    assert loaded.begin_epoch == 3
    np.testing.assert_allclose(loaded.predict(x), m.predict(x), rtol=1e-6)
    loaded.num_epoch = 4
    loaded.fit(x, y)
    assert loaded.score(mx.io.NDArrayIter(x, y, 40)) > 0.8


def test_given_parameters_are_used_and_extra_ones_dropped_when_allowed() -> None:
    x, y = _data()
    m = _model(num_epoch=2)
    m.fit(x, y)
    params = dict(m.arg_params)
    params["unused_weight"] = mx.nd.ones((3,))
    with pytest.raises(mx.MXNetError):
        _model(arg_params=params).predict(x)
    frozen = _model(arg_params=params, aux_params={}, allow_extra_params=True)
    assert "unused_weight" not in frozen.arg_params
    np.testing.assert_allclose(frozen.predict(x), m.predict(x), rtol=1e-6)


def test_create_trains_a_new_model() -> None:
    x, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        m = mx.model.FeedForward.create(
            _net(), x, y, num_epoch=4, learning_rate=0.2, numpy_batch_size=40,
            initializer=mx.init.Xavier(),
        )
    assert m.score(mx.io.NDArrayIter(x, y, 40)) > 0.8


def test_bad_input_is_reported() -> None:
    x, y = _data(40)
    m = _model()
    with pytest.raises(mx.MXNetError, match="y must be specified"):
        m.fit(x)
    with pytest.raises(mx.MXNetError, match="not equal"):
        m.fit(x, y[:10])
    with pytest.raises(mx.MXNetError, match="DataIter, NDArray or numpy"):
        m.fit([[1.0]], y)
    with pytest.raises(mx.MXNetError, match="Label must be 1D"):
        m.fit(x, np.zeros((40, 2)))
    with pytest.raises(mx.MXNetError, match="Symbol"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mx.model.FeedForward(3)

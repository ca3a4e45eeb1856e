"""mx.callback: log lines against MXNet 1.9.1's for a scripted run, and checkpoints."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import rsmx as mx
import rsmx.callback as cbmod

FIXTURES = Path(__file__).parent / "fixtures" / "training"
REF = json.loads((FIXTURES / "callback.json").read_text())


class _Clock:
    """Advances 0.25 s per call."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        self.t += 0.25
        return self.t


def _script(callbacks: list, metric, n_epochs: int = 2, n_batches: int = 7) -> None:
    """Calls the callbacks as a training loop does, updating the metric before each call."""
    for epoch in range(n_epochs):
        if metric is not None:
            metric.reset()
        for nbatch in range(n_batches):
            if metric is not None:
                label = mx.nd.array([nbatch % 3, 1, 0, 2])
                pred = mx.nd.one_hot(mx.nd.array([1, 1, epoch, nbatch % 4]), 4)
                metric.update([label], [pred])
            param = mx.callback.BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=metric, locals=None)
            for cb in callbacks:
                cb(param)


SETUPS = {
    "speedometer": lambda: ([mx.callback.Speedometer(4, 2)], mx.metric.Accuracy()),
    "speedometer_no_reset": lambda: (
        [mx.callback.Speedometer(4, 3, auto_reset=False)], mx.metric.create(["acc", "mse"])
    ),
    "speedometer_no_metric": lambda: ([mx.callback.Speedometer(8, 2)], None),
    "log_train_metric": lambda: ([mx.callback.log_train_metric(3)], mx.metric.Accuracy()),
    "log_train_metric_reset": lambda: (
        [mx.callback.log_train_metric(2, auto_reset=True)], mx.metric.create(["acc", "ce"])
    ),
    "progress_bar": lambda: ([mx.callback.ProgressBar(7, length=20)], None),
    "validation": lambda: ([mx.callback.LogValidationMetricsCallback()], mx.metric.Accuracy()),
}


@pytest.mark.parametrize("key", sorted(SETUPS))
def test_log_lines_match_mxnet(key: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(cbmod.time, "time", _Clock())
    callbacks, metric = SETUPS[key]()
    with caplog.at_level(logging.INFO):
        _script(callbacks, metric)
    assert [r.getMessage() for r in caplog.records] == REF[key]
    assert all(r.levelno == logging.INFO for r in caplog.records)


def test_speedometer_zero_elapsed_time(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(cbmod.time, "time", lambda: 5.0)
    speedo = mx.callback.Speedometer(2, 1)
    with caplog.at_level(logging.INFO):
        for n in range(2):
            speedo(mx.callback.BatchEndParam(epoch=0, nbatch=n, eval_metric=None, locals=None))
    assert caplog.records[-1].getMessage() == "Iter[0] Batch [1]\tSpeed: inf samples/sec"


def test_validation_callback_skips_missing_metric(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        mx.callback.LogValidationMetricsCallback()(mx.callback.BatchEndParam(3, 0, None, None))
    assert caplog.records == []


def test_batch_end_param() -> None:
    p = mx.callback.BatchEndParam(epoch=1, nbatch=2, eval_metric=None, locals={"a": 1})
    assert type(p).__name__ == "BatchEndParams"
    assert p == (1, 2, None, {"a": 1}) and p.nbatch == 2
    assert mx.model.BatchEndParam is mx.callback.BatchEndParam


def test_do_checkpoint(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    arg = {"fc_weight": mx.nd.array(np.arange(6.0).reshape(3, 2)), "fc_bias": mx.nd.array([1.0, 2.0, 3.0])}
    prefix = str(tmp_path / "net")
    cb = mx.callback.do_checkpoint(prefix, period=2)
    with caplog.at_level(logging.INFO):
        for epoch in range(5):
            cb(epoch, net, arg, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net-0002.params", "net-0004.params", "net-symbol.json"]
    assert f'Saved checkpoint to "{prefix}-0004.params"' in caplog.text
    sym, arg2, aux2 = mx.model.load_checkpoint(prefix, 4)
    assert sym.list_arguments() == net.list_arguments() and aux2 == {}
    for k, v in arg.items():
        np.testing.assert_array_equal(arg2[k].asnumpy(), v.asnumpy())
    every = mx.callback.do_checkpoint(str(tmp_path / "every"), period=0)
    every(0, net, arg, {})
    assert (tmp_path / "every-0001.params").exists()


def test_module_checkpoint() -> None:
    class FakeModule:
        def __init__(self) -> None:
            self.saved: list = []

        def save_checkpoint(self, prefix: str, epoch: int, save_optimizer_states: bool) -> None:
            self.saved.append((prefix, epoch, save_optimizer_states))

    mod = FakeModule()
    cb = mx.callback.module_checkpoint(mod, "pre", period=3, save_optimizer_states=True)
    for epoch in range(7):
        cb(epoch)
    assert mod.saved == [("pre", 3, True), ("pre", 6, True)]

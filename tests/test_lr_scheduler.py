"""Learning-rate schedulers: values and log messages against MXNet 1.9.1's (fixtures made
by tests/fixtures/optimizer/make_fixtures.py), argument checks, and the JSON the core
parses."""

from __future__ import annotations

import json
import logging
import pathlib
import pickle
import sys

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "optimizer"
sys.path.insert(0, str(FIXTURES))

import cases  # noqa: E402

EXPECTED = np.load(FIXTURES / "schedulers.npz")


@pytest.mark.parametrize("case", cases.SCHED_CASES, ids=[c["id"] for c in cases.SCHED_CASES])
def test_values_and_log_match_mxnet(case):
    values, log = cases.run_scheduler(mx, case)
    np.testing.assert_array_equal(values, EXPECTED[f"{case['id']}/values"])
    assert log == list(EXPECTED[f"{case['id']}/log"])


def test_caplog_sees_factor_messages(caplog):
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    with caplog.at_level(logging.INFO):
        assert sched(3) == 0.5
    assert caplog.messages == ["Update[3]: Change learning rate to 5.00000e-01"]


def test_factor_mutates_base_lr_and_count():
    sched = mx.lr_scheduler.FactorScheduler(step=10, factor=0.5, base_lr=0.8)
    assert sched(25) == pytest.approx(0.2)
    assert sched.base_lr == pytest.approx(0.2)
    assert sched.count == 20
    # Going back does not undo the schedule (MXNet's schedulers only move forward).
    assert sched(1) == pytest.approx(0.2)


def test_warmup_linear_and_constant():
    lin = mx.lr_scheduler.PolyScheduler(
        max_update=20, base_lr=1.0, warmup_steps=4, warmup_begin_lr=0.2
    )
    assert [lin(n) for n in range(4)] == [0.2, 0.2 + 0.8 * 1 / 4, 0.2 + 0.8 * 2 / 4, 0.2 + 0.8 * 3 / 4]
    const = mx.lr_scheduler.CosineScheduler(
        max_update=20, base_lr=1.0, warmup_steps=3, warmup_begin_lr=0.1, warmup_mode="constant"
    )
    assert [const(n) for n in range(3)] == [0.1, 0.1, 0.1]
    assert const(3) == 1.0
    assert lin.warmup_final_lr == 1.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: mx.lr_scheduler.FactorScheduler(step=0),
        lambda: mx.lr_scheduler.FactorScheduler(step=2, factor=1.5),
        lambda: mx.lr_scheduler.MultiFactorScheduler(step=[3, 3]),
        lambda: mx.lr_scheduler.MultiFactorScheduler(step=[0, 2]),
        lambda: mx.lr_scheduler.MultiFactorScheduler(step=[2], factor=2.0),
        lambda: mx.lr_scheduler.PolyScheduler(max_update=0),
        lambda: mx.lr_scheduler.CosineScheduler(max_update=0),
        lambda: mx.lr_scheduler.LRScheduler(base_lr=0.1, warmup_begin_lr=0.5),
        lambda: mx.lr_scheduler.LRScheduler(warmup_steps=-1),
        lambda: mx.lr_scheduler.LRScheduler(warmup_mode="cubic"),
    ],
)
def test_bad_arguments_raise_value_error(make):
    with pytest.raises(ValueError) as info:
        make()
    assert isinstance(info.value, MXNetError)


def test_base_class_must_be_overridden():
    with pytest.raises(NotImplementedError):
        mx.lr_scheduler.LRScheduler()(1)


def test_fused_config_carries_current_state():
    sched = mx.lr_scheduler.MultiFactorScheduler(step=[2, 5], factor=0.5, base_lr=0.4)
    sched(3)
    cfg = json.loads(sched._fused_config())
    assert cfg["type"] == "MultiFactorScheduler"
    assert cfg["step"] == [2, 5]
    assert cfg["cur_step_ind"] == 1 and cfg["count"] == 2
    assert cfg["base_lr"] == pytest.approx(0.2)
    assert cfg["warmup_mode"] == "linear" and cfg["warmup_steps"] == 0

    poly = mx.lr_scheduler.PolyScheduler(max_update=10, base_lr=0.5, pwr=3, final_lr=0.1)
    poly(4)
    cfg = json.loads(poly._fused_config())
    assert cfg["type"] == "PolyScheduler" and cfg["pwr"] == 3
    assert cfg["base_lr_orig"] == 0.5 and cfg["base_lr"] == pytest.approx(poly(4))

    cos = mx.lr_scheduler.CosineScheduler(max_update=7, base_lr=0.3, warmup_steps=2,
                                          warmup_begin_lr=0.1)
    cfg = json.loads(cos._fused_config())
    assert (cfg["type"], cfg["max_update"], cfg["warmup_steps"]) == ("CosineScheduler", 7, 2)
    assert cfg["warmup_begin_lr"] == 0.1 and cfg["final_lr"] == 0

    fac = mx.lr_scheduler.FactorScheduler(step=3, factor=0.9, stop_factor_lr=1e-4, base_lr=0.2)
    cfg = json.loads(fac._fused_config())
    assert (cfg["type"], cfg["step"], cfg["factor"]) == ("FactorScheduler", 3, 0.9)
    assert cfg["stop_factor_lr"] == 1e-4 and cfg["count"] == 0


def test_user_schedulers_have_no_fused_config():
    class Halving(mx.lr_scheduler.LRScheduler):
        def __call__(self, num_update):
            return self.base_lr / 2 ** num_update

    class MyFactor(mx.lr_scheduler.FactorScheduler):
        pass

    assert Halving()._fused_config() is None
    assert MyFactor(step=2)._fused_config() is None


def test_pickle_keeps_state():
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    sched(5)
    copy = pickle.loads(pickle.dumps(sched))
    assert (copy.base_lr, copy.count) == (sched.base_lr, sched.count)
    assert copy(9) == sched(9)


@pytest.mark.parametrize("kvstore", ["object", "local"])
def test_fit_logs_every_schedule_step_whichever_side_runs_it(kvstore, caplog):
    """MXNet's scheduler logs each step as it makes it; so must rsmx when the core runs
    the schedule (a KVStore object given to fit), and the Python object keeps up."""
    x = np.random.RandomState(0).randn(64, 5).astype(np.float32)
    it = mx.io.NDArrayIter(x, (x[:, 0] > 0).astype(np.float32), batch_size=8)
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc"), name="softmax")
    sched = mx.lr_scheduler.FactorScheduler(step=5, factor=0.5)
    kv = mx.kv.create("local") if kvstore == "object" else "local"
    with caplog.at_level(logging.INFO):
        mx.mod.Module(net).fit(it, num_epoch=2, kvstore=kv, optimizer_params={"learning_rate": 0.1, "lr_scheduler": sched})
    steps = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Update[")]
    # The lines MXNet 1.9.1 logs for this run.
    assert steps == [
        "Update[6]: Change learning rate to 5.00000e-02",
        "Update[11]: Change learning rate to 2.50000e-02",
        "Update[16]: Change learning rate to 1.25000e-02",
    ]
    assert sched.base_lr == pytest.approx(0.0125) and sched.count == 15

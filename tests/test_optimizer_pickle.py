"""Optimizers as they travel to a cluster's servers: pickled under MXNet's names, read
back by an unpickler that builds nothing but optimizers, schedulers and plain data."""

from __future__ import annotations

import pickle

import pytest
import rsmx as mx
from rsmx.base import MXNetValueError
from rsmx.kvstore import optimizer_pickle


def test_optimizers_travel_under_mxnets_names_in_protocol_0():
    sgd = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-4,
                           lr_scheduler=mx.lr_scheduler.FactorScheduler(step=10, factor=0.5))
    data = optimizer_pickle.dumps(sgd)
    assert b"cmxnet.optimizer.optimizer\nSGD\n" in data
    assert b"cmxnet.lr_scheduler\nFactorScheduler\n" in data
    assert b"rsmx" not in data
    assert data.startswith(b"ccopy_reg\n_reconstructor\n")  # protocol 0, as MXNet sends
    back = optimizer_pickle.loads(data)
    assert type(back) is mx.optimizer.SGD
    assert (back.momentum, back.wd, back.lr) == (0.9, 1e-4, 0.1)
    assert type(back.lr_scheduler) is mx.lr_scheduler.FactorScheduler
    assert back.lr_scheduler.step == 10


def test_rsmx_names_are_read_too():
    adam = mx.optimizer.Adam(learning_rate=0.01)
    back = optimizer_pickle.loads(pickle.dumps(adam, 0))
    assert type(back) is mx.optimizer.Adam and back.lr == 0.01


def test_an_optimizer_pickled_by_mxnet_gets_rsmxs_missing_attributes():
    sgd = mx.optimizer.SGD(learning_rate=0.2)
    del sgd.__dict__["allow_np_array"]  # as if MXNet's class had no such attribute
    back = optimizer_pickle.loads(optimizer_pickle.dumps(sgd))
    assert back.allow_np_array is False and back.lr == 0.2


@pytest.mark.parametrize(
    "data, words",
    [
        (b"cos\nsystem\n(S'echo pwned'\ntR.", "os.system"),
        (pickle.dumps({"lr": 0.1}, 0), "not an optimizer"),
        (pickle.dumps(mx.lr_scheduler.FactorScheduler(step=2), 0), "not an optimizer"),
        (b"not a pickle", "cannot be read"),
        (b"cbuiltins\neval\n(S'1'\ntR.", "builtins.eval"),
    ],
)
def test_anything_else_is_refused(data, words):
    with pytest.raises(MXNetValueError, match=words):
        optimizer_pickle.loads(data)


def test_only_optimizers_are_sent():
    with pytest.raises(MXNetValueError, match="expected an rsmx.optimizer.Optimizer"):
        optimizer_pickle.dumps("sgd")

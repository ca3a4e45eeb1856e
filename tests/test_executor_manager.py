"""mx.executor_manager: the older data-parallel executor group and manager, their helpers,
and hand-written SGD steps compared with MXNet 1.9.1 (fixtures/module/make_module.py)."""

from __future__ import annotations

import importlib.util
import logging
import pathlib

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError
from rsmx.executor_manager import (
    DataParallelExecutorGroup,
    DataParallelExecutorManager,
    _bind_exec,
    _check_arguments,
    _load_data,
    _split_input_slice,
)

HERE = pathlib.Path(__file__).parent / "fixtures" / "module"
TWO = [mx.cpu(0), mx.cpu(1)]


def _cases():
    spec = importlib.util.spec_from_file_location("module_cases", HERE / "cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cases = _cases()


@pytest.fixture(scope="module")
def ref():
    with np.load(HERE / "module.npz") as f:
        return dict(f)


@pytest.mark.parametrize("n_ctx", [1, 2])
def test_manager_steps_match_mxnet(ref, n_ctx):
    got = cases.manager_steps(mx, n_ctx)
    assert set(got) == {k.split("/", 1)[1] for k in ref if k.startswith(f"manager_{n_ctx}ctx/")}
    for key, value in got.items():
        np.testing.assert_allclose(value, ref[f"manager_{n_ctx}ctx/{key}"], rtol=1e-5,
                                   atol=1e-6, err_msg=key)


def _manager(batch_size=6, ctx=TWO, **kwargs):
    x, y = cases.train_set(12)
    it = mx.io.NDArrayIter(x, y, batch_size=batch_size)
    sym = cases.mlp(mx)
    args = sym.list_arguments()
    params = [n for n in args if n not in ("data", "softmax_label")]
    return DataParallelExecutorManager(sym, ctx, it, args, params,
                                       sym.list_auxiliary_states(), **kwargs), it


def test_manager_layout_and_parameters():
    manager, _ = _manager(work_load_list=[2, 1])
    assert [(s.start, s.stop) for s in manager.slices] == [(0, 4), (4, 6)]
    execs = manager.execgrp.train_execs
    assert [e.arg_dict["data"].shape for e in execs] == [(4, 5), (2, 5)]
    assert manager.param_names == ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    assert len(manager.param_arrays) == 4 and len(manager.grad_arrays) == 4
    assert manager.aux_arrays == []
    params = cases.mlp_params()
    manager.set_params(cases.nd_dict(mx, params), {})
    for exe in execs:
        np.testing.assert_array_equal(exe.arg_dict["fc2_weight"].asnumpy(), params["fc2_weight"])
    # copy_to averages the devices' copies
    manager.param_arrays[0][1][:] = manager.param_arrays[0][1] + 2
    out = {n: mx.nd.zeros(params[n].shape) for n in params}
    manager.copy_to(out, {})
    np.testing.assert_allclose(out["fc1_weight"].asnumpy(), params["fc1_weight"] + 1,
                               rtol=1e-6)


def test_manager_rejects_a_bad_workload():
    with pytest.raises(ValueError, match="work load"):
        _manager(work_load_list=[1])


def test_manager_monitor():
    manager, it = _manager()
    mon = mx.mon.Monitor(1, pattern="fc2_output")
    manager.install_monitor(mon)
    manager.set_params(cases.nd_dict(mx, cases.mlp_params()), {})
    mon.tic()
    manager.load_data_batch(next(iter(it)))
    manager.forward()
    assert [name for _, name, _ in mon.toc()] == ["fc2_output", "fc2_output"]


def test_manager_buckets_share_parameters():
    def sym_gen(key):
        data = mx.sym.Variable("data")
        net = mx.sym.FullyConnected(mx.sym.sum(data, axis=1), num_hidden=3, name="fc")
        return mx.sym.SoftmaxOutput(net, name="softmax")

    class Iter:
        batch_size = 4
        default_bucket_key = 5
        provide_data = [mx.io.DataDesc("data", (4, 5, 2))]
        provide_label = [mx.io.DataDesc("softmax_label", (4,))]

    sym = sym_gen(5)
    manager = DataParallelExecutorManager(sym, TWO, Iter(), sym.list_arguments(),
                                          ["fc_weight", "fc_bias"], [], sym_gen=sym_gen)
    manager.set_params({"fc_weight": mx.nd.ones((3, 2)), "fc_bias": mx.nd.zeros(3)}, {})
    x = np.ones((4, 3, 2), np.float32)
    batch = mx.io.DataBatch([mx.nd.array(x)], [mx.nd.zeros(4)], bucket_key=3,
                            provide_data=[mx.io.DataDesc("data", (4, 3, 2))],
                            provide_label=[mx.io.DataDesc("softmax_label", (4,))])
    manager.load_data_batch(batch)
    assert manager.curr_execgrp is not manager.execgrp
    assert set(manager.execgrp_bucket) == {3, 5}
    manager.forward(is_train=True)
    manager.backward()
    np.testing.assert_allclose(manager.curr_execgrp.train_execs[0].outputs[0].asnumpy(),
                               np.full((2, 3), 1 / 3), rtol=1e-6)
    # the bucket's gradients land in the default bucket's gradient arrays
    assert np.abs(manager.grad_arrays[0][0].asnumpy()).sum() > 0
    with pytest.raises(NotImplementedError):
        manager.install_monitor(mx.mon.Monitor(1))


def test_group_update_metric_pre_sliced():
    x, y = cases.train_set(4)
    it = mx.io.NDArrayIter(x, y, batch_size=4)
    sym = cases.mlp(mx)
    params = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    group = DataParallelExecutorGroup(sym, sym.list_arguments(), params, TWO,
                                      _split_input_slice(4, [1, 1]), it)
    for exe in group.train_execs:
        exe.copy_params_from(cases.nd_dict(mx, cases.mlp_params()))
    batch = next(iter(it))
    group.load_data_batch(batch)
    group.forward()
    whole, parts = mx.metric.Accuracy(), mx.metric.Accuracy()
    group.update_metric(whole, batch.label)
    label = batch.label[0]
    group.update_metric(parts, [[label[0:2]], [label[2:4]]], pre_sliced=True)
    assert whole.get() == parts.get()
    assert whole.num_inst == 4


def test_load_data_checks_the_batch_size():
    x, y = cases.train_set(6)
    it = mx.io.NDArrayIter(x, y, batch_size=6)
    sym = cases.mlp(mx)
    group = DataParallelExecutorGroup(sym, sym.list_arguments(), [], TWO,
                                      _split_input_slice(6, [1, 1]), it)
    bad = mx.io.DataBatch([mx.nd.zeros((4, 5))], [mx.nd.zeros(4)])
    with pytest.raises(MXNetError, match="Expected 6, got 4"):
        _load_data(bad, group.data_arrays)


def test_check_arguments_finds_duplicates():
    data = mx.sym.Variable("data")
    a = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    b = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    with pytest.raises(ValueError, match='duplicated argument name "fc_weight"'):
        _check_arguments(a + b)
    _check_arguments(cases.mlp(mx))


def test_bind_exec_shares_inputs_and_parameters(caplog, ctx):
    sym = cases.mlp(mx)
    params = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    shared: dict = {}
    shapes = {"data": (6, 5), "softmax_label": (6,)}
    base = _bind_exec(sym, ctx, shapes, params, need_grad=True,
                      shared_data_arrays=shared)
    assert sorted(shared) == ["data", "softmax_label"]
    assert base.grad_dict["data"] is None and base.grad_dict["fc1_weight"] is not None
    small = _bind_exec(sym, ctx, {"data": (3, 5), "softmax_label": (3,)}, params,
                       need_grad={"fc2_bias"}, base_exec=base, shared_data_arrays=shared)
    assert small.grad_dict["fc1_weight"] is None
    small.arg_dict["data"][:] = 4
    np.testing.assert_array_equal(base.arg_dict["data"].asnumpy()[:3], 4)
    small.arg_dict["fc1_bias"][:] = 9
    np.testing.assert_array_equal(base.arg_dict["fc1_bias"].asnumpy(), 9)
    with caplog.at_level(logging.WARNING):
        _bind_exec(sym, ctx, {"data": (8, 5), "softmax_label": (8,)}, params,
                   base_exec=base, shared_data_arrays=shared)
    assert "larger than already allocated" in caplog.text
    assert shared["data"].shape == (8, 5)
    with pytest.raises(MXNetError, match="need_grad"):
        _bind_exec(sym, ctx, shapes, params, need_grad="yes")

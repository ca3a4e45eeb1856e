"""DataParallelExecutorGroup: slicing a batch over devices, gradients, parameter averaging,
reshaping, bucket sharing and bad input, checked against MXNet 1.9.1 (fixtures written by
fixtures/module/make_module.py) and the examples of the executor documentation."""

from __future__ import annotations

import importlib.util
import logging
import pathlib
from collections import namedtuple

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError
from rsmx.executor_manager import _split_input_slice
from rsmx.module.executor_group import (
    BatchShapeError,
    DataParallelExecutorGroup,
    _prepare_group2ctxs,
)

HERE = pathlib.Path(__file__).parent / "fixtures" / "module"
Batch = namedtuple("Batch", ["data", "label"])
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


def fc_softmax(num_hidden: int = 3):
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=num_hidden, name="fc")
    return mx.sym.SoftmaxOutput(fc, name="softmax")


def make_group(sym=None, ctxs=TWO, batch=6, dim=4, **kwargs):
    sym = sym if sym is not None else fc_softmax()
    kwargs.setdefault("for_training", True)
    kwargs.setdefault("inputs_need_grad", False)
    return DataParallelExecutorGroup(sym, ctxs, [1] * len(ctxs), [("data", (batch, dim))],
                                     [("softmax_label", (batch,))], ["fc_weight", "fc_bias"],
                                     **kwargs)


# ---------------------------------------------------------------------- the documented examples
SPEC_OUT = [0.00378404, 0.07600445, 0.07600445, 0.07600445, 0.20660152, 0.5616011]
SPEC_GRAD_ROWS = [0.00378404, -0.92399555, 0.07600445, 0.07600445, 0.20660152, 0.5616011]


@pytest.mark.parametrize("n_ctx", [1, 2])
def test_documented_softmax_example_on_each_device(n_ctx):
    net = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(net, name="fc", num_hidden=6)
    net = mx.sym.Activation(net, name="relu", act_type="relu")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    group = DataParallelExecutorGroup(net, TWO[:n_ctx], [1] * n_ctx, [("data", (n_ctx, 4))],
                                      [("softmax_label", (n_ctx,))], ["fc_weight", "fc_bias"],
                                      True, False)
    group.set_params({"fc_weight": mx.nd.ones((6, 4)),
                      "fc_bias": mx.nd.array((1, 4, 4, 4, 5, 6))}, {})
    group.forward(Batch([mx.nd.ones((n_ctx, 4))], [mx.nd.ones((n_ctx,))]))
    out = group.get_outputs()[0].asnumpy()
    np.testing.assert_allclose(out, np.tile(SPEC_OUT, (n_ctx, 1)), rtol=1e-5)
    group.backward()
    for grad in group.grad_arrays[0]:  # one row of the batch per device
        expected = np.repeat(np.array(SPEC_GRAD_ROWS, np.float32)[:, None], 4, axis=1)
        np.testing.assert_allclose(grad.asnumpy(), expected, rtol=1e-5, atol=1e-7)


def test_documented_head_gradient_example(ctx):
    a = mx.sym.Variable("a")
    b = mx.sym.Variable("b")
    c = 2 * a + b
    group = DataParallelExecutorGroup(c, [ctx], [1], [("a", (2,))], None, ["b"],
                                      True, True)
    group.set_params({"b": mx.nd.array([2, 3])}, {})
    group.forward(Batch([mx.nd.array([1, 2])], None))
    out = group.get_outputs()[0]
    np.testing.assert_array_equal(out.asnumpy(), [4, 7])
    group.backward([out])
    np.testing.assert_array_equal(group.get_input_grads()[0].asnumpy(), [8, 14])
    np.testing.assert_array_equal(group.grad_arrays[0][0].asnumpy(), [4, 7])


# ---------------------------------------------------------------------- slicing
@pytest.mark.parametrize("batch_size, workload, expected", [
    (5, [1, 1], [(0, 2), (2, 5)]),
    (8, [1, 2, 1], [(0, 2), (2, 6), (6, 8)]),
    (10, [1, 1, 1], [(0, 3), (3, 6), (6, 10)]),
    (7, [3, 1], [(0, 5), (5, 7)]),
    (9, [0.5, 0.25, 0.25], [(0, 4), (4, 6), (6, 9)]),
])
def test_split_input_slice_as_mxnet(batch_size, workload, expected):
    got = _split_input_slice(batch_size, workload)
    assert [(s.start, s.stop) for s in got] == expected


def test_split_input_slice_too_many_devices():
    with pytest.raises(ValueError, match="Too many slices"):
        _split_input_slice(2, [1, 1, 1])


def test_workload_decides_the_device_shapes():
    group = DataParallelExecutorGroup(fc_softmax(), [mx.cpu(0), mx.cpu(1), mx.cpu(2)],
                                      [1, 2, 1], [("data", (8, 4))], [("softmax_label", (8,))],
                                      ["fc_weight", "fc_bias"], True, False)
    assert [(s.start, s.stop) for s in group.slices] == [(0, 2), (2, 6), (6, 8)]
    assert [e.arg_dict["data"].shape for e in group.execs] == [(2, 4), (4, 4), (2, 4)]
    assert [e.arg_dict["data"].context for e in group.execs] == [mx.cpu(0), mx.cpu(1),
                                                                 mx.cpu(2)]
    assert group.batch_size == 8
    assert group.get_output_shapes() == [("softmax_output", (8, 3))]


def test_data_and_label_batch_sizes_must_agree():
    with pytest.raises(AssertionError, match="all data must have the same batch size"):
        DataParallelExecutorGroup(fc_softmax(), TWO, [1, 1], [("data", (6, 4))],
                                  [("softmax_label", (5,))], ["fc_weight", "fc_bias"], True,
                                  False)


def test_batch_axis_from_layout_and_unbatched_inputs():
    data = mx.sym.Variable("data")
    scale = mx.sym.Variable("scale")
    out = mx.sym.broadcast_mul(data, mx.sym.reshape(scale, shape=(1, 1, -1)),
                               attr={"__layout__": "TNC"})
    descs = [mx.io.DataDesc("data", (3, 4, 2), layout="TNC"),
             mx.io.DataDesc("scale", (2,), layout="C")]
    group = DataParallelExecutorGroup(out, TWO, [1, 1], descs, None, [], True, True)
    assert group.data_layouts == [1, -1]
    assert group.output_layouts == [1]
    x = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    s = np.array([2.0, -1.0], np.float32)
    group.forward(Batch([mx.nd.array(x), mx.nd.array(s)], None), is_train=True)
    np.testing.assert_array_equal(group.execs[0].arg_dict["data"].asnumpy(), x[:, :2])
    np.testing.assert_array_equal(group.execs[1].arg_dict["data"].asnumpy(), x[:, 2:])
    for exe in group.execs:  # no batch axis: every device gets all of it
        np.testing.assert_array_equal(exe.arg_dict["scale"].asnumpy(), s)
    outs = group.get_outputs(merge_multi_context=False)[0]
    np.testing.assert_array_equal(outs[1].asnumpy(), x[:, 2:] * s)
    np.testing.assert_array_equal(group.get_outputs()[0].asnumpy(), x * s)
    group.backward([mx.nd.ones((3, 4, 2))])
    grads = group.get_input_grads()
    np.testing.assert_array_equal(grads[0].asnumpy(), np.broadcast_to(s, x.shape))
    # an input without a batch axis merges as the first device's gradient
    np.testing.assert_array_equal(grads[1].asnumpy(), x[:, :2].sum(axis=(0, 1)))


# ---------------------------------------------------------------------- against MXNet 1.9.1
@pytest.mark.parametrize("n_ctx", [1, 2])
def test_forward_backward_and_averaging_match_mxnet(ref, n_ctx):
    got = cases.group_forward_backward(mx, n_ctx)
    for key, value in got.items():
        np.testing.assert_allclose(value, ref[f"group_{n_ctx}ctx/{key}"], rtol=1e-5,
                                   atol=1e-6, err_msg=key)


def test_outputs_per_device_and_merged():
    group = make_group(batch=5)
    x = np.random.RandomState(0).randn(5, 4).astype(np.float32)
    group.set_params({"fc_weight": mx.nd.ones((3, 4)), "fc_bias": mx.nd.zeros(3)}, {})
    group.forward(Batch([mx.nd.array(x)], [mx.nd.zeros(5)]))
    per_device = group.get_outputs(merge_multi_context=False)
    assert [o.shape for o in per_device[0]] == [(2, 3), (3, 3)]
    assert [o.context for o in per_device[0]] == TWO
    merged = group.get_outputs()[0]
    np.testing.assert_allclose(merged.asnumpy(), np.concatenate(
        [o.asnumpy() for o in per_device[0]]))
    assert merged.context == mx.cpu(0)


def test_list_of_per_device_batches():
    group = make_group(batch=4)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    group.set_params({"fc_weight": mx.nd.ones((3, 4)), "fc_bias": mx.nd.zeros(3)}, {})
    parts = [Batch([mx.nd.array(x[:2])], [mx.nd.zeros(2)]),
             Batch([mx.nd.array(x[2:])], [mx.nd.zeros(2)])]
    group.forward(parts)
    np.testing.assert_array_equal(group.execs[1].arg_dict["data"].asnumpy(), x[2:])
    group.update_metric(_Recorder(), [[mx.nd.zeros(2)], [mx.nd.ones(2)]], pre_sliced=True)


# ---------------------------------------------------------------------- gradient requests
def test_grad_req_defaults_and_fixed_params():
    group = make_group(fixed_param_names=["fc_bias"], inputs_need_grad=True)
    assert group.grad_req == {"data": "write", "fc_weight": "write", "fc_bias": "null",
                              "softmax_label": "null"}
    assert all(g is None for g in group.grad_arrays[1])
    assert group.input_grad_arrays is not None
    infer = make_group(for_training=False)
    assert set(infer.grad_req.values()) == {"null"}
    assert infer.grad_arrays is None
    with pytest.raises(MXNetError, match="for_training=True"):
        infer.backward()


def test_grad_req_as_list_and_dict():
    names = fc_softmax().list_arguments()
    group = make_group(grad_req=["null", "add", "write", "null"])
    assert group.grad_req == dict(zip(names, ["null", "add", "write", "null"], strict=True))
    group = make_group(grad_req={"fc_bias": "add"})
    assert group.grad_req == {"data": "null", "fc_weight": "write", "fc_bias": "add",
                              "softmax_label": "null"}
    with pytest.raises(MXNetError):
        make_group(grad_req=["write"])
    with pytest.raises(MXNetError):
        make_group(grad_req=3)


def test_grad_req_add_accumulates():
    x = np.random.RandomState(1).randn(6, 4).astype(np.float32)
    batch = Batch([mx.nd.array(x)], [mx.nd.array([0, 1, 2, 0, 1, 2])])
    params = {"fc_weight": mx.nd.ones((3, 4)) * 0.1, "fc_bias": mx.nd.zeros(3)}
    grads = {}
    for req in ("write", "add"):
        group = make_group(grad_req=req)
        group.set_params(params, {})
        for _ in range(2):
            group.forward(batch)
            group.backward()
        grads[req] = [g.asnumpy() for g in group.grad_arrays[0]]
    for once, twice in zip(grads["write"], grads["add"], strict=True):
        np.testing.assert_allclose(twice, 2 * once, rtol=1e-6)


def test_input_grads_need_inputs_need_grad():
    group = make_group()
    with pytest.raises(MXNetError, match="inputs_need_grad"):
        group.get_input_grads()


# ---------------------------------------------------------------------- bad input
def test_batch_of_another_shape_is_refused():
    group = make_group(batch=6)
    with pytest.raises(BatchShapeError, match=r"'data' has shape \(4, 4\).*\(6, 4\)") as info:
        group.forward(Batch([mx.nd.zeros((4, 4))], [mx.nd.zeros(6)]))
    assert isinstance(info.value, MXNetError)
    with pytest.raises(BatchShapeError, match=r"'softmax_label' has shape \(5,\).*\(6,\)"):
        group.forward(Batch([mx.nd.zeros((6, 4))], [mx.nd.zeros(5)]))
    with pytest.raises(BatchShapeError, match="2 data arrays"):
        group.forward(Batch([mx.nd.zeros((6, 4)), mx.nd.zeros((6, 4))], [mx.nd.zeros(6)]))
    with pytest.raises(BatchShapeError, match="one batch per device"):
        group.forward([Batch([mx.nd.zeros((6, 4))], [mx.nd.zeros(6)])])
    with pytest.raises(BatchShapeError, match="on device 1"):
        group.forward([Batch([mx.nd.zeros((3, 4))], [mx.nd.zeros(3)]),
                       Batch([mx.nd.zeros((2, 4))], [mx.nd.zeros(3)])])


def test_forward_without_labels_keeps_the_old_ones(ctx):
    group = make_group(batch=2, ctxs=[ctx])
    group.forward(Batch([mx.nd.ones((2, 4))], [mx.nd.array([1, 2])]))
    group.forward(Batch([mx.nd.ones((2, 4))], None), is_train=False)
    np.testing.assert_array_equal(group.execs[0].arg_dict["softmax_label"].asnumpy(), [1, 2])


# ---------------------------------------------------------------------- reshape
def test_reshape_keeps_parameters_and_matches_a_fresh_bind():
    group = make_group(batch=6)
    w = np.random.RandomState(2).randn(3, 4).astype(np.float32)
    group.set_params({"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.zeros(3)}, {})
    first = list(group.execs)
    group.reshape([("data", (6, 4))], [("softmax_label", (6,))])
    assert group.execs == first  # unchanged shapes: nothing to do
    group.reshape([mx.io.DataDesc("data", (10, 4))], [mx.io.DataDesc("softmax_label", (10,))])
    assert group.batch_size == 10
    assert [e.arg_dict["data"].shape for e in group.execs] == [(5, 4), (5, 4)]
    x = np.random.RandomState(3).randn(10, 4).astype(np.float32)
    group.forward(Batch([mx.nd.array(x)], [mx.nd.zeros(10)]))
    fresh = make_group(batch=10)
    fresh.set_params({"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.zeros(3)}, {})
    fresh.forward(Batch([mx.nd.array(x)], [mx.nd.zeros(10)]))
    np.testing.assert_allclose(group.get_outputs()[0].asnumpy(),
                               fresh.get_outputs()[0].asnumpy(), rtol=1e-6)
    # the reshaped executors still update the parameters of the first ones
    group.param_arrays[0][1][:] = 5
    np.testing.assert_array_equal(first[1].arg_dict["fc_weight"].asnumpy(), 5)


# ---------------------------------------------------------------------- buckets
def test_shared_group_shares_parameters_and_input_memory(caplog):
    big = make_group(batch=8)
    small = make_group(batch=4, shared_group=big)
    assert small.shared_data_arrays is big.shared_data_arrays
    big.param_arrays[0][0][:] = 3
    np.testing.assert_array_equal(small.param_arrays[0][0].asnumpy(), 3)
    small.grad_arrays[0][1][:] = 2
    np.testing.assert_array_equal(big.grad_arrays[0][1].asnumpy(), 2)
    # the small bucket's data is a view of the big bucket's data memory
    small.execs[0].arg_dict["data"][:] = 7
    np.testing.assert_array_equal(big.execs[0].arg_dict["data"].asnumpy()[:2], 7)
    assert sorted(big.shared_data_arrays[0]) == ["data", "softmax_label"]
    with caplog.at_level(logging.WARNING):
        larger = make_group(batch=12, shared_group=big)
    assert "larger than already allocated" in caplog.text
    assert big.shared_data_arrays[0]["data"].shape == (6, 4)
    larger.param_arrays[1][1][:] = -1
    np.testing.assert_array_equal(big.param_arrays[1][1].asnumpy(), -1)


def test_simple_bind_shared_buffer_like_mxnet(ctx):
    net = fc_softmax()
    buf: dict = {}
    reqs = {"data": "write", "fc_weight": "write", "fc_bias": "write", "softmax_label": "null"}
    params = ["fc_weight", "fc_bias"]
    e1 = net.simple_bind(ctx, grad_req=reqs, shared_arg_names=params, shared_buffer=buf,
                         data=(4, 5))
    assert {k: v.shape for k, v in buf.items()} == {"data": (4, 5), "grad of data": (4, 5),
                                                    "softmax_label": (4,)}
    e2 = net.simple_bind(ctx, grad_req="write", shared_arg_names=params, shared_exec=e1,
                         shared_buffer=buf, data=(2, 5))
    assert buf["grad of softmax_label"].shape == (2,)
    e2.arg_dict["data"][:] = 7
    np.testing.assert_array_equal(e1.arg_dict["data"].asnumpy()[:, 0], [7, 7, 0, 0])
    e2.arg_dict["fc_weight"][:] = 1
    np.testing.assert_array_equal(e1.arg_dict["fc_weight"].asnumpy(), 1)


# ---------------------------------------------------------------------- states, metric, monitor
def test_states():
    data = mx.sym.Variable("data")
    state = mx.sym.Variable("state")
    net = mx.sym.FullyConnected(data, num_hidden=3, name="fc") + state
    group = DataParallelExecutorGroup(net, TWO, [1, 1], [("data", (4, 2))], None,
                                      ["fc_weight", "fc_bias"], False, False,
                                      state_names=["state"])
    group.set_params({"fc_weight": mx.nd.zeros((3, 2)), "fc_bias": mx.nd.zeros(3)}, {})
    group.set_states(value=1.5)
    group.forward(Batch([mx.nd.ones((4, 2))], None))
    np.testing.assert_array_equal(group.get_outputs()[0].asnumpy(), np.full((4, 3), 1.5))
    group.set_states(states=[[mx.nd.ones((2, 3)) * 2, mx.nd.ones((2, 3)) * 3]])
    states = group.get_states(merge_multi_context=False)
    assert [s.asnumpy()[0, 0] for s in states[0]] == [2, 3]
    with pytest.raises(MXNetError):
        group.get_states()
    with pytest.raises(MXNetError):
        group.set_states(states=states, value=1)
    with pytest.raises(MXNetError):
        group.set_states()


class _Recorder:
    """A metric that records what ``update_dict`` receives."""

    def __init__(self):
        self.calls = []

    def update_dict(self, labels, preds):
        self.calls.append(({k: v.asnumpy() for k, v in labels.items()},
                           {k: v.shape for k, v in preds.items()}))


def test_update_metric_gives_each_device_its_labels_by_name():
    group = make_group(batch=5)
    group.forward(Batch([mx.nd.zeros((5, 4))], [mx.nd.zeros(5)]))
    rec = _Recorder()
    group.update_metric(rec, [mx.nd.arange(5)])
    assert len(rec.calls) == 2
    np.testing.assert_array_equal(rec.calls[0][0]["softmax_label"], [0, 1])
    np.testing.assert_array_equal(rec.calls[1][0]["softmax_label"], [2, 3, 4])
    assert rec.calls[1][1] == {"softmax_output": (3, 3)}


def test_update_metric_with_a_real_metric():
    group = make_group(batch=4)
    group.set_params({"fc_weight": mx.nd.zeros((3, 4)),
                      "fc_bias": mx.nd.array([0, 0, 1])}, {})
    group.forward(Batch([mx.nd.zeros((4, 4))], [mx.nd.zeros(4)]))
    acc = mx.metric.Accuracy()
    group.update_metric(acc, [mx.nd.array([2, 2, 0, 2])])
    assert acc.get() == ("accuracy", 0.75)


def test_monitor_watches_every_device():
    group = make_group(batch=4)
    mon = mx.mon.Monitor(1, pattern="fc_output")
    group.install_monitor(mon)
    mon.tic()
    group.forward(Batch([mx.nd.ones((4, 4))], [mx.nd.zeros(4)]))
    stats = mon.toc()
    assert [name for _, name, _ in stats] == ["fc_output", "fc_output"]


def test_prepare_group2ctxs():
    assert _prepare_group2ctxs(None, 2) == [None, None]
    got = _prepare_group2ctxs({"a": mx.cpu(3), "b": [mx.cpu(1), mx.cpu(2)]}, 2)
    assert got == [{"a": mx.cpu(3), "b": mx.cpu(1)}, {"a": mx.cpu(3), "b": mx.cpu(2)}]
    with pytest.raises(MXNetError):
        _prepare_group2ctxs({"a": [mx.cpu(1)] * 3}, 2)
    with pytest.raises(MXNetError):
        _prepare_group2ctxs([{}], 2)


REFERENCE_METHODS = ["backward", "bind_exec", "decide_slices", "forward", "get_input_grads",
                     "get_outputs", "get_params", "get_states", "install_monitor", "reshape",
                     "set_params", "set_states", "update_metric", "_bind_ith_exec",
                     "_collect_arrays", "_sliced_shape"]
REFERENCE_ATTRIBUTES = ["arg_names", "aux_arrays", "aux_names", "batch_size", "contexts",
                        "data_arrays", "data_layouts", "data_shapes", "execs",
                        "fixed_param_names", "for_training", "grad_arrays", "grad_req",
                        "input_grad_arrays", "inputs_need_grad", "label_arrays",
                        "label_layouts", "label_shapes", "logger", "output_layouts",
                        "param_arrays", "param_names", "shared_data_arrays", "slices",
                        "state_arrays", "state_names", "symbol", "workload", "_default_execs"]


def test_every_member_of_the_reference():
    group = make_group(batch=6, inputs_need_grad=True)
    for name in REFERENCE_METHODS:
        assert callable(getattr(group, name)), name
    for name in REFERENCE_ATTRIBUTES:
        assert hasattr(group, name), name
    assert group.arg_names == ["data", "fc_weight", "fc_bias", "softmax_label"]
    assert group.contexts == TWO and group.workload == [1, 1] and group.logger is logging
    assert group.data_shapes == [("data", (6, 4))]
    assert isinstance(group.data_shapes[0], mx.io.DataDesc)
    assert group.label_shapes == [("softmax_label", (6,))]
    # per input, one (slice of the batch, device array) pair per device
    (pairs,) = group.data_arrays
    assert [(s.start, s.stop, a.shape, a.context) for s, a in pairs] == [
        (0, 3, (3, 4), mx.cpu(0)), (3, 6, (3, 4), mx.cpu(1))]
    assert [a.shape for _, a in group.label_arrays[0]] == [(3,), (3,)]
    assert [len(b) for b in group.param_arrays] == [2, 2]
    assert [a.shape for a in group.input_grad_arrays[0]] == [(3, 4), (3, 4)]
    assert group.aux_arrays == [] and group.state_arrays == [] and group.state_names == []
    assert group._default_execs is None
    assert group._sliced_shape(group.data_shapes, 1, [0])[0].shape == (3, 4)

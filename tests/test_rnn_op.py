"""The fused `RNN` operator (`mx.nd.RNN`, `mx.sym.RNN`) against MXNet 1.9.1's numbers.

tests/fixtures/rnn/rnn.npz, written by MXNet (see make_fixture.py there), holds small
vanilla-RNN, LSTM and GRU cases, uni- and bidirectional, one and two layers, float32 and
float64: their inputs, head gradients, outputs in training and inference, and input
gradients; the argument and output names and the shapes MXNet infers; and what MXNet's CPU
implementation does with the options it refuses. The forward and backward comparisons run
on the CPU and on each GPU there is.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import rsmx as mx
from rsmx.test_utils import check_numeric_gradient

FIXTURE = np.load(pathlib.Path(__file__).resolve().parent / "fixtures" / "rnn" / "rnn.npz")
CASES = json.loads(str(FIXTURE["cases"]))
SYMBOLS = json.loads(str(FIXTURE["symbols"]))
BEHAVIOUR = json.loads(str(FIXTURE["behaviour"]))
SEQ_LEN, BATCH, INPUT, HIDDEN = 5, 3, 4, 6
DATA_SHAPE = (SEQ_LEN, BATCH, INPUT)

# MXNet's float32 and float64 results for these cases differ by at most 1e-6 (3e-5 relative).
TOLERANCE = {"float32": dict(rtol=1e-4, atol=1e-5), "float64": dict(rtol=1e-10, atol=1e-12)}
# MXNet's float64 kernel for stacked bidirectional ReLU layers is only float32-accurate: its
# outputs differ from a plain float64 NumPy evaluation by up to 4e-8 (rsmx's by 2e-16).
LOOSER = {"rnn_relu_l2_bi_so_float64": dict(rtol=1e-5, atol=1e-7)}


def input_names(mode: str) -> list[str]:
    return ["data", "parameters", "state"] + (["state_cell"] if mode == "lstm" else [])


def output_names(case: dict) -> list[str]:
    if not case["state_outputs"]:
        return ["out"]
    return ["out", "hy", "cy"] if case["mode"] == "lstm" else ["out", "hy"]


def ref(case: dict, key: str) -> np.ndarray:
    return FIXTURE[f"{case['name']}/{key}"]


def rnn_kwargs(case: dict) -> dict:
    return dict(state_size=HIDDEN, num_layers=case["num_layers"], mode=case["mode"],
                bidirectional=case["bidirectional"], state_outputs=case["state_outputs"])


def as_list(outs) -> list:
    return outs if isinstance(outs, (list, tuple)) else [outs]


def assert_close(got, want: np.ndarray, dtype: str, what: str, case: str = "") -> None:
    got = got.asnumpy()
    assert got.dtype == np.dtype(dtype), what
    np.testing.assert_allclose(got, want, err_msg=what, **LOOSER.get(case, TOLERANCE[dtype]))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_ndarray_inference_and_autograd_match_mxnet(case, ctx) -> None:
    dtype = case["dtype"]
    args = [mx.nd.array(ref(case, k), ctx=ctx, dtype=dtype) for k in input_names(case["mode"])]
    outs = as_list(mx.nd.RNN(*args, **rnn_kwargs(case)))
    assert len(outs) == len(output_names(case))
    for name, got in zip(output_names(case), outs, strict=True):
        assert got.context == ctx
        assert_close(got, ref(case, f"infer_{name}"), dtype, f"inference {name}", case["name"])

    for a in args:
        a.attach_grad()
    with mx.autograd.record():
        outs = as_list(mx.nd.RNN(*args, **rnn_kwargs(case)))
    heads = [mx.nd.array(ref(case, f"head_{n}"), ctx=ctx, dtype=dtype) for n in output_names(case)]
    mx.autograd.backward(outs, heads)
    for name, got in zip(output_names(case), outs, strict=True):
        assert_close(got, ref(case, f"train_{name}"), dtype, f"training {name}", case["name"])
    for name, a in zip(input_names(case["mode"]), args, strict=True):
        assert_close(a.grad, ref(case, f"grad_{name}"), dtype, f"gradient of {name}", case["name"])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_symbol_simple_bind_forward_backward_match_mxnet(case, ctx) -> None:
    dtype = case["dtype"]
    sym = mx.sym.RNN(mx.sym.Variable("data"), name="rnn", **rnn_kwargs(case))
    ex = sym.simple_bind(ctx, type_dict={"data": dtype}, data=DATA_SHAPE)
    args = dict(zip(sym.list_arguments(), input_names(case["mode"]), strict=True))
    for arg, name in args.items():
        ex.arg_dict[arg][:] = ref(case, name)
    ex.forward(is_train=False)
    for name, got in zip(output_names(case), ex.outputs, strict=True):
        assert_close(got, ref(case, f"infer_{name}"), dtype, f"inference {name}", case["name"])
    ex.forward(is_train=True)
    heads = [mx.nd.array(ref(case, f"head_{n}"), ctx=ctx, dtype=dtype) for n in output_names(case)]
    ex.backward(heads)
    for name, got in zip(output_names(case), ex.outputs, strict=True):
        assert_close(got, ref(case, f"train_{name}"), dtype, f"training {name}", case["name"])
    for arg, name in args.items():
        assert_close(ex.grad_dict[arg], ref(case, f"grad_{name}"), dtype, f"gradient of {name}", case["name"])


@pytest.mark.parametrize("record", SYMBOLS, ids=lambda r: "-".join(map(str, r["params"].values())))
def test_names_and_inferred_shapes_match_mxnet(record) -> None:
    """The parameter vector's size, the states' shapes and the outputs' shapes are all
    inferred from the data shape and the operator's parameters."""
    if record["data_shape"] is None:
        sym = mx.sym.RNN(name="rnn", **record["params"])
        shapes = sym.infer_shape(rnn_data=DATA_SHAPE)
    else:
        sym = mx.sym.RNN(mx.sym.Variable("data"), name="rnn", **record["params"])
        shapes = sym.infer_shape(data=tuple(record["data_shape"]))
    assert sym.list_arguments() == record["arguments"]
    assert sym.list_outputs() == record["outputs"]
    assert sym.list_auxiliary_states() == record["auxiliary_states"]
    arg_shapes, out_shapes, aux_shapes = shapes
    assert [list(s) for s in arg_shapes] == record["arg_shapes"]
    assert [list(s) for s in out_shapes] == record["out_shapes"]
    assert aux_shapes == []


def test_parameter_size_inferred_for_a_network_around_the_operator() -> None:
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=INPUT, flatten=False, name="fc")
    net = mx.sym.RNN(net, state_size=HIDDEN, num_layers=2, mode="gru", bidirectional=True,
                     name="rnn")
    arg_shapes, out_shapes, _ = net.infer_shape(data=(SEQ_LEN, BATCH, 7))
    shapes = dict(zip(net.list_arguments(), arg_shapes, strict=True))
    # GRU: 3 gates; layer 1 reads the INPUT features FullyConnected gives, layer 2 the
    # outputs of both directions of layer 1.
    gates, d = 3, 2
    size = gates * HIDDEN * d * ((INPUT + HIDDEN + 2) + (d * HIDDEN + HIDDEN + 2))
    assert shapes["rnn_parameters"] == (size,)
    assert shapes["rnn_state"] == (2 * d, BATCH, HIDDEN)
    assert out_shapes == [(SEQ_LEN, BATCH, d * HIDDEN)]


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_numeric_gradient_float64(mode) -> None:
    t, n, i, h, layers = 3, 2, 2, 3, 2
    sym = mx.sym.RNN(mx.sym.Variable("data"), state_size=h, num_layers=layers, mode=mode,
                     bidirectional=True, name="rnn")
    arg_shapes, _, _ = sym.infer_shape(data=(t, n, i))
    rng = np.random.RandomState(7)
    location = {}
    for name, shape in zip(sym.list_arguments(), arg_shapes, strict=True):
        scale = 1 / np.sqrt(h) if name == "rnn_parameters" else 0.8
        location[name] = rng.uniform(-scale, scale, shape)
    check_numeric_gradient(sym, location, numeric_eps=1e-6, rtol=1e-6, atol=1e-8, dtype=np.float64)


def random_inputs(mode: str, dtype: str, layers: int = 2, ctx=None) -> list:
    """Seeded data, parameters and states of a unidirectional RNN."""
    rng = np.random.RandomState(3)
    sym = mx.sym.RNN(mx.sym.Variable("data"), state_size=HIDDEN, num_layers=layers, mode=mode)
    arg_shapes, _, _ = sym.infer_shape(data=DATA_SHAPE)
    return [mx.nd.array(rng.uniform(-0.4, 0.4, s), ctx=ctx, dtype=dtype) for s in arg_shapes]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_dropout_between_layers_only_in_training(mode, dtype, ctx) -> None:
    """`p` drops the outputs of every layer but the last, in training only: inference
    gives the p=0 output, training a different, finite one; the first layer's final state
    is computed before its output is dropped."""
    args = random_inputs(mode, dtype, ctx=ctx)
    kw = dict(state_size=HIDDEN, num_layers=2, mode=mode, state_outputs=True)
    plain = mx.nd.RNN(*args, **kw)
    inference = mx.nd.RNN(*args, p=0.5, **kw)
    np.testing.assert_array_equal(inference[0].asnumpy(), plain[0].asnumpy())
    for a in args:
        a.attach_grad()
    with mx.autograd.record():
        training = mx.nd.RNN(*args, p=0.5, **kw)
    mx.autograd.backward(training[0])
    out = training[0].asnumpy()
    assert np.isfinite(out).all()
    assert np.abs(out - plain[0].asnumpy()).max() > 1e-3
    np.testing.assert_allclose(training[1][0].asnumpy(), plain[1][0].asnumpy(), **TOLERANCE[dtype])
    assert np.abs(training[1][1].asnumpy() - plain[1][1].asnumpy()).max() > 1e-3
    for a in args:
        assert np.isfinite(a.grad.asnumpy()).all()


def test_dropout_in_a_bound_training_pass_and_not_for_one_layer() -> None:
    args = random_inputs("lstm", "float64")
    sym = mx.sym.RNN(mx.sym.Variable("data"), state_size=HIDDEN, num_layers=2, mode="lstm", p=0.5,
                     name="rnn")
    ex = sym.simple_bind(mx.cpu(), type_dict={"data": "float64"}, data=DATA_SHAPE)
    for name, a in zip(sym.list_arguments(), args, strict=True):
        ex.arg_dict[name][:] = a
    inference = ex.forward(is_train=False)[0].asnumpy()
    training = ex.forward(is_train=True)[0].asnumpy()
    assert np.isfinite(training).all() and np.abs(training - inference).max() > 1e-3

    one = random_inputs("lstm", "float64", layers=1)
    plain = mx.nd.RNN(*one, state_size=HIDDEN, num_layers=1, mode="lstm")
    with mx.autograd.record():
        dropped = mx.nd.RNN(*one, state_size=HIDDEN, num_layers=1, mode="lstm", p=0.5)
    np.testing.assert_allclose(dropped.asnumpy(), plain.asnumpy(), **TOLERANCE["float64"])


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_state_outputs(mode) -> None:
    args = random_inputs(mode, "float32", layers=1)
    one = mx.nd.RNN(*args, state_size=HIDDEN, num_layers=1, mode=mode)
    assert isinstance(one, mx.nd.NDArray) and one.shape == (SEQ_LEN, BATCH, HIDDEN)
    many = mx.nd.RNN(*args, state_size=HIDDEN, num_layers=1, mode=mode, state_outputs=True)
    states = 2 if mode == "lstm" else 1
    assert [o.shape for o in many] == [(SEQ_LEN, BATCH, HIDDEN)] + [(1, BATCH, HIDDEN)] * states
    np.testing.assert_array_equal(many[0].asnumpy(), one.asnumpy())
    # The final hidden state is the last time step's output.
    np.testing.assert_allclose(many[1].asnumpy()[0], one.asnumpy()[-1], rtol=1e-6)
    sym = mx.sym.RNN(mx.sym.Variable("data"), state_size=HIDDEN, num_layers=1, mode=mode,
                     name="rnn")
    assert sym.list_outputs() == ["rnn_output"]


def bad_call(kwargs=None, data_shape=DATA_SHAPE, parameter_extra=0,
             state_shape=(1, BATCH, HIDDEN), state_cell_shape=(1, BATCH, HIDDEN), with_cell=True,
             sequence_length=False, train=False, dtype="float32"):
    """Runs an LSTM call, changed as given, through to its result."""
    kw = dict(state_size=HIDDEN, num_layers=1, mode="lstm")
    kw.update(kwargs or {})
    layers = kw["num_layers"]
    sizing = {k: kw[k] for k in ("num_layers", "projection_size") if k in kw}
    size = mx.sym.RNN(mx.sym.Variable("data"), state_size=HIDDEN, mode="lstm",
                      **sizing).infer_shape(data=DATA_SHAPE)[0][1]
    if layers != 1:
        state_shape = state_cell_shape = (layers, BATCH, HIDDEN)
    args = [mx.nd.ones(data_shape, dtype=dtype) * 0.1,
            mx.nd.ones((size[0] + parameter_extra,), dtype=dtype) * 0.1,
            mx.nd.zeros(state_shape, dtype=dtype)]
    if with_cell:
        args.append(mx.nd.zeros(state_cell_shape, dtype=dtype))
    if sequence_length:
        args.append(mx.nd.array([2, 3, 5], dtype=dtype))
    if train:
        args[1].attach_grad()
        with mx.autograd.record():
            out = mx.nd.RNN(*args, **kw)
    else:
        out = mx.nd.RNN(*args, **kw)
    for o in as_list(out):
        o.wait_to_read()


BAD_INPUTS = {
    # name: (the call, what the message must hold besides the operator's name)
    "wrong_parameter_size": (dict(parameter_extra=1), "parameters"),
    "wrong_state_shape": (dict(state_shape=(2, BATCH, HIDDEN)), "state"),
    "wrong_state_width": (dict(state_shape=(1, BATCH, HIDDEN + 1)), "state"),
    "wrong_state_cell_shape": (dict(state_cell_shape=(1, BATCH + 1, HIDDEN)), "state_cell"),
    "data_ndim_2": (dict(data_shape=(SEQ_LEN, INPUT)), "data"),
    "unknown_mode": (dict(kwargs=dict(mode="foo")), "foo"),
    "lstm_without_state_cell": (dict(with_cell=False), ""),
    "p_1_5": (dict(kwargs=dict(p=1.5)), "1.5"),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_raises_naming_the_operator(name) -> None:
    call, word = BAD_INPUTS[name]
    with pytest.raises(mx.base.MXNetError) as info:
        bad_call(**call)
    message = str(info.value)
    assert "RNN" in message and word in message, message


# What MXNet's own CPU kernels refuse. They run float64; MXNet's pip build hands float32 to
# oneDNN, which ignores these options instead, so the fixture records them for float64.
CPU_REFUSED = {
    "use_sequence_length": dict(kwargs=dict(use_sequence_length=True), sequence_length=True),
    "projection_size_training": dict(kwargs=dict(projection_size=3), state_shape=(1, BATCH, 3),
                                     train=True),
    "p_1": dict(kwargs=dict(p=1.0, num_layers=2), train=True),
}


@pytest.mark.parametrize("name", CPU_REFUSED)
def test_options_mxnet_refuses_on_the_cpu_are_refused(name) -> None:
    assert BEHAVIOUR[name]["float64"].startswith("error: ")
    with pytest.raises(mx.base.MXNetError, match="RNN"):
        bad_call(dtype="float64", **CPU_REFUSED[name])


def test_lstm_state_clipping_bounds_the_cell_state(ctx) -> None:
    """MXNet clips LSTM cell states only on cuDNN; rsmx clips on every device: the final
    cell state stays within the bounds, wide bounds change nothing, and the gradient is
    still the numeric one."""
    args = random_inputs("lstm", "float64", layers=1, ctx=ctx)
    kw = dict(state_size=HIDDEN, num_layers=1, mode="lstm", state_outputs=True)
    plain = mx.nd.RNN(*args, **kw)
    assert np.abs(plain[2].asnumpy()).max() > 0.05
    clipped = mx.nd.RNN(*args, lstm_state_clip_min=-0.05, lstm_state_clip_max=0.05, **kw)
    assert np.abs(clipped[2].asnumpy()).max() <= 0.05
    assert np.abs(clipped[0].asnumpy() - plain[0].asnumpy()).max() > 1e-6
    wide = mx.nd.RNN(*args, lstm_state_clip_min=-1e9, lstm_state_clip_max=1e9, **kw)
    for a, b in zip(wide, plain, strict=True):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    sym = mx.sym.RNN(mx.sym.Variable("data"), mx.sym.Variable("parameters"),
                     mx.sym.Variable("state"), mx.sym.Variable("state_cell"), state_size=HIDDEN,
                     num_layers=1, mode="lstm", lstm_state_clip_min=-0.05,
                     lstm_state_clip_max=0.05)
    location = dict(zip(["data", "parameters", "state", "state_cell"],
                        [a.asnumpy() for a in args], strict=True))
    check_numeric_gradient(sym, location, numeric_eps=1e-6, rtol=1e-4, atol=1e-6,
                           dtype=np.float64)


def test_mxnet_records_dropout_and_refusals_as_described() -> None:
    """The fixture's own record of MXNet: the float64 kernels drop in training only and
    keep the first layer's state, and the probes above fail there."""
    dropout = BEHAVIOUR["dropout"]["float64"]
    assert dropout["inference_vs_p0"] == 0 and dropout["training_vs_p0"] > 1e-3
    assert dropout["training_hy_layer0_vs_p0"] == 0
    assert BEHAVIOUR["lstm_state_clip_nan_alone"]["float64"] == "ok"
    for name in BAD_INPUTS:
        if name in BEHAVIOUR:
            assert BEHAVIOUR[name]["float64"].startswith("error: "), name


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_a_large_batch_equals_its_halves(mode, ctx) -> None:
    """A batch large enough for the CPU kernels to step blocks of rows side by side gives
    each row what a run over half the batch gives it, and the halves' parameter
    gradients add up to the whole's."""
    seq, batch, inputs, hidden = 16, 32, 16, 96
    rng = np.random.RandomState(5)
    kw = dict(state_size=hidden, num_layers=2, mode=mode, state_outputs=True)
    shapes = mx.sym.RNN(mx.sym.Variable("data"), **kw).infer_shape(
        data=(seq, batch, inputs))[0]
    full = [rng.uniform(-0.5, 0.5, s) for s in shapes]
    head = rng.uniform(-1, 1, (seq, batch, hidden))

    def run(values, rows):
        args = [mx.nd.array(v if k == 1 else v[:, rows], ctx=ctx, dtype="float64")
                for k, v in enumerate(values)]
        for a in args:
            a.attach_grad()
        with mx.autograd.record():
            outs = mx.nd.RNN(*args, **kw)
        mx.autograd.backward(outs[0], mx.nd.array(head[:, rows], ctx=ctx, dtype="float64"))
        return outs[0].asnumpy(), [a.grad.asnumpy() for a in args]

    out, grads = run(full, slice(None))
    halves = [run(full, slice(0, 16)), run(full, slice(16, 32))]
    np.testing.assert_allclose(out, np.concatenate([h[0] for h in halves], axis=1), rtol=1e-10)
    for k, g in enumerate(grads):
        if k == 1:
            want = halves[0][1][k] + halves[1][1][k]
        else:
            want = np.concatenate([h[1][k] for h in halves], axis=1)
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-12)

"""``mx.rnn`` against MXNet 1.9.1: cells unroll to the same symbols (node names,
attributes, JSON), with the same arguments, outputs, inferred shapes and forward values;
weights unpack and pack as MXNet's do, and the ``FusedRNN`` initializer fills the same
values; ``encode_sentences`` and ``BucketSentenceIter`` give MXNet's vocabularies and
batches; RNN checkpoints round-trip. Fixtures come from fixtures/rnn_cells/make_fixture.py.

Cells unrolled with their default begin states (``_zeros`` of shape ``(0, H)``) rely on
shape inference reading 0 as an unknown size and filling it in, through
``FullyConnected``, ``Convolution`` and ``where`` too, as MXNet does.
"""

import gzip
import json
import pathlib
import random
import sys
import warnings

import numpy as np
import pytest
import rsmx as mx

HERE = pathlib.Path(__file__).parent / "fixtures" / "rnn_cells"
sys.path.insert(0, str(HERE))

import rnn_cell_cases as cases  # noqa: E402

with gzip.open(HERE / "symbols.json.gz", "rt") as _f:
    SYMBOLS = json.load(_f)
NUMERIC = np.load(HERE / "numeric.npz")
WEIGHTS = np.load(HERE / "weights.npz")
WEIGHTS_META = json.loads((HERE / "weights.json").read_text())
DATA_IO = json.loads((HERE / "data_io.json").read_text())


def build(name):
    builder = cases.UNROLLED.get(name) or cases.FUSED[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FusedRNNCell's advice to use TNC
        return builder(mx)


def check_symbol(name):
    group, shapes = build(name)
    ref = SYMBOLS[name]
    assert json.loads(group.tojson()) == ref["json"]
    assert group.list_arguments() == ref["arguments"]
    assert group.list_outputs() == ref["outputs"]
    assert group.list_auxiliary_states() == ref["aux"]
    assert {k: list(v) for k, v in shapes.items()} == ref["input_shapes"]


def check_shapes(name):
    group, shapes = build(name)
    ref = SYMBOLS[name]
    arg_shapes, out_shapes, aux_shapes = group.infer_shape(**shapes)
    assert [list(s) for s in arg_shapes] == ref["arg_shapes"]
    assert [list(s) for s in out_shapes] == ref["out_shapes"]
    assert [list(s) for s in aux_shapes] == ref["aux_shapes"]


def check_forward(index, name):
    group, shapes = build(name)
    arg_shapes, _, _ = group.infer_shape(**shapes)
    values = cases.arg_values(group.list_arguments(), arg_shapes, index)
    ex = group.bind(mx.cpu(), {k: mx.nd.array(v) for k, v in values.items()}, grad_req="null")
    outs = ex.forward(is_train=False)
    expected = [NUMERIC[f"{index}_{j}"] for j in range(len(group.list_outputs()))]
    assert len(outs) == len(expected)
    for got, want in zip(outs, expected, strict=True):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- unrolled symbols
@pytest.mark.parametrize("name", list(cases.UNROLLED))
def test_unrolled_symbol_matches_mxnet(name):
    check_symbol(name)


@pytest.mark.parametrize("name", list(cases.UNROLLED))
def test_unrolled_shapes_match_mxnet(name):
    check_shapes(name)


@pytest.mark.parametrize("index,name", list(enumerate(cases.NUMERIC)))
def test_forward_matches_mxnet(index, name):
    check_forward(index, name)


@pytest.mark.parametrize("name", list(cases.FUSED))
def test_fused_rnn_op_symbol_matches_mxnet(name):
    check_symbol(name)


@pytest.mark.parametrize("name", list(cases.FUSED))
def test_fused_rnn_op_shapes_match_mxnet(name):
    check_shapes(name)


@pytest.mark.parametrize("index,name",
                         list(enumerate(cases.NUMERIC_FUSED, start=len(cases.NUMERIC))))
def test_fused_rnn_op_forward_matches_mxnet(index, name):
    check_forward(index, name)


def test_fused_rnn_op_equals_unfused_cells():
    # Two bidirectional GRU layers with random begin states: the fused state (4, N, H) holds
    # layer 0 left, layer 0 right, layer 1 left, layer 1 right, the unfused cells' order.
    fused = mx.rnn.FusedRNNCell(3, num_layers=2, mode="gru", bidirectional=True, prefix="g_")
    stack = fused.unfuse()
    data = mx.sym.Variable("data")
    fused_state = fused.begin_state(func=mx.sym.Variable)
    out, _ = fused.unroll(4, data, begin_state=fused_state, layout="TNC", merge_outputs=True)
    stack_states = stack.begin_state(func=mx.sym.Variable)
    unfused_out, _ = stack.unroll(4, data, begin_state=stack_states, layout="TNC", merge_outputs=True)

    rng = np.random.RandomState(0)
    x = mx.nd.array(rng.uniform(-1, 1, (4, 2, 5)))
    h0 = rng.uniform(-1, 1, (4, 2, 3)).astype(np.float32)
    size = 2 * 3 * 3 * (5 + 3 + 2) + 2 * 3 * 3 * (2 * 3 + 3 + 2)
    flat = mx.nd.array(rng.uniform(-0.5, 0.5, (size,)))
    stacked = stack.pack_weights(fused.unpack_weights({"g_parameters": flat}))
    unfused_args = {s.name: mx.nd.array(h0[k]) for k, s in enumerate(stack_states)}
    want = unfused_out.eval(mx.cpu(), data=x, **stacked, **unfused_args)[0].asnumpy()
    fused_args = {fused_state[0].name: mx.nd.array(h0), "g_parameters": flat}
    got = out.eval(mx.cpu(), data=x, **fused_args)[0].asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_unroll_twice_restarts_names():
    cell = mx.rnn.LSTMCell(3, prefix="p_")
    first, _ = cell.unroll(2, mx.sym.Variable("data"), merge_outputs=False)
    second, _ = cell.unroll(2, mx.sym.Variable("data"), merge_outputs=False)
    assert mx.sym.Group(second).list_outputs() == ["p_t0_out_output", "p_t1_out_output"]
    assert mx.sym.Group(first).list_arguments() == mx.sym.Group(second).list_arguments()


def test_step_by_step_equals_unroll():
    cell = mx.rnn.GRUCell(3, prefix="g_")
    steps = [mx.sym.Variable(f"x{i}") for i in range(2)]
    with mx.name.NameManager():
        unrolled, _ = cell.unroll(2, steps, merge_outputs=False)
    cell.reset()
    with mx.name.NameManager():
        states = cell.begin_state()
        outputs = []
        for x in steps:
            out, states = cell(x, states)
            outputs.append(out)
    assert mx.sym.Group(outputs).tojson() == mx.sym.Group(unrolled).tojson()


def test_params_and_state_info():
    cell = mx.rnn.SequentialRNNCell()
    cell.add(mx.rnn.LSTMCell(5, prefix="a_"))
    cell.add(mx.rnn.BidirectionalCell(mx.rnn.GRUCell(2, prefix="l_"), mx.rnn.RNNCell(3, prefix="r_")))
    assert sorted(cell.params._params) == sorted(
        f"{p}{g}_{k}" for p in ("a_", "l_", "r_") for g in ("i2h", "h2h") for k in ("weight", "bias")
    )
    assert cell.state_shape == [(0, 5), (0, 5), (0, 2), (0, 3)]
    assert [i["__layout__"] for i in cell.state_info] == ["NC"] * 4
    fused = mx.rnn.FusedRNNCell(6, num_layers=3, bidirectional=True)
    assert fused.state_info == [{"shape": (6, 0, 6), "__layout__": "LNC"}] * 2
    assert mx.rnn.FusedRNNCell(6, mode="gru").state_shape == [(1, 0, 6)]
    assert mx.rnn.ConvGRUCell((1, 3, 8, 6), 4, i2h_stride=(2, 2)).state_shape == [(0, 4, 4, 3)]


def test_begin_state_kwargs_and_func():
    cell = mx.rnn.LSTMCell(3, prefix="q_")
    states = cell.begin_state(func=mx.sym.Variable, dtype="float16")
    assert [s.name for s in states] == ["q_begin_state_0", "q_begin_state_1"]
    assert states[1].list_attr() == {"__shape__": "(0, 3)", "__layout__": "NC", "__dtype__": "2"}
    zoneout = mx.rnn.ZoneoutCell(mx.rnn.RNNCell(3, prefix="z_"), 0.5)
    assert [s.name for s in zoneout.begin_state(func=mx.sym.Variable)] == ["z_begin_state_0"]
    assert [s.name for s in zoneout.begin_state(init_sym=mx.sym.Variable)] == ["z_begin_state_1"]


# ---------------------------------------------------------------------- errors
def test_unroll_errors():
    cell = mx.rnn.LSTMCell(3)
    steps = [mx.sym.Variable(f"x{i}") for i in range(2)]
    with pytest.raises(ValueError, match="2 input symbols for a length of 3"):
        cell.unroll(3, steps)
    with pytest.raises(mx.MXNetError, match="layout"):
        cell.unroll(2, mx.sym.Variable("data"), layout="NC")
    with pytest.raises(AssertionError, match="grouped"):
        cell.unroll(2, mx.sym.Group(steps))
    with pytest.raises(ValueError, match="inputs=None"):
        cell.unroll(2, None)
    with pytest.raises(ValueError, match="layout"):
        mx.rnn.FusedRNNCell(3).unroll(2, mx.sym.Variable("data"), layout="NCT")


def test_misuse_errors():
    with pytest.raises(NotImplementedError):
        mx.rnn.BidirectionalCell(mx.rnn.RNNCell(2, prefix="a_"), mx.rnn.RNNCell(2, prefix="b_"))(
            mx.sym.Variable("x"), []
        )
    with pytest.raises(NotImplementedError):
        mx.rnn.FusedRNNCell(2)(mx.sym.Variable("x"), [])
    base = mx.rnn.GRUCell(2)
    mx.rnn.ResidualCell(base)
    with pytest.raises(ValueError, match="modifier"):
        base.begin_state()
    with pytest.raises(AssertionError, match="not both"):
        mx.rnn.SequentialRNNCell(params=mx.rnn.RNNParams("s_")).add(mx.rnn.LSTMCell(2))
    with pytest.raises(ValueError, match="unfuse"):
        mx.rnn.ZoneoutCell(mx.rnn.FusedRNNCell(2), 0.1)
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.BidirectionalCell(mx.rnn.RNNCell(2, prefix="a_"), mx.rnn.RNNCell(2, prefix="b_")))
    with pytest.raises(ValueError, match="BidirectionalCell"):
        mx.rnn.ZoneoutCell(stack, 0.1)
    with pytest.raises(ValueError, match="dropout"):
        mx.rnn.DropoutCell("0.5")
    with pytest.raises(ValueError, match="mode"):
        mx.rnn.FusedRNNCell(2, mode="lstmp")
    with pytest.raises(ValueError, match="odd"):
        mx.rnn.ConvRNNCell((1, 3, 4, 4), 2, h2h_kernel=(2, 3))


# ---------------------------------------------------------------------- weights
def nd_dict(prefix):
    n = len(prefix)
    return {k[n:]: mx.nd.array(v) for k, v in WEIGHTS.items() if k.startswith(prefix)}


@pytest.mark.parametrize("key,make", [
    ("lstm", lambda: mx.rnn.LSTMCell(3, prefix="lstm_")),
    ("gru", lambda: mx.rnn.GRUCell(3, prefix="gru_")),
    ("rnn", lambda: mx.rnn.RNNCell(3, prefix="rnn_")),
])
def test_stacked_unpack_pack_matches_mxnet(key, make):
    cell = make()
    meta = WEIGHTS_META["unpack"][key]
    packed = nd_dict(f"{key}:packed:")
    packed = {n: packed[n] for n in meta["packed"]}
    unpacked = cell.unpack_weights(packed)
    assert list(unpacked) == meta["unpacked"]
    for name, arr in unpacked.items():
        np.testing.assert_array_equal(arr.asnumpy(), WEIGHTS[f"{key}:unpacked:{name}"])
    assert set(packed) == set(meta["packed"]), "unpack_weights changed its argument"
    repacked = cell.pack_weights(unpacked)
    assert sorted(repacked) == sorted(packed)
    for name, arr in repacked.items():
        np.testing.assert_array_equal(arr.asnumpy(), packed[name].asnumpy())


@pytest.mark.parametrize("key", ["fused_lstm_bi2", "fused_gru", "fused_tanh2", "fused_relu_bi"])
def test_fused_unpack_pack_matches_mxnet(key):
    meta = WEIGHTS_META["unpack"][key]
    cell = mx.rnn.FusedRNNCell(**meta["kwargs"])
    assert cell._parameter.name == meta["parameter"]
    flat = np.arange(meta["size"], dtype=np.float32) / 7.0
    unpacked = cell.unpack_weights({meta["parameter"]: mx.nd.array(flat), "other": mx.nd.ones((1,))})
    assert list(unpacked) == meta["unpacked"]
    for name, arr in unpacked.items():
        np.testing.assert_array_equal(arr.asnumpy(), WEIGHTS[f"{key}:unpacked:{name}"])
    repacked = cell.pack_weights(unpacked)
    assert sorted(repacked) == sorted([meta["parameter"], "other"])
    np.testing.assert_array_equal(repacked[meta["parameter"]].asnumpy(), flat)


def test_fused_unpack_rejects_wrong_size():
    cell = mx.rnn.FusedRNNCell(3, mode="gru")
    with pytest.raises(ValueError, match="do not fit"):
        cell.unpack_weights({"gru_parameters": mx.nd.zeros((3 * 3 * (4 + 3 + 2) + 1,))})


def test_unfused_cells_take_the_unpacked_names_and_shapes():
    fused = mx.rnn.FusedRNNCell(3, num_layers=2, mode="lstm", bidirectional=True, prefix="f_")
    stack = fused.unfuse()
    states = stack.begin_state(func=mx.sym.Variable)
    out, _ = stack.unroll(2, mx.sym.Variable("data"), begin_state=states, merge_outputs=True)
    arg_shapes, _, _ = out.infer_shape(data=(2, 2, 5), **{s.name: (2, 3) for s in states})
    skip = {"data"} | {s.name for s in states}
    stacked = {n: mx.nd.zeros(s) for n, s in zip(out.list_arguments(), arg_shapes, strict=True) if n not in skip}
    size = 2 * 4 * 3 * (5 + 3 + 2) + 2 * 4 * 3 * (6 + 3 + 2)
    from_fused = fused.unpack_weights({"f_parameters": mx.nd.zeros((size,))})
    from_unfused = stack.unpack_weights(stacked)
    assert {n: a.shape for n, a in from_unfused.items()} == {n: a.shape for n, a in from_fused.items()}
    assert len(from_fused) == 2 * 2 * 2 * 4 * 2


@pytest.mark.parametrize("key", ["lstm_const", "gru_global_one", "lstm_global_one", "tanh_const"])
def test_fused_rnn_initializer_matches_mxnet(key):
    meta = WEIGHTS_META["fused_init"][key]
    klass, kwargs = json.loads(meta["dumps"])
    init = mx.init.FusedRNN(**kwargs)
    assert init.dumps() == meta["dumps"]
    global_init = {"lstm_const": mx.init.Uniform(), "tanh_const": mx.init.Zero()}.get(key, mx.init.One())
    arr = mx.nd.zeros((meta["size"],))
    global_init(mx.init.InitDesc("fused_parameters", attrs={"__init__": meta["dumps"]}), arr)
    np.testing.assert_array_equal(arr.asnumpy(), WEIGHTS[f"init:{key}"])


def test_cell_parameter_init_attributes_match_mxnet():
    ref = WEIGHTS_META["cell_init_attrs"]
    lstm = mx.rnn.LSTMCell(3, forget_bias=2.5)
    assert lstm.params._params["lstm_i2h_bias"].list_attr() == ref["lstm"]
    assert mx.rnn.FusedRNNCell(3, mode="gru", bidirectional=True)._parameter.list_attr() == ref["fused"]


def test_lstm_forget_bias_through_module():
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(5, forget_bias=2.0, prefix="l0_"))
    stack.add(mx.rnn.LSTMCell(5, forget_bias=2.0, prefix="l1_"))
    states = stack.begin_state(func=mx.sym.Variable)
    out, _ = stack.unroll(1, mx.sym.Variable("data"), begin_state=states, merge_outputs=True)
    names = ["data"] + [s.name for s in states]
    mod = mx.mod.Module(out, data_names=names, label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("data", (4, 1, 7))] + [(n, (4, 5)) for n in names[1:]], label_shapes=None)
    mod.init_params(mx.init.Xavier())
    for prefix in ("l0_", "l1_"):
        bias = mod.get_params()[0][f"{prefix}i2h_bias"].asnumpy()
        np.testing.assert_array_equal(bias, np.r_[np.zeros(5), np.full(5, 2.0), np.zeros(10)])


# ---------------------------------------------------------------------- data
def test_encode_sentences_matches_mxnet():
    sentences = DATA_IO["sentences"]
    encoded, vocab = mx.rnn.encode_sentences(sentences, invalid_label=0, start_label=1)
    assert encoded == DATA_IO["encode_new"]["encoded"]
    assert list(vocab.items()) == [tuple(p) for p in DATA_IO["encode_new"]["vocab"]]
    encoded, vocab = mx.rnn.encode_sentences(sentences, start_label=-1)
    assert encoded == DATA_IO["encode_skip_invalid"]["encoded"]
    assert list(vocab.items()) == [tuple(p) for p in DATA_IO["encode_skip_invalid"]["vocab"]]
    ref = DATA_IO["encode_unknown"]
    known = dict(ref["vocab_in"])
    encoded, vocab = mx.rnn.encode_sentences(sentences[:4], vocab=known, start_label=0, unknown_token="<unk>")
    assert encoded == ref["encoded"]
    assert list(vocab.items()) == [tuple(p) for p in ref["vocab"]]
    assert vocab is known


def test_encode_sentences_unknown_token_without_fallback():
    with pytest.raises(AssertionError, match="Unknown token 'c'"):
        mx.rnn.encode_sentences([["a", "c"]], vocab={"a": 0})


def describe(d):
    return [d.name, list(d.shape), d.layout, np.dtype(d.dtype).name]


@pytest.mark.parametrize("key", sorted(DATA_IO["iters"]))
def test_bucket_sentence_iter_matches_mxnet(key, capsys):
    ref = DATA_IO["iters"][key]
    encoded = DATA_IO["encode_new"]["encoded"]
    kwargs = json.loads(json.dumps(ref["kwargs"]))
    random.seed(11)
    np.random.seed(11)
    it = mx.rnn.BucketSentenceIter(encoded, **kwargs)
    assert isinstance(it, mx.io.DataIter)
    assert capsys.readouterr().out == ref["printed"]
    assert it.buckets == ref["buckets"]
    assert it.default_bucket_key == ref["default_bucket_key"]
    assert [describe(d) for d in it.provide_data] == ref["provide_data"]
    assert [describe(d) for d in it.provide_label] == ref["provide_label"]
    for epoch in ref["epochs"]:
        got = []
        for batch in it:
            got.append({
                "bucket_key": batch.bucket_key,
                "pad": batch.pad,
                "data": batch.data[0].asnumpy().tolist(),
                "label": batch.label[0].asnumpy().tolist(),
                "dtype": np.dtype(batch.data[0].dtype).name,
                "provide_data": [describe(d) for d in batch.provide_data],
                "provide_label": [describe(d) for d in batch.provide_label],
            })
        assert got == epoch
        it.reset()


def test_bucket_sentence_iter_bad_layout():
    with pytest.raises(ValueError, match="Invalid layout"):
        mx.rnn.BucketSentenceIter([[1, 2], [3, 4]], 1, layout="CT")


# ---------------------------------------------------------------------- checkpoints
def test_rnn_checkpoint_round_trip(tmp_path):
    cells = [mx.rnn.LSTMCell(3, prefix="a_"), mx.rnn.FusedRNNCell(2, mode="gru", prefix="f_")]
    out, _ = cells[0].unroll(2, mx.sym.Variable("data"), merge_outputs=True)
    rng = np.random.RandomState(1)
    args = {
        "a_i2h_weight": mx.nd.array(rng.rand(12, 4)),
        "a_i2h_bias": mx.nd.array(rng.rand(12)),
        "a_h2h_weight": mx.nd.array(rng.rand(12, 3)),
        "a_h2h_bias": mx.nd.array(rng.rand(12)),
        "f_parameters": mx.nd.array(rng.rand(3 * 2 * (3 + 2 + 2))),
    }
    aux = {"moving": mx.nd.array(rng.rand(2))}
    prefix = str(tmp_path / "model")
    mx.rnn.save_rnn_checkpoint(cells, prefix, 7, out, args, aux)
    saved = mx.nd.load(f"{prefix}-0007.params")
    assert "arg:a_i2h_f_weight" in saved and "arg:f_l0_h2h_z_bias" in saved
    assert "arg:a_i2h_weight" not in saved and "arg:f_parameters" not in saved
    np.testing.assert_array_equal(saved["arg:a_h2h_o_bias"].asnumpy(), args["a_h2h_bias"].asnumpy()[9:])
    sym, arg, aux_loaded = mx.rnn.load_rnn_checkpoint(cells, prefix, 7)
    assert sym.tojson() == out.tojson()
    assert sorted(arg) == sorted(args)
    for name, value in args.items():
        np.testing.assert_array_equal(arg[name].asnumpy(), value.asnumpy())
    np.testing.assert_array_equal(aux_loaded["moving"].asnumpy(), aux["moving"].asnumpy())


def test_do_rnn_checkpoint_period(tmp_path):
    cell = mx.rnn.RNNCell(2, prefix="r_")
    out, _ = cell.unroll(1, mx.sym.Variable("data"), merge_outputs=True)
    args = {n: mx.nd.ones((2, 2)) for n in ("r_i2h_weight", "r_h2h_weight")}
    args.update({n: mx.nd.ones((2,)) for n in ("r_i2h_bias", "r_h2h_bias")})
    callback = mx.rnn.do_rnn_checkpoint(cell, str(tmp_path / "m"), period=2)
    for epoch in range(4):
        callback(epoch, out, args, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m-0002.params", "m-0004.params", "m-symbol.json"]


def test_public_names():
    for name in ("RNNParams", "BaseRNNCell", "RNNCell", "LSTMCell", "GRUCell", "FusedRNNCell",
                 "SequentialRNNCell", "DropoutCell", "ModifierCell", "ZoneoutCell", "ResidualCell",
                 "BidirectionalCell", "BaseConvRNNCell", "ConvRNNCell", "ConvLSTMCell", "ConvGRUCell",
                 "encode_sentences", "BucketSentenceIter", "save_rnn_checkpoint", "load_rnn_checkpoint",
                 "do_rnn_checkpoint", "rnn_unroll"):
        assert hasattr(mx.rnn, name), name
    assert mx.rnn.rnn_cell.LSTMCell is mx.rnn.LSTMCell
    assert mx.rnn.io.BucketSentenceIter is mx.rnn.BucketSentenceIter
    assert mx.rnn.rnn.save_rnn_checkpoint is mx.rnn.save_rnn_checkpoint
    assert mx.init.create(mx.init.FusedRNN(None, 2, 1, "gru").dumps()).__class__ is mx.init.FusedRNN


def test_rnn_unroll_is_deprecated():
    cell = mx.rnn.RNNCell(2, prefix="r_")
    with pytest.warns(UserWarning, match="deprecated"):
        outputs, _ = mx.rnn.rnn_unroll(cell, 2, [mx.sym.Variable("a"), mx.sym.Variable("b")])
    assert [o.name for o in outputs] == ["r_t0_out", "r_t1_out"]

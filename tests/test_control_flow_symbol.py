"""Symbolic control flow (``mx.sym.contrib.foreach``, ``while_loop``, ``cond``): symbols
built as MXNet builds them (its JSON, byte for byte), MXNet-written JSON run forward and
backward against MXNet's numbers (``tests/fixtures/control_flow/``), gradients against
numeric ones, and errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError
from rsmx.symbol import control_flow

HERE = Path(__file__).parent / "fixtures" / "control_flow"
sys.path.insert(0, str(HERE))
from control_flow_cases import CASES, STEPS  # noqa: E402

META = json.loads((HERE / "control_flow.json").read_text())
ARRAYS = np.load(HERE / "control_flow.npz")
# How many of a while_loop's outputs are stacked step outputs.
NUM_STACKED = {"while_counter": 2, "while_matrix": 1}
RUNS = [(name, r) for name in CASES for r in range(META[name]["runs"])]


def build(name: str):
    control_flow._subgraph_counts.clear()
    with mx.name.NameManager():
        return CASES[name](mx)


def stored(name: str, r: int, kind: str) -> dict[str, np.ndarray]:
    prefix = f"{name}/{r}/{kind}/"
    return {k[len(prefix):]: ARRAYS[k] for k in ARRAYS.files if k.startswith(prefix)}


def run(sym, args: dict, heads: list, ctx=None, grad_req="write"):
    ctx = ctx or mx.cpu()
    ex = sym.bind(ctx, {k: mx.nd.array(v, ctx=ctx) for k, v in args.items()},
                  args_grad={k: mx.nd.zeros(v.shape, ctx=ctx) for k, v in args.items()}, grad_req=grad_req)
    outs = [o.asnumpy() for o in ex.forward(is_train=True)]
    ex.backward([mx.nd.array(h, ctx=ctx) for h in heads])
    return outs, {k: g.asnumpy() for k, g in ex.grad_dict.items()}


def check_outputs(name: str, r: int, outs: list) -> None:
    want = stored(name, r, "out")
    assert len(outs) == len(want)
    for j, got in enumerate(outs):
        expect = want[str(j)]
        assert got.shape == expect.shape, (j, got.shape, expect.shape)
        rows = STEPS[name][r] if name in STEPS and j < NUM_STACKED[name] else None
        if rows is not None:
            np.testing.assert_array_equal(got[rows:], 0, err_msg=f"padding of output {j}")
            got, expect = got[:rows], expect[:rows]
        np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6, err_msg=f"output {j}")


@pytest.mark.parametrize("name", list(CASES))
def test_json_is_written_as_mxnet_writes_it(name):
    sym, _ = build(name)
    assert sym.tojson() == META[name]["json"]
    assert sym.list_outputs() == META[name]["outputs"]


@pytest.mark.parametrize(("name", "r"), RUNS)
def test_mxnet_json_runs_as_mxnet_runs_it(name, r, ctx):
    sym = mx.sym.load_json(META[name]["json"])
    args = stored(name, r, "arg")
    heads = [stored(name, r, "head")[str(j)] for j in range(len(sym.list_outputs()))]
    outs, grads = run(sym, args, heads, ctx)
    check_outputs(name, r, outs)
    for k, g in stored(name, r, "grad").items():
        np.testing.assert_allclose(grads[k], g, rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("name", list(CASES))
def test_a_saved_symbol_loads_and_runs_the_same(name, tmp_path):
    sym, _ = build(name)
    sym.save(str(tmp_path / "s.json"))
    loaded = mx.sym.load(str(tmp_path / "s.json"))
    assert loaded.tojson() == sym.tojson()
    args = stored(name, 0, "arg")
    heads = [stored(name, 0, "head")[str(j)] for j in range(len(sym.list_outputs()))]
    a = run(sym, args, heads)
    b = run(loaded, args, heads)
    for x, y in zip(a[0] + list(a[1].values()), b[0] + list(b[1].values()), strict=True):
        np.testing.assert_array_equal(x, y)


def test_shapes_and_types_are_inferred_through_the_body():
    sym, _ = build("foreach_rnn")
    arg, out, aux = sym.infer_shape(data=(4, 3, 5), h0=(3, 6), wx=(6, 5), feat=(3, 2))
    assert dict(zip(sym.list_arguments(), arg, strict=True)) == {
        "data": (4, 3, 5), "h0": (3, 6), "wx": (6, 5), "h2h_weight": (6, 6), "h2h_bias": (6,),
        "feat": (3, 2), "proj_weight": (6, 2), "proj_bias": (6,)}
    assert out == [(4, 3, 6), (3, 6)]
    types = sym.infer_type(data="float64", feat="float64")
    assert types[1] == [np.float64, np.float64]
    sym, _ = build("while_matrix")
    assert sym.infer_shape(x=(2, 3), n=(1,), w=(3, 3))[1] == [(3, 2), (2, 3), (1,)]
    sym, _ = build("cond_branches")
    assert sym.infer_shape(a=(2, 4), b=(2, 4))[1] == [(2, 3), (2, 4)]


def test_gradients_match_numeric_ones():
    data = mx.sym.var("data")
    w = mx.sym.var("w")
    outs, states = mx.sym.contrib.foreach(
        lambda x, s: (mx.sym.sin(x * s[0]), [s[0] + mx.sym.dot(x, w)]), data, [mx.sym.var("s")])
    sym = mx.sym.sum(outs) + mx.sym.sum(states[0])
    rng = np.random.RandomState(0)
    loc = {"data": rng.uniform(-1, 1, (3, 2)), "s": rng.uniform(-1, 1, (2,)), "w": rng.uniform(-1, 1, (2, 2))}
    mx.test_utils.check_numeric_gradient(sym, loc, numeric_eps=1e-4, rtol=1e-2, atol=1e-3, dtype=np.float64)
    i = mx.sym.var("i")
    x = mx.sym.var("x")
    outs, final = mx.sym.contrib.while_loop(
        lambda i, x: i < 2, lambda i, x: (mx.sym.broadcast_mul(mx.sym.exp(x), i), [i + 1, x * x + 0.5]), [i, x], max_iterations=4)
    sym = mx.sym.sum(outs) + mx.sym.sum(final[1])
    loc = {"i": np.array([0.0]), "x": rng.uniform(-0.5, 0.5, (3,))}
    mx.test_utils.check_numeric_gradient(sym, loc, numeric_eps=1e-4, rtol=1e-2, atol=1e-3, dtype=np.float64,
                                         grad_nodes=["x"])


def test_only_the_branch_taken_runs_so_its_gradient_is_clean():
    x = mx.sym.var("x")
    y = mx.sym.contrib.cond(mx.sym.min(x) > 0, lambda: mx.sym.sqrt(x), lambda: x * -1)
    ex = y.bind(mx.cpu(), {"x": mx.nd.array([-4.0, -1.0])}, args_grad={"x": mx.nd.zeros(2)})
    np.testing.assert_array_equal(ex.forward(is_train=True)[0].asnumpy(), [4.0, 1.0])
    ex.backward(mx.nd.ones(2))
    np.testing.assert_array_equal(ex.grad_dict["x"].asnumpy(), [-1.0, -1.0])


def test_a_loop_that_never_steps_gives_zeros_and_its_inputs():
    i = mx.sym.var("i")
    s = mx.sym.var("s")
    outs, final = mx.sym.contrib.while_loop(
        lambda i, s: i < 0, lambda i, s: (s * 2, [i + 1, s + 1]), [i, s], max_iterations=3)
    sym = mx.sym.Group([outs, *final])
    ex = sym.bind(mx.cpu(), {"i": mx.nd.array([5.0]), "s": mx.nd.array([1.0, 2.0])},
                  args_grad={"i": mx.nd.zeros(1), "s": mx.nd.zeros(2)})
    out, fi, fs = (o.asnumpy() for o in ex.forward(is_train=True))
    np.testing.assert_array_equal(out, np.zeros((3, 2)))
    np.testing.assert_array_equal(fs, [1.0, 2.0])
    np.testing.assert_array_equal(fi, [5.0])
    ex.backward([mx.nd.ones((3, 2)), mx.nd.ones(1), mx.nd.array([3.0, 4.0])])
    np.testing.assert_array_equal(ex.grad_dict["s"].asnumpy(), [3.0, 4.0])


def test_add_requests_accumulate_and_repeated_steps_agree():
    sym, shapes = build("foreach_rnn")
    args = stored("foreach_rnn", 0, "arg")
    heads = [stored("foreach_rnn", 0, "head")[str(j)] for j in range(2)]
    _, once = run(sym, args, heads)
    ex = sym.bind(mx.cpu(), {k: mx.nd.array(v) for k, v in args.items()},
                  args_grad={k: mx.nd.zeros(v.shape) for k, v in args.items()}, grad_req="add")
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward([mx.nd.array(h) for h in heads])
    for k, g in once.items():
        np.testing.assert_allclose(ex.grad_dict[k].asnumpy(), 2 * g, rtol=1e-5, atol=1e-6, err_msg=k)


def test_module_trains_an_rnn_written_with_foreach():
    data = mx.sym.var("data")

    def step(x, states):
        h = mx.sym.tanh(mx.sym.FullyConnected(x, num_hidden=8, name="i2h")
                        + mx.sym.FullyConnected(states[0], num_hidden=8, name="h2h"))
        return h, [h]

    _, states = mx.sym.contrib.foreach(step, mx.sym.transpose(data, axes=(1, 0, 2)),
                                       [mx.sym.zeros((16, 8))])
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(states[0], num_hidden=2, name="cls"), name="softmax")
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, (64, 5, 3)).astype("float32")
    y = (x[:, :, 0].sum(axis=1) > 0).astype("float32")
    it = mx.io.NDArrayIter(x, y, batch_size=16, shuffle=True, label_name="softmax_label")
    mod = mx.mod.Module(net, data_names=["data"], label_names=["softmax_label"])
    mod.fit(it, num_epoch=25, optimizer="adam", optimizer_params={"learning_rate": 0.02},
            initializer=mx.init.Xavier())
    score = dict(mod.score(mx.io.NDArrayIter(x, y, batch_size=16, label_name="softmax_label"), "acc"))
    assert score["accuracy"] > 0.9, score


def test_control_flow_nests():
    data = mx.sym.var("data")

    def outer(x, states):
        inner_out, inner_states = mx.sym.contrib.foreach(lambda r, s: (r * s[0], [s[0] + r]), x, [states[0]])
        return inner_out.sum(axis=0), [inner_states[0]]

    outs, states = mx.sym.contrib.foreach(outer, data, [mx.sym.var("s")])
    sym = mx.sym.Group([outs, states[0]])
    x = np.arange(12, dtype="float32").reshape(2, 3, 2) / 10
    s0 = np.array([1.0, -1.0], dtype="float32")
    ex = sym.bind(mx.cpu(), {"data": mx.nd.array(x), "s": mx.nd.array(s0)})
    got = [o.asnumpy() for o in ex.forward()]
    s = s0.copy()
    rows = []
    for t in range(2):
        acc = np.zeros(2, dtype="float32")
        for r in x[t]:
            acc += r * s
            s = s + r
        rows.append(acc)
    np.testing.assert_allclose(got[0], np.stack(rows), rtol=1e-6)
    np.testing.assert_allclose(got[1], s, rtol=1e-6)
    again = mx.sym.load_json(sym.tojson())
    np.testing.assert_allclose(again.bind(mx.cpu(), {"data": mx.nd.array(x), "s": mx.nd.array(s0)})
                               .forward()[0].asnumpy(), got[0], rtol=1e-6)


def test_bad_input_is_a_clear_error():
    x = mx.sym.var("x")
    with pytest.raises(MXNetError, match="max_iterations should be specified"):
        mx.sym.contrib.while_loop(lambda x: x < 1, lambda x: (x, [x]), [x])
    with pytest.raises(MXNetError, match="Number of outputs differs"):
        mx.sym.contrib.cond(x.sum() > 0, lambda: [x, x], lambda: [x])
    with pytest.raises(MXNetError, match="have to be used in the loop body"):
        mx.sym.contrib.foreach(lambda d, s: (s[0] * 2, [s[0] + 1]), x, [mx.sym.var("s")])
    # A condition that is not one value fails when the loop runs, and the executor keeps working.
    outs, final = mx.sym.contrib.while_loop(lambda x: x < 1, lambda x: (x, [x + 1]), [x], max_iterations=2)
    sym = mx.sym.Group([outs, final[0]])
    ex = sym.bind(mx.cpu(), {"x": mx.nd.array([0.0, 0.0])})
    with pytest.raises(MXNetError, match=r"_while_loop: the condition must give one value.*\(2,\)"):
        ex.forward()[0].asnumpy()
    ex = sym.bind(mx.cpu(), {"x": mx.nd.array([0.5])})
    np.testing.assert_array_equal(ex.forward()[1].asnumpy(), [1.5])
    # Data arrays of different lengths.
    outs, _ = mx.sym.contrib.foreach(lambda d, s: (d[0] + d[1], [s[0]]), [x, mx.sym.var("y")], [mx.sym.var("s")])
    with pytest.raises(MXNetError):
        outs.bind(mx.cpu(), {"x": mx.nd.ones((2, 1)), "y": mx.nd.ones((3, 1)), "s": mx.nd.ones(1)}).forward()[0].asnumpy()

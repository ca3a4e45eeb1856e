"""MXNet functions rsmx composes from other operators, common-expression elimination, the
bulk scope, the monitor's backward outputs, shape semantics of saved arrays and more."""

import json

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError, NotImplementedForSymbol

# ---------------------------------------------------------------- composed functions


@pytest.mark.parametrize("num,endpoint", [(0, True), (1, True), (1, False), (7, True), (7, False)])
def test_linspace(num, endpoint):
    expected = np.linspace(2.5, 9.0, num, endpoint=endpoint)
    got = mx.nd.linspace(2.5, 9.0, num, endpoint=endpoint)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-6)
    np.testing.assert_array_equal(mx.nd.linspace(0, 10, 4, dtype="int32").asnumpy(), [0, 3, 6, 10])
    sym = mx.sym.linspace(2.5, 9.0, num, endpoint=endpoint)
    assert sym.list_outputs() == ["linspace0_output"] or sym.name.startswith("linspace")
    np.testing.assert_allclose(sym.eval()[0].asnumpy(), expected, rtol=1e-6)


def test_fill_element_0index():
    lhs = mx.nd.arange(12).reshape((3, 4))
    out = mx.nd.fill_element_0index(lhs, mx.nd.array([-1, -2, -3]), mx.nd.array([0, 3, 1]))
    expected = np.arange(12.0).reshape(3, 4)
    expected[[0, 1, 2], [0, 3, 1]] = [-1, -2, -3]
    np.testing.assert_array_equal(out.asnumpy(), expected)
    np.testing.assert_array_equal(lhs.asnumpy(), np.arange(12.0).reshape(3, 4))


def test_crop_assign_and_slice_assign():
    x = mx.nd.ones((2, 3, 4))
    res = mx.nd._internal._crop_assign(x, mx.nd.zeros((2, 1, 3)), begin=(0, 0, 0),
                                       end=(2, 1, 3), out=x)
    assert res is x
    expected = np.ones((2, 3, 4))
    expected[:, 0:1, 0:3] = 0
    np.testing.assert_array_equal(x.asnumpy(), expected)
    copy = mx.nd._internal._slice_assign_scalar(x, scalar=5, begin=(None, 1), end=(None, 3))
    assert copy is not x
    expected2 = expected.copy()
    expected2[:, 1:3] = 5
    np.testing.assert_array_equal(copy.asnumpy(), expected2)
    np.testing.assert_array_equal(x.asnumpy(), expected)
    x.slice_assign_scalar(7, begin=(0,), end=(1,), step=(1,))
    assert (x.asnumpy()[0] == 7).all()
    x.slice_assign(mx.nd.full((1, 3, 4), 8), begin=(1,), end=(2,), step=())
    assert (x.asnumpy()[1] == 8).all()


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_matches_numpy(mode):
    data = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    width = (0, 0, 0, 0, 1, 2, 3, 1)
    kwargs = {"constant_values": 7.0} if mode == "constant" else {}
    expected = np.pad(data, [(0, 0), (0, 0), (1, 2), (3, 1)], mode=mode, **kwargs)
    got = mx.nd.pad(mx.nd.array(data), mode=mode, pad_width=width, constant_value=7.0)
    np.testing.assert_array_equal(got.asnumpy(), expected)
    np.testing.assert_array_equal(mx.nd.array(data).pad(mode=mode, pad_width=width,
                                                        constant_value=7.0).asnumpy(), expected)
    sym = mx.sym.Pad(mx.sym.var("d"), mode=mode, pad_width=width, constant_value=7.0, name="p")
    assert sym.list_outputs() == ["p_output"]
    np.testing.assert_array_equal(sym.eval(d=mx.nd.array(data))[0].asnumpy(), expected)


def test_pad_gradient_and_checks():
    x = mx.nd.arange(6).reshape((1, 1, 2, 3))
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.pad(x, mode="edge", pad_width=(0, 0, 0, 0, 0, 0, 2, 0))
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy()[0, 0], [[3, 1, 1], [3, 1, 1]])
    with pytest.raises(MXNetError):
        mx.nd.pad(mx.nd.ones((2, 3)), mode="constant", pad_width=(0, 0, 1, 1))
    with pytest.raises(MXNetError):
        mx.nd.pad(x, mode="constant", pad_width=(1, 0, 0, 0, 0, 0, 0, 0))
    with pytest.raises(MXNetError):
        mx.nd.pad(x, mode="wrap", pad_width=(0, 0, 0, 0, 1, 1, 1, 1))


def test_split_v2():
    x = mx.nd.arange(12).reshape((2, 6))
    parts = mx.nd.split_v2(x, (1, 3), axis=1)
    assert [p.shape for p in parts] == [(2, 1), (2, 2), (2, 3)]
    np.testing.assert_array_equal(parts[1].asnumpy(), [[1, 2], [7, 8]])
    assert [p.shape for p in x.split_v2(3, axis=1)] == [(2, 2)] * 3
    assert x.split_v2(1, axis=1).shape == (2, 6)
    assert [p.shape for p in x.split_v2(2, axis=0, squeeze_axis=True)] == [(6,), (6,)]
    with pytest.raises(ValueError):
        x.split_v2(4, axis=1)
    with pytest.raises(ValueError):
        x.split_v2([1, 2], axis=1)
    sym = mx.sym.var("x").split_v2((2,), axis=1)
    outs = sym.eval(x=x)
    assert [o.shape for o in outs] == [(2, 2), (2, 4)]


def test_fluent_methods():
    x = mx.nd.array([[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(x.shape_array().asnumpy(), [1, 3])
    np.testing.assert_array_equal(x.size_array().asnumpy(), [3])
    np.testing.assert_allclose(x.softmin().asnumpy(), mx.nd.softmin(x).asnumpy())
    s = mx.sym.var("x")
    assert s.shape_array().list_outputs() == ["shape_array0_output"]
    assert s.broadcast_axes(axis=0, size=2).name.startswith("broadcast_axes")
    np.testing.assert_array_equal(s.size_array().eval(x=x)[0].asnumpy(), [3])


@pytest.mark.parametrize("method", ["asnumpy", "asscalar", "wait_to_read", "copy", "detach",
                                    "backward", "as_in_context"])
def test_ndarray_only_methods_of_symbol(method):
    with pytest.raises(NotImplementedForSymbol):
        getattr(mx.sym.var("x"), method)()


def test_variable_with_int_shape():
    assert mx.sym.var("b", shape=3).attr("__shape__") == "(3,)"


# ---------------------------------------------------------------- saved shape semantics


def test_save_load_follows_shape_semantics(tmp_path):
    legacy, np_file = str(tmp_path / "legacy"), str(tmp_path / "np")
    mx.nd.save(legacy, [mx.nd.array(np.ones((2, 0, 1))), mx.nd.ones((2, 3))])
    with mx.np_shape(True):
        mx.nd.save(np_file, [mx.nd.array(np.ones(())), mx.nd.ones((2, 3))])
        with pytest.raises(MXNetError):
            mx.nd.load(legacy)
        loaded = mx.nd.load(np_file)
        assert [a.shape for a in loaded] == [(), (2, 3)]
        with open(np_file, "rb") as f:
            assert mx.nd.load_frombuffer(f.read())[0].shape == ()
    with pytest.raises(MXNetError):
        mx.nd.load(np_file)
    with open(np_file, "rb") as f, pytest.raises(MXNetError):
        mx.nd.load_frombuffer(f.read())
    assert [a.shape for a in mx.nd.load(legacy)] == [(2, 0, 1), (2, 3)]


def test_pickle_under_np_shape():
    import pickle

    with mx.np_shape(True):
        a = mx.nd.array([[1.0, 2.0]])
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(a)).asnumpy(), a.asnumpy())


# ---------------------------------------------------------------- common expressions


def _internals_count(sym, cse, monkeypatch, **shapes):
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "1" if cse else "0")
    exe = sym.simple_bind(mx.cpu(), **shapes)
    return exe, len(exe.get_optimized_symbol().get_internals())


@pytest.mark.parametrize("build,savings", [
    (lambda a, b: (a + 1) + (a + 2), 0),
    (lambda a, b: (a + b) + (a + b), 1),
    (lambda a, b: ((a + b) * 2) - ((a + b) * 2), 2),
    (lambda a, b: mx.sym.Group([a * (a + 1), a * (a + 1)]), 1),
    (lambda a, b: mx.sym.Dropout(a) + mx.sym.Dropout(a), 0),
])
def test_eliminate_common_expr(monkeypatch, build, savings):
    sym = build(mx.sym.var("a"), mx.sym.var("b"))
    shapes = {n: (2, 3) for n in sym.list_arguments()}
    plain, n_plain = _internals_count(sym, False, monkeypatch, **shapes)
    merged, n_merged = _internals_count(sym, True, monkeypatch, **shapes)
    assert n_plain - n_merged == savings
    assert merged.get_optimized_symbol().list_arguments() == sym.list_arguments()
    data = {n: mx.nd.array(np.random.rand(2, 3)) for n in shapes}
    outs_plain = plain.forward(is_train=True, **data)
    outs_merged = merged.forward(is_train=True, **data)
    assert len(outs_plain) == len(outs_merged)
    if "Dropout" not in sym.tojson():
        for p, m in zip(outs_plain, outs_merged, strict=True):
            np.testing.assert_allclose(p.asnumpy(), m.asnumpy(), rtol=1e-6)
        plain.backward([mx.nd.ones_like(o) for o in outs_plain])
        merged.backward([mx.nd.ones_like(o) for o in outs_merged])
        for p, m in zip(plain.grad_arrays, merged.grad_arrays, strict=True):
            np.testing.assert_allclose(p.asnumpy(), m.asnumpy(), rtol=1e-6)


def test_merged_duplicate_outputs_get_their_own_arrays(monkeypatch):
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "1")
    a = mx.sym.var("a")
    sym = mx.sym.Group([a * 2, a * 2])
    exe = sym.simple_bind(mx.cpu(), a=(2,))
    optimized = exe.get_optimized_symbol()
    assert [n["op"] for n in json.loads(optimized.tojson())["nodes"]] == [
        "null", "_mul_scalar", "_copy"]
    outs = exe.forward(a=mx.nd.array([1, 2]))
    outs[0][:] = 0
    np.testing.assert_array_equal(outs[1].asnumpy(), [2, 4])
    assert list(exe.output_dict) == sym.list_outputs()


def test_batchnorm_is_never_merged(monkeypatch):
    from rsmx.symbol.cse import eliminate_common_expr

    a = mx.sym.var("a")
    bn = mx.sym.BatchNorm(a, name="bn")
    sym = mx.sym.BatchNorm(a, gamma=mx.sym.var("bn_gamma"), beta=mx.sym.var("bn_beta"),
                           moving_mean=mx.sym.var("bn_moving_mean"),
                           moving_var=mx.sym.var("bn_moving_var"), name="bn2") + bn
    assert eliminate_common_expr(sym) is sym


# ---------------------------------------------------------------- engine, monitor, init


def test_bulk_scope_restores_the_size():
    assert mx.engine.set_bulk_size(4) == 0
    with mx.engine.bulk(10):
        assert mx.engine.set_bulk_size(10) == 10
        x = mx.nd.ones((3,))
        for _ in range(20):
            x += 1
    assert mx.engine.set_bulk_size(0) == 4
    np.testing.assert_array_equal(x.asnumpy(), 21)


def test_monitor_sees_backward_outputs():
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc")
    net = mx.sym.relu(net, name="r")
    exe = net.simple_bind(mx.cpu(), data=(1, 3))
    seen = []
    exe.set_monitor_callback(lambda name, arr: seen.append(name))
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((1, 2)))
    assert seen == ["fc_output", "r_output", "r_backward_output", "fc_backward_output0",
                    "fc_backward_output1", "fc_backward_output2"]
    seen.clear()
    exe.set_monitor_callback(lambda name, arr: seen.append(name), monitor_all=True)
    exe.forward(is_train=True)
    assert seen == ["data", "fc_data", "fc_weight", "fc_weight", "fc_bias", "fc_bias",
                    "fc_output", "r_data", "r_output"]


def test_prelu_slope_starts_at_a_quarter():
    sym = mx.sym.LeakyReLU(mx.sym.var("data"), act_type="prelu", name="lr")
    assert json.loads(sym.attr_dict()["lr_gamma"]["__init__"]) == ["Constant", {"value": 0.25}]
    mod = mx.mod.Module(sym, label_names=None)
    mod.bind(data_shapes=[("data", (4, 5))])
    mod.init_params()
    np.testing.assert_array_equal(mod.get_params()[0]["lr_gamma"].asnumpy(), 0.25)
    given = mx.sym.var("g", init=mx.init.One())
    sym = mx.sym.LeakyReLU(mx.sym.var("data"), gamma=given, act_type="prelu")
    assert json.loads(sym.attr_dict()["g"]["__init__"])[0] == "one"


def test_get_symbol():
    x = mx.nd.ones((1,))
    x.attach_grad()
    with mx.autograd.record():
        y = x * x + 1
    with pytest.raises(TypeError):
        mx.autograd.get_symbol(np.ones(1))
    if not hasattr(mx._core, "autograd_get_symbol"):
        with pytest.raises(NotImplementedError):
            mx.autograd.get_symbol(y)
        return
    assert len(mx.autograd.get_symbol(y).list_arguments()) == 1


def test_reshaped_executor_keeps_the_monitor():
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc")
    exe = net.simple_bind(mx.cpu(), data=(1, 3))
    seen = []
    exe.set_monitor_callback(lambda name, arr: seen.append((name, arr.shape)))
    exe.reshape(allow_up_sizing=True, data=(4, 3)).forward()
    assert seen == [("fc_output", (4, 2))]

"""mx.operator: custom operators in mx.nd and mx.sym, their state, errors, the profiler's
view of them, the legacy NumpyOp/NDArrayOp, and a network MXNet 1.9.1 wrote."""

from __future__ import annotations

import json
import pathlib
import threading
import time
import warnings

import numpy as np
import pytest
import rsmx as mx
from rsmx.test_utils import check_numeric_gradient

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "custom"


class _Sqr(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])


@mx.operator.register("test_sqr")
class _SqrProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Sqr()


class _Scale(mx.operator.CustomOp):
    """Multiplies by `factor` and counts its forward passes in an auxiliary state."""

    def __init__(self, factor):
        self.factor = factor

    def forward(self, is_train, req, in_data, out_data, aux):
        aux[0][:] = aux[0] + 1
        self.assign(out_data[0], req[0], in_data[0] * self.factor)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0] * self.factor)


@mx.operator.register("scale")
class _ScaleProp(mx.operator.CustomOpProp):
    created: list[tuple] = []

    def __init__(self, factor):
        super().__init__(need_top_grad=True)
        self.factor = float(factor)

    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [[1]]

    def create_operator(self, ctx, shapes, dtypes):
        _ScaleProp.created.append((ctx, shapes, dtypes))
        return _Scale(self.factor)


class _Softmax(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].asnumpy()
        y = np.exp(x - x.max(axis=1, keepdims=True))
        y /= y.sum(axis=1, keepdims=True)
        self.assign(out_data[0], req[0], mx.nd.array(y))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        label = in_data[1].asnumpy().ravel().astype(int)
        y = out_data[0].asnumpy()
        y[np.arange(label.shape[0]), label] -= 1.0
        self.assign(in_grad[0], req[0], mx.nd.array(y))


@mx.operator.register("test_softmax")
class _SoftmaxProp(mx.operator.CustomOpProp):
    """A loss layer: its backward needs no output gradient."""

    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def infer_shape(self, in_shape):
        return [in_shape[0], (in_shape[0][0],)], [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Softmax()


def test_imperative_forward_and_autograd(ctx) -> None:
    v = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    x = mx.nd.array(v, ctx=ctx)
    np.testing.assert_allclose(mx.nd.Custom(x, op_type="test_sqr").asnumpy(), v * v)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Custom(x, op_type="test_sqr")
        z = (y * 3).sum()
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 6 * v)
    assert y.context == ctx


def test_symbolic_forward_backward_and_numeric_gradient() -> None:
    data = mx.sym.Variable("data")
    sym = mx.sym.Custom(data=data, op_type="test_sqr", name="sqr")
    assert sym.list_arguments() == ["data"] and sym.list_outputs() == ["sqr_output"]
    x = np.random.uniform(-1, 1, (4, 5)).astype(np.float32)
    check_numeric_gradient(sym, [x])
    check_numeric_gradient(mx.sym.Custom(data * 2, op_type="test_sqr") + data, [x])


def test_attributes_reach_the_property_as_strings_and_aux_states_are_written() -> None:
    data = mx.sym.Variable("data")
    sym = mx.sym.Custom(data, op_type="scale", factor=2.5, name="s")
    assert sym.list_auxiliary_states() == ["s_count"]
    assert sym.attr("factor") == "2.5"
    _ScaleProp.created.clear()
    ex = sym.simple_bind(mx.cpu(), data=(2, 3))
    assert len(_ScaleProp.created) == 1
    ctx, shapes, dtypes = _ScaleProp.created[0]
    assert ctx == mx.cpu() and shapes == [[2, 3], [1]] and dtypes == [0, 0]
    x = mx.nd.ones((2, 3))
    for _ in range(3):
        ex.forward(is_train=True, data=x)
        ex.backward(mx.nd.ones((2, 3)))
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), np.full((2, 3), 2.5))
    np.testing.assert_allclose(ex.grad_dict["data"].asnumpy(), np.full((2, 3), 2.5))
    assert ex.aux_dict["s_count"].asnumpy().tolist() == [3.0]


def test_keyword_inputs_and_a_loss_layer_without_output_gradient() -> None:
    x = mx.nd.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    label = mx.nd.array([2, 0])
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Custom(label=label, data=x, op_type="test_softmax")
    y.backward()
    p = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    np.testing.assert_allclose(y.asnumpy()[0], p, rtol=1e-5)
    expect = np.vstack([p - [0, 0, 1], np.full(3, 1 / 3) - [1, 0, 0]])
    np.testing.assert_allclose(x.grad.asnumpy(), expect, rtol=1e-5, atol=1e-6)


def test_module_trains_through_a_custom_loss() -> None:
    rng = np.random.RandomState(1)
    x = rng.normal(size=(200, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    net = mx.sym.Custom(data=fc, label=mx.sym.Variable("softmax_label"), op_type="test_softmax", name="softmax")
    it = mx.io.NDArrayIter(x, y, batch_size=20, shuffle=True)
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.fit(it, num_epoch=8, optimizer_params={"learning_rate": 0.1})
    score = dict(mod.score(mx.io.NDArrayIter(x, y, batch_size=20), "acc"))
    assert score["accuracy"] > 0.9


def test_no_inputs_and_the_symbol_json_round_trip() -> None:
    @mx.operator.register("test_ones")
    class _OnesProp(mx.operator.CustomOpProp):
        def __init__(self, rows, cols):
            super().__init__()
            self.shape = (int(rows), int(cols))

        def list_arguments(self):
            return []

        def infer_shape(self, in_shape):
            return [], [self.shape], []

        def infer_type(self, in_type):
            return [], [np.float32], []

        def create_operator(self, ctx, shapes, dtypes):
            outer = self

            class _Ones(mx.operator.CustomOp):
                def forward(self, is_train, req, in_data, out_data, aux):
                    self.assign(out_data[0], req[0], mx.nd.ones(outer.shape))

            return _Ones()

    out = mx.nd.Custom(rows=2, cols=3, op_type="test_ones")
    assert out.asnumpy().tolist() == [[1.0] * 3] * 2
    sym = mx.sym.Custom(data=mx.sym.Variable("x"), op_type="test_sqr", name="q")
    again = mx.sym.load_json(sym.tojson())
    node = json.loads(again.tojson())["nodes"][1]
    assert node["op"] == "Custom" and node["attrs"] == {"op_type": "test_sqr"}
    ex = again.bind(mx.cpu(), {"x": mx.nd.array([3.0])})
    assert ex.forward()[0].asnumpy().tolist() == [9.0]


def test_a_network_mxnet_wrote_loads_and_matches_its_numbers() -> None:
    ref = np.load(FIXTURES / "scale.npz")
    net = mx.sym.load(str(FIXTURES / "scale-symbol.json"))
    assert net.list_auxiliary_states() == ["scale_count"]
    names = ["data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    args = {k: mx.nd.array(ref[k]) for k in names}
    grads = {k: mx.nd.zeros(ref[k].shape) for k in names}
    ex = net.bind(mx.cpu(), args, args_grad=grads, aux_states={"scale_count": mx.nd.zeros((1,))})
    ex.forward(is_train=True)
    ex.backward(mx.nd.ones((3, 2)))
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), ref["output"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads["data"].asnumpy(), ref["grad_data"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads["fc1_weight"].asnumpy(), ref["grad_fc1_weight"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.aux_dict["scale_count"].asnumpy(), ref["count"])


def _failing_prop(name: str, where: str):
    class _Op(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            if where == "forward":
                raise ValueError("the user's forward broke")
            if where == "pushed":
                # A shape error inside an op the user code pushes.
                out_data[0][:] = mx.nd.dot(in_data[0], mx.nd.ones((7, 7)))
                return
            self.assign(out_data[0], req[0], in_data[0])

    @mx.operator.register(name)
    class _Prop(mx.operator.CustomOpProp):
        def infer_shape(self, in_shape):
            if where == "infer_shape":
                raise KeyError("no shape for you")
            return in_shape, [in_shape[0]], []

        def create_operator(self, ctx, shapes, dtypes):
            return _Op()

    return _Prop


def test_an_error_in_user_code_surfaces_at_the_next_wait_and_the_engine_goes_on() -> None:
    _failing_prop("test_fail_forward", "forward")
    x = mx.nd.ones((2, 3))
    y = mx.nd.Custom(x, op_type="test_fail_forward")
    with pytest.raises(mx.MXNetError) as e:
        y.asnumpy()
    text = str(e.value)
    assert "test_fail_forward" in text and "the user's forward broke" in text and "Traceback" in text
    assert (x + 1).asnumpy().tolist() == [[2.0] * 3] * 2
    mx.nd.waitall()


def test_an_error_in_an_op_the_user_pushed_fails_the_custom_op() -> None:
    _failing_prop("test_fail_pushed", "pushed")
    y = mx.nd.Custom(mx.nd.ones((2, 3)), op_type="test_fail_pushed")
    with pytest.raises(mx.MXNetError, match="dot"):
        y.wait_to_read()
    mx.nd.waitall()


def test_errors_at_the_call_name_what_was_wrong() -> None:
    _failing_prop("test_fail_shape", "infer_shape")
    with pytest.raises(mx.MXNetError, match="no shape for you"):
        mx.nd.Custom(mx.nd.ones((2,)), op_type="test_fail_shape")
    with pytest.raises(mx.MXNetError, match="Cannot find custom operator no_such_op"):
        mx.nd.Custom(mx.nd.ones((2,)), op_type="no_such_op")
    with pytest.raises(mx.MXNetError, match="op_type"):
        mx.nd.Custom(mx.nd.ones((2,)))
    with pytest.raises(mx.MXNetError, match="unknown input 'nope'"):
        mx.nd.Custom(nope=mx.nd.ones((2,)), op_type="test_sqr")
    with pytest.raises(mx.MXNetError, match="Cannot find custom operator"):
        mx.sym.Custom(mx.sym.Variable("x"), op_type="no_such_op")


def test_a_custom_op_inside_another_and_from_many_threads() -> None:
    @mx.operator.register("test_outer")
    class _OuterProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            class _Outer(mx.operator.CustomOp):
                def forward(self, is_train, req, in_data, out_data, aux):
                    inner = mx.nd.Custom(in_data[0], op_type="test_sqr")
                    # Waits for the inner op from inside the outer one's code.
                    self.assign(out_data[0], req[0], mx.nd.array(inner.asnumpy() + 1))

            return _Outer()

    x = mx.nd.array([2.0, 3.0])
    assert mx.nd.Custom(x, op_type="test_outer").asnumpy().tolist() == [5.0, 10.0]

    results: dict[int, list[float]] = {}

    def work(i: int) -> None:
        a = mx.nd.array([float(i)])
        for _ in range(5):
            a = mx.nd.Custom(a, op_type="test_sqr") ** 0.5 + 1
        results[i] = a.asnumpy().tolist()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {i: [float(i + 5)] for i in range(4)}


def test_the_profiler_names_the_code_of_a_custom_op(tmp_path) -> None:
    mx.profiler.set_config(profile_all=True, aggregate_stats=True, filename=str(tmp_path / "p.json"))
    mx.profiler.set_state("run")
    mx.profiler.dumps(reset=True)
    x = mx.nd.ones((3,))
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Custom(x, op_type="test_sqr")
    y.backward()
    mx.nd.waitall()
    mx.profiler.set_state("stop")
    stats = json.loads(mx.profiler.dumps(format="json"))["Time"]["Custom Operator"]
    assert "test_sqr::pure_python" in stats and "_backward_test_sqr::pure_python" in stats
    assert "test_sqr::broadcast_mul" in stats and "_backward_test_sqr::_mul_scalar" in stats


def test_legacy_numpy_and_ndarray_ops() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)

        class _NumpyDouble(mx.operator.NumpyOp):
            def __init__(self):
                super().__init__(need_top_grad=True)

            def forward(self, in_data, out_data):
                out_data[0][:] = in_data[0] * 2

            def backward(self, out_grad, in_data, out_data, in_grad):
                in_grad[0][:] = out_grad[0] * 2

        class _NDArrayNeg(mx.operator.NDArrayOp):
            def forward(self, in_data, out_data):
                out_data[0][:] = -in_data[0]

            def backward(self, out_grad, in_data, out_data, in_grad):
                in_grad[0][:] = -out_grad[0]

        data = mx.sym.Variable("data")
        net = _NDArrayNeg()(data=_NumpyDouble()(data=data, name="dbl"), name="neg")
    assert net.list_arguments() == ["data"]
    ex = net.simple_bind(mx.cpu(), data=(2,))
    ex.forward(is_train=True, data=mx.nd.array([1.0, 2.0]))
    ex.backward(mx.nd.array([1.0, 10.0]))
    assert ex.outputs[0].asnumpy().tolist() == [-2.0, -4.0]
    assert ex.grad_dict["data"].asnumpy().tolist() == [-2.0, -20.0]


def test_operator_listing() -> None:
    names = mx.operator.get_all_registered_operators()
    assert "Custom" in names and "FullyConnected" in names
    args = mx.operator.get_operator_arguments("FullyConnected")
    assert args.names[:3] == ["data", "weight", "bias"]
    assert args.types[3] == "int, required" and args.narg == len(args.names)


class _Remember(mx.operator.CustomOp):
    """Keeps what its forward saw for its backward, which declares no forward array."""

    def forward(self, is_train, req, in_data, out_data, aux):
        time.sleep(0.05)
        self.seen = in_data[0].asnumpy()
        self.assign(out_data[0], req[0], in_data[0] * 2)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0] * mx.nd.array(self.seen))


@mx.operator.register("test_remember")
class _RememberProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return out_grad

    def create_operator(self, ctx, shapes, dtypes):
        return _Remember()


def test_the_backward_runs_after_the_forward_whatever_it_declares() -> None:
    # The output's gradient reaches the backward without reading any forward array, so
    # only the op's own ordering keeps the backward after the forward.
    y = mx.sym.Custom(mx.sym.var("x"), op_type="test_remember") * 3
    x = np.arange(4, dtype="float32")
    for _ in range(3):
        ex = y.bind(mx.cpu(), {"x": mx.nd.array(x)}, args_grad={"x": mx.nd.zeros(4)})
        ex.forward(is_train=True)
        ex.backward(mx.nd.ones(4))
        np.testing.assert_array_equal(ex.grad_dict["x"].asnumpy(), 3 * x)

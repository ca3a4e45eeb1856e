"""Symbol composition, naming, attributes, inference and MXNet's JSON."""

import json

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError


def mlp():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, name="fc1", num_hidden=128)
    net = mx.sym.Activation(net, name="relu1", act_type="relu")
    net = mx.sym.FullyConnected(net, name="fc2", num_hidden=10)
    return mx.sym.SoftmaxOutput(net, name="softmax")


def test_lists_and_inference():
    net = mlp()
    assert net.list_arguments() == [
        "data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "softmax_label"
    ]
    assert net.list_outputs() == ["softmax_output"]
    assert net.list_auxiliary_states() == []
    arg, out, aux = net.infer_shape(data=(100, 100))
    assert arg == [(100, 100), (128, 100), (128,), (10, 128), (10,), (100,)]
    assert out == [(100, 10)]
    assert aux == []
    arg_t, out_t, _ = net.infer_type(data="float32")
    assert arg_t == [np.float32] * 6 and out_t == [np.float32]
    assert net.infer_shape_partial() == ([(), (), (), (), (), ()], [()], [])
    with pytest.warns(UserWarning):
        assert net.infer_shape() == (None, None, None)


def test_shape_conflict_names_the_operator():
    with pytest.raises(MXNetError, match="fc1") as e:
        mlp().infer_shape(data=(100, 100), fc1_weight=(3, 3))
    assert "(128, 100)" in str(e.value) or "128" in str(e.value)


def test_automatic_names():
    with mx.name.NameManager():
        a = mx.sym.Variable("a")
        b = mx.sym.var("b")
        c = a + b
        d = a * 2
        e = 2 - a
        f = (c + d) / e
        assert f.name == "_div0"
        assert f.get_internals().list_outputs() == [
            "a", "b", "_plus0_output", "_mulscalar0_output", "_plus1_output",
            "_rminusscalar0_output", "_div0_output",
        ]
        fc = mx.sym.FullyConnected(a, num_hidden=3)
        assert fc.list_arguments() == ["a", "fullyconnected0_weight", "fullyconnected0_bias"]
        cat = mx.sym.concat(a, b, dim=0)
        assert cat.name == "concat0"
        assert json.loads(cat.tojson())["nodes"][2]["op"] == "Concat"


def test_group_children_indexing():
    net = mlp()
    assert net.get_children().list_outputs() == ["fc2_output", "softmax_label"]
    internals = net.get_internals()
    assert internals["fc1_output"].list_outputs() == ["fc1_output"]
    assert internals[3].list_outputs() == ["fc1_output"]
    with pytest.raises(MXNetError):
        internals["nope"]
    d = mx.sym.Variable("c", shape=(2, 3)) * 2
    g = mx.sym.Group([net, d])
    assert len(g) == 2
    assert g.list_outputs() == ["softmax_output", d.list_outputs()[0]]
    assert [s.list_outputs()[0] for s in g] == g.list_outputs()
    split = mx.sym.split(mx.sym.Variable("x"), num_outputs=3, name="sp")
    assert split.list_outputs() == ["sp_output0", "sp_output1", "sp_output2"]
    assert split[1].list_outputs() == ["sp_output1"]
    assert mx.sym.Variable("v").get_children() is None


def test_batchnorm_aux_states():
    bn = mx.sym.BatchNorm(mx.sym.Variable("a"), name="bn")
    assert bn.list_outputs() == ["bn_output"]
    assert bn.list_arguments() == ["a", "bn_gamma", "bn_beta"]
    assert bn.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    assert bn.list_inputs() == ["a", "bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var"]
    arg, out, aux = bn.infer_shape(a=(2, 3, 4, 4))
    assert arg == [(2, 3, 4, 4), (3,), (3,)] and aux == [(3,), (3,)] and out == [(2, 3, 4, 4)]


def test_batchnorm_moving_statistics_carry_their_initializers():
    bn = mx.sym.BatchNorm(mx.sym.Variable("a"), name="bn", eps=0.01)
    attrs = bn.attr_dict()
    assert attrs["bn_moving_mean"] == {"__init__": '["zero", {}]', "eps": "0.01"}
    assert attrs["bn_moving_var"] == {"__init__": '["one", {}]', "eps": "0.01"}
    assert attrs["bn_gamma"] == {"eps": "0.01"}


def test_variable_attributes():
    a = mx.sym.Variable("a", shape=(2, 3), dtype="float16", lr_mult=2.0, wd_mult=0.5,
                        attr={"foo": "bar"})
    d = a.attr_dict()["a"]
    assert d["__shape__"] == "(2, 3)"
    assert d["__dtype__"] == "2"
    assert d["__lr_mult__"] == "2.0" and d["lr_mult"] == "2.0"
    assert d["__wd_mult__"] == "0.5" and d["wd_mult"] == "0.5"
    assert d["foo"] == "bar"
    assert a.attr("lr_mult") == "2.0"
    assert a.attr("missing") is None
    assert (a * 2).infer_shape()[1] == [(2, 3)]
    assert (a * 2).infer_type()[1] == [np.float16]
    with pytest.raises(ValueError):
        mx.sym.Variable("x", badattr=1)
    a._set_attr(ctx_group="dev1")
    assert a.attr_dict()["a"]["__ctx_group__"] == "dev1"


def test_attr_scope_and_op_attributes():
    with mx.AttrScope(ctx_group="g1"):
        fc = mx.sym.FullyConnected(mx.sym.Variable("d"), num_hidden=4, name="fc",
                                   attr={"__x__": "y"})
    attrs = fc.attr_dict()
    assert attrs["fc"] == {"num_hidden": "4", "__ctx_group__": "g1", "ctx_group": "g1",
                           "__x__": "y"}
    # As in MXNet, the weight and bias variables carry the node's attributes.
    assert attrs["fc_weight"]["num_hidden"] == "4"
    with pytest.raises(MXNetError, match="foo"):
        mx.sym.FullyConnected(mx.sym.Variable("d"), num_hidden=4, attr={"foo": "bar"})


def test_bad_composition():
    a = mx.sym.Variable("a")
    with pytest.raises(MXNetError, match="num_hidden"):
        mx.sym.FullyConnected(a)
    with pytest.raises(MXNetError, match="num_hidden"):
        mx.sym.FullyConnected(a, num_hidden="abc")
    with pytest.raises(MXNetError, match="nonsense"):
        mx.sym.FullyConnected(data=a, nonsense=a, num_hidden=2)
    g = mx.sym.Group([a, a * 2])
    with pytest.raises(MXNetError, match="one output"):
        mx.sym.relu(g)


def test_json_round_trip_and_format():
    net = mlp()
    text = net.tojson()
    back = mx.sym.load_json(text)
    assert back.tojson() == text
    assert back.list_arguments() == net.list_arguments()
    graph = json.loads(text)
    assert graph["attrs"] == {"mxnet_version": ["int", 10901]}
    assert graph["heads"] == [[9, 0, 0]]
    assert graph["arg_nodes"] == [0, 1, 2, 5, 6, 8]
    # Single-entry maps are written inline, as MXNet writes them.
    assert '"attrs": {"num_hidden": "128"}, ' in text
    # More than ten list items go one per line.
    assert '"node_row_ptr": [\n    0, \n' in text


def test_old_json_format():
    old = {
        "nodes": [
            {"op": "null", "param": {}, "name": "data", "inputs": [], "backward_source_id": -1,
             "attr": {"ctx_group": "stage1"}},
            {"op": "null", "param": {}, "name": "fc_weight", "inputs": [],
             "backward_source_id": -1},
            {"op": "null", "param": {}, "name": "fc_bias", "inputs": [],
             "backward_source_id": -1},
            {"op": "FullyConnected", "param": {"no_bias": "False", "num_hidden": "7"},
             "name": "fc", "inputs": [[0, 0], [1, 0], [2, 0]], "backward_source_id": -1},
        ],
        "arg_nodes": [0, 1, 2],
        "heads": [[3, 0]],
    }
    s = mx.sym.load_json(json.dumps(old))
    assert s.list_arguments() == ["data", "fc_weight", "fc_bias"]
    assert s.infer_shape(data=(2, 5))[1] == [(2, 7)]
    assert s.attr_dict()["data"]["ctx_group"] == "stage1"


@pytest.mark.parametrize(
    "text, match",
    [
        ("not json", "JSON"),
        ('{"nodes": [{"op": "NoSuchOp", "name": "x", "inputs": []}], "heads": [[0, 0, 0]]}',
         "NoSuchOp"),
        ('{"nodes": [{"op": "null", "name": "d", "inputs": []}, {"op": "FullyConnected", '
         '"name": "fc", "attrs": {"num_hidden": "abc"}, "inputs": [[0, 0, 0]]}], '
         '"heads": [[1, 0, 0]]}', "fc"),
        ('{"nodes": [{"op": "null", "name": "d", "inputs": [[3, 0, 0]]}], "heads": [[0, 0, 0]]}',
         "node"),
        ('{"nodes": [], "heads": [[4, 0, 0]]}', "missing node"),
    ],
)
def test_bad_json(text, match):
    with pytest.raises(MXNetError, match=match):
        mx.sym.load_json(text)


def test_save_load_file(tmp_path):
    net = mlp()
    f = tmp_path / "net.json"
    net.save(str(f))
    assert mx.sym.load(str(f)).tojson() == net.tojson()
    with pytest.raises(MXNetError):
        mx.sym.load(str(tmp_path / "missing.json"))


def test_compose_call():
    x = mx.sym.Variable("x")
    inner = mx.sym.FullyConnected(x, num_hidden=3, name="fc")
    data = mx.sym.Variable("data")
    composed = inner(x=mx.sym.relu(data, name="r"))
    assert composed.list_arguments() == ["data", "fc_weight", "fc_bias"]
    assert inner.list_arguments() == ["x", "fc_weight", "fc_bias"]


def test_pickle_and_copy():
    import copy
    import pickle

    net = mlp()
    assert pickle.loads(pickle.dumps(net)).tojson() == net.tojson()
    assert copy.deepcopy(net).tojson() == net.tojson()


def test_operator_docstrings_show_declared_attributes():
    for f in (mx.nd.FullyConnected, mx.sym.FullyConnected):
        doc = f.__doc__
        assert "num_hidden : int, required" in doc
        assert "flatten : boolean, optional, default=True" in doc
        assert "Whether to disable bias parameter." in doc


def test_operator_docstrings_list_types_and_defaults_beyond_nn():
    for f in (mx.nd.sum, mx.sym.sum):
        doc = f.__doc__
        assert "axis : Shape or None, optional, default=None" in doc
        assert "keepdims : boolean, optional, default=False" in doc
        assert "exclude : boolean, optional, default=False" in doc
        assert "The axis or axes along which to perform the reduction." in doc
    for f in (mx.nd.slice, mx.sym.slice):
        doc = f.__doc__
        assert "begin : Shape(tuple), required" in doc
        assert "end : Shape(tuple), required" in doc
        assert "step : Shape(tuple), optional, default=()" in doc
        assert "starting indices for the slice operation" in doc
    doc = mx.nd.topk.__doc__
    assert "ret_typ : {'both', 'indices', 'mask', 'value'}, optional, default='indices'" in doc
    assert "dtype : {'float16', 'float32', 'float64', 'int32', 'int64', 'uint8'}" in doc
    assert "lr : float, required" in mx.nd.sgd_update.__doc__
    assert "depth : int, required" in mx.sym.one_hot.__doc__


def test_lr_mult_and_wd_mult_on_an_operator_are_node_attributes() -> None:
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc", lr_mult=3, wd_mult=0)
    attrs = fc.attr_dict()
    for node in ("fc", "fc_weight", "fc_bias"):
        assert attrs[node]["__lr_mult__"] == "3" and attrs[node]["__wd_mult__"] == "0"
    mod = mx.mod.Module(fc, label_names=None)
    mod.bind([("data", (2, 4))])
    mod.init_params()
    mod.init_optimizer()
    assert mod._optimizer.lr_mult == {"fc_weight": 3.0, "fc_bias": 3.0}
    assert mod._optimizer.wd_mult == {"fc_weight": 0.0, "fc_bias": 0.0}
    # Imperative calls have no node to keep them on.
    out = mx.nd.FullyConnected(mx.nd.ones((2, 4)), mx.nd.ones((3, 4)), mx.nd.zeros(3), num_hidden=3, lr_mult=2)
    assert out.shape == (2, 3)


def test_children_of_a_multi_output_node_are_listed_once():
    sliced = mx.sym.SliceChannel(mx.sym.Variable("data"), num_outputs=3, name="slice")
    assert sliced.get_children().list_outputs() == ["data"]
    both = mx.sym.Group([sliced[0], mx.sym.Variable("w") * 2])
    assert both.get_children().list_outputs() == ["data", "w"]
    assert mx.sym.Group([mx.sym.Variable("a"), mx.sym.Variable("b")]).get_children() is None


def test_abs_of_a_symbol():
    x = mx.sym.Variable("x")
    out = abs(x).eval(x=mx.nd.array([-1.5, 2]))[0]
    assert out.asnumpy().tolist() == [1.5, 2]


def test_atomic_symbol_keeps_the_operator_without_inputs():
    data, p, h0, h1 = (mx.sym.Variable(n) for n in ("data", "param", "h0", "h1"))
    s = mx.sym.RNN(data, p, h0, h1, state_size=10, num_layers=2, bidirectional=True,
                   state_outputs=True, mode="lstm")
    atomic = s._gen_atomic_symbol()
    assert len(atomic.list_outputs()) == 3
    assert json.loads(atomic.tojson())["nodes"][-1]["attrs"] == json.loads(s.tojson())["nodes"][-1]["attrs"]
    again = atomic(data, p, h0, h1)
    assert again.list_arguments() == ["data", "param", "h0", "h1"]
    with pytest.raises(MXNetError, match="nongrouped"):
        mx.sym.Group([data + 1, p * 2])._gen_atomic_symbol()


def test_json_under_numpy_shape_semantics():
    from rsmx.util import np_shape

    weight = mx.sym.var("weight", shape=(128, 0))
    net = mx.sym.FullyConnected(mx.sym.var("data"), weight, num_hidden=128)
    legacy = net.tojson()
    assert "is_np_shape" not in json.loads(legacy)["attrs"]
    with np_shape(True):
        marked = json.loads(net.tojson())
        assert marked["attrs"]["is_np_shape"] == ["int", 1]
        # A graph saved without the semantics has 0 for unknown dims (MXNet: "[128,-1]").
        loaded = mx.sym.load_json(legacy)
        assert loaded.get_internals()["weight"].attr("__shape__") == "[128,-1]"
        arg_shapes, out_shapes, _ = loaded.infer_shape(data=(10, 784))
    assert arg_shapes == [(10, 784), (128, 784), (128,)] and out_shapes == [(10, 128)]
    assert mx.sym.load_json(legacy).tojson() == legacy


def test_symbol_keeps_fluent_shape_methods():
    x = mx.sym.Variable("x")
    out = x.expand_dims(axis=0).squeeze(axis=0).flatten().broadcast_to(shape=(2, 3))
    assert out.eval(x=mx.nd.array([[1], [2]]))[0].asnumpy().tolist() == [[1] * 3, [2] * 3]


def test_cast_gives_its_dtype_before_its_input_is_known():
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(mx.sym.Cast(data, dtype="float32"), num_hidden=3, name="fc")
    arg, out, _ = fc.infer_type_partial()
    assert arg == [None, np.float32, np.float32] and out == [np.float32]
    arg, out, _ = fc.infer_type(data=np.float16)
    assert arg == [np.float16, np.float32, np.float32] and out == [np.float32]


def test_positional_none_leaves_an_input_out():
    # As MXNet's generated functions: positional arguments fill the inputs in order.
    x, w, b = mx.sym.Variable("x"), mx.sym.Variable("w"), mx.sym.Variable("b")
    conv = mx.sym.Convolution(x, w, None, num_filter=1, kernel=(3,), no_bias=True)
    assert conv.list_arguments() == ["x", "w"]
    fc = mx.sym.FullyConnected(x, None, b, num_hidden=2, name="fc")
    assert fc.list_arguments() == ["x", "fc_weight", "b"]

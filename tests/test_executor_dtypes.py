"""Executors over operators whose inputs have different dtypes: bound graphs infer each
gradient's dtype from its own input (an index's gradient is zeros of the index dtype)."""

import numpy as np
import pytest
import rsmx as mx

X = np.arange(12, dtype=np.float64).reshape(3, 4)
INDEX_DTYPES = [np.int32, np.int64, np.float32]


def _bind(ctx, sym, args, grads):
    """Binds `sym` with gradients for the names in `grads`, runs forward and a backward
    of ones; returns the outputs and the gradients as numpy arrays."""
    arrays = {k: mx.nd.array(v, ctx=ctx, dtype=v.dtype) for k, v in args.items()}
    grad_arrays = {k: mx.nd.zeros(args[k].shape, ctx=ctx, dtype=args[k].dtype) for k in grads}
    req = {k: "write" if k in grads else "null" for k in args}
    ex = sym.bind(ctx, arrays, args_grad=grad_arrays, grad_req=req)
    outs = ex.forward(is_train=True)
    ex.backward([mx.nd.ones(o.shape, ctx=ctx, dtype=o.dtype) for o in outs])
    for k, g in grad_arrays.items():
        assert g.dtype == args[k].dtype, k
    return [o.asnumpy() for o in outs], {k: g.asnumpy() for k, g in grad_arrays.items()}


@pytest.mark.parametrize("idt", INDEX_DTYPES)
def test_take_index_of_other_dtype(ctx, idt):
    idx = np.array([0, 2, 2], dtype=idt)
    sym = mx.sym.take(mx.sym.Variable("data"), mx.sym.Variable("idx"))
    outs, grads = _bind(ctx, sym, {"data": X, "idx": idx}, ["data", "idx"])
    assert outs[0].dtype == np.float64
    np.testing.assert_array_equal(outs[0], X[[0, 2, 2]])
    np.testing.assert_array_equal(grads["data"], [[1] * 4, [0] * 4, [2] * 4])
    np.testing.assert_array_equal(grads["idx"], np.zeros(3))


@pytest.mark.parametrize("idt", INDEX_DTYPES)
def test_pick_and_gather_nd_index_of_other_dtype(ctx, idt):
    data, idx = mx.sym.Variable("data"), mx.sym.Variable("idx")
    outs, grads = _bind(
        ctx,
        mx.sym.pick(data, idx, axis=1),
        {"data": X, "idx": np.array([0, 2, 3], dtype=idt)},
        ["data", "idx"],
    )
    np.testing.assert_array_equal(outs[0], [0, 6, 11])
    want = np.zeros_like(X)
    want[[0, 1, 2], [0, 2, 3]] = 1
    np.testing.assert_array_equal(grads["data"], want)
    np.testing.assert_array_equal(grads["idx"], np.zeros(3))

    nd_idx = np.array([[0, 2], [1, 3]], dtype=idt)
    outs, grads = _bind(
        ctx, mx.sym.gather_nd(data, idx), {"data": X, "idx": nd_idx}, ["data", "idx"]
    )
    np.testing.assert_array_equal(outs[0], [1, 11])
    want = np.zeros_like(X)
    want[0, 1] = want[2, 3] = 1
    np.testing.assert_array_equal(grads["data"], want)
    np.testing.assert_array_equal(grads["idx"], np.zeros((2, 2)))


@pytest.mark.parametrize("idt", INDEX_DTYPES)
def test_scatter_nd_index_of_other_dtype(ctx, idt):
    data, idx = mx.sym.Variable("data"), mx.sym.Variable("idx")
    outs, grads = _bind(
        ctx,
        mx.sym.scatter_nd(data, idx, shape=(3, 4)) * 3,
        {"data": np.array([1.0, 2.0]), "idx": np.array([[0, 2], [1, 3]], dtype=idt)},
        ["data"],
    )
    assert outs[0][0, 1] == 3 and outs[0][2, 3] == 6
    np.testing.assert_array_equal(grads["data"], [3, 3])


@pytest.mark.parametrize("idt", INDEX_DTYPES)
def test_embedding_and_one_hot_index_of_other_dtype(ctx, idt):
    idx = mx.sym.Variable("idx")
    emb = mx.sym.Embedding(
        idx, mx.sym.Variable("w"), input_dim=3, output_dim=4, dtype="float64"
    )
    outs, grads = _bind(ctx, emb, {"idx": np.array([0, 2, 2], dtype=idt), "w": X}, ["w"])
    np.testing.assert_array_equal(outs[0], X[[0, 2, 2]])
    np.testing.assert_array_equal(grads["w"], [[1] * 4, [0] * 4, [2] * 4])

    hot = mx.sym.one_hot(idx, depth=4, dtype="float64") * mx.sym.Variable("data")
    outs, grads = _bind(
        ctx, hot, {"idx": np.array([0, 2, 3], dtype=idt), "data": X}, ["idx", "data"]
    )
    np.testing.assert_array_equal(grads["data"], np.eye(4)[[0, 2, 3]])
    np.testing.assert_array_equal(grads["idx"], np.zeros(3))


@pytest.mark.parametrize("cdt", [np.int32, np.float32])
def test_where_condition_of_other_dtype(ctx, cdt):
    cond = np.array([[1, 0, 1, 0]] * 3, dtype=cdt)
    c, x, y = (mx.sym.Variable(n) for n in ("c", "x", "y"))
    outs, grads = _bind(ctx, mx.sym.where(c, x, y), {"c": cond, "x": X, "y": -X}, ["c", "x", "y"])
    np.testing.assert_array_equal(outs[0], np.where(cond, X, -X))
    np.testing.assert_array_equal(grads["x"], cond != 0)
    np.testing.assert_array_equal(grads["y"], cond == 0)
    np.testing.assert_array_equal(grads["c"], np.zeros_like(cond))


def _softmax(x, lens=None):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    if lens is not None:
        e = e * (np.arange(x.shape[-1]) < lens[:, None])
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_with_output_dtype(ctx, log):
    x = (X / 4).astype(np.float32)
    op = mx.sym.log_softmax if log else mx.sym.softmax
    sym = op(mx.sym.Variable("data"), dtype="float64") * mx.sym.Variable("w")
    w = np.linspace(0.5, 2, 12).reshape(3, 4)
    outs, grads = _bind(ctx, sym, {"data": x, "w": w}, ["data", "w"])
    assert outs[0].dtype == np.float64
    s = _softmax(x.astype(np.float64))
    if log:
        want = w - s * w.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(grads["w"], np.log(s), rtol=1e-6)
    else:
        want = s * (w - (s * w).sum(axis=1, keepdims=True))
        np.testing.assert_allclose(grads["w"], s, rtol=1e-6)
    np.testing.assert_allclose(grads["data"], want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("ldt", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [None, "float64"])
def test_softmax_with_length_input(ctx, ldt, dtype):
    x = (X / 4).astype(np.float32)
    lens = np.array([1, 2, 4], dtype=ldt)
    data, length = mx.sym.Variable("data"), mx.sym.Variable("len")
    kw = {"dtype": dtype} if dtype else {}
    sym = mx.sym.softmax(data, length, use_length=True, **kw) * mx.sym.Variable("w")
    w = np.linspace(0.5, 2, 12).reshape(3, 4).astype(dtype or np.float32)
    outs, grads = _bind(ctx, sym, {"data": x, "len": lens, "w": w}, ["data", "len", "w"])
    s = _softmax(x.astype(np.float64), lens)
    np.testing.assert_allclose(outs[0], s * w, rtol=1e-5)
    want = s * (w - (s * w).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(grads["data"], want, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(grads["len"], np.zeros(3))


@pytest.mark.parametrize(
    "sym, type_dict, shapes",
    [
        ("take", {"data": "float64", "idx": "int32"}, {"data": (3, 4), "idx": (3,)}),
        ("pick", {"data": "float64", "idx": "int32"}, {"data": (3, 4), "idx": (3,)}),
        ("softmax", {"data": "float32"}, {"data": (3, 4)}),
        ("softmax_len", {"data": "float32", "idx": "int32"}, {"data": (3, 4), "idx": (3,)}),
    ],
)
def test_simple_bind_infers_each_gradient_dtype(ctx, sym, type_dict, shapes):
    d, i = mx.sym.Variable("data"), mx.sym.Variable("idx")
    net = {
        "take": lambda: mx.sym.take(d, i),
        "pick": lambda: mx.sym.pick(d, i),
        "softmax": lambda: mx.sym.softmax(d, dtype="float64"),
        "softmax_len": lambda: mx.sym.softmax(d, i, use_length=True),
    }[sym]()
    ex = net.simple_bind(ctx, type_dict=type_dict, **shapes)
    for name, t in type_dict.items():
        assert ex.arg_dict[name].dtype == np.dtype(t)
        assert ex.grad_dict[name].dtype == np.dtype(t)
    ex.arg_dict["data"][:] = X[: shapes["data"][0]]
    if "idx" in type_dict:
        ex.arg_dict["idx"][:] = np.array([0, 1, 2])
    outs = ex.forward(is_train=True)
    ex.backward([mx.nd.ones(o.shape, ctx=ctx, dtype=o.dtype) for o in outs])
    assert ex.grad_dict["data"].dtype == np.dtype(type_dict["data"])


def test_cast_gradient_takes_the_input_dtype(ctx):
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    sym = mx.sym.Cast(x, dtype="float32") * y
    outs, grads = _bind(ctx, sym, {"x": X, "y": X.astype(np.float32) + 1}, ["x", "y"])
    assert outs[0].dtype == np.float32
    np.testing.assert_array_equal(grads["x"], X + 1)
    np.testing.assert_array_equal(grads["y"], X)
    outs, grads = _bind(ctx, x.astype("float16"), {"x": X}, ["x"])
    assert outs[0].dtype == np.float16
    np.testing.assert_array_equal(grads["x"], np.ones_like(X))


def test_argmax_and_topk_indices_of_other_dtype(ctx):
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    outs, grads = _bind(ctx, mx.sym.argmax(x, axis=1) + y, {"x": X, "y": np.ones(3)}, ["x", "y"])
    np.testing.assert_array_equal(outs[0], [4, 4, 4])
    np.testing.assert_array_equal(grads["x"], np.zeros_like(X))
    np.testing.assert_array_equal(grads["y"], np.ones(3))

    both = mx.sym.topk(x, k=2, ret_typ="both", dtype="int32")
    outs, grads = _bind(ctx, both[0] * 2, {"x": X}, ["x"])
    want = np.zeros_like(X)
    want[:, 2:] = 2
    np.testing.assert_array_equal(grads["x"], want)

    ex = both.simple_bind(ctx, x=(3, 4))
    ex.arg_dict["x"][:] = X
    values, indices = ex.forward(is_train=True)
    assert values.dtype == np.float32 and indices.dtype == np.int32
    np.testing.assert_array_equal(indices.asnumpy(), [[3, 2]] * 3)
    ex.backward([mx.nd.ones((3, 2), ctx=ctx), mx.nd.ones((3, 2), ctx=ctx, dtype="int32")])
    np.testing.assert_array_equal(ex.grad_dict["x"].asnumpy(), want / 2)


@pytest.mark.parametrize("ldt", [np.int32, np.float32])
def test_softmax_output_label_of_other_dtype(ctx, ldt):
    x = (X / 4).astype(np.float32)
    label = np.array([0, 2, 3], dtype=ldt)
    sym = mx.sym.SoftmaxOutput(mx.sym.Variable("data"), mx.sym.Variable("label"))
    outs, grads = _bind(ctx, sym, {"data": x, "label": label}, ["data"])
    s = _softmax(x.astype(np.float64))
    np.testing.assert_allclose(outs[0], s, rtol=1e-5)
    want = s - np.eye(4)[[0, 2, 3]]
    np.testing.assert_allclose(grads["data"], want, rtol=1e-4, atol=1e-6)


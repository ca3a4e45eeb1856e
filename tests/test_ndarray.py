"""NDArray creation, properties, transfer, arithmetic, indexing and bad input."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import rsmx as mx

DTYPES = [np.float32, np.float64, np.float16, np.uint8, np.int32, np.int8, np.int64]


def test_array_dtype_rules(ctx):
    assert mx.nd.array([1, 2], ctx=ctx).dtype == np.float32
    assert mx.nd.array(np.arange(3), ctx=ctx).dtype == np.float32  # MXNet casts to float32
    assert mx.nd.array(np.arange(3), dtype="int64", ctx=ctx).dtype == np.int64
    a = mx.nd.array([1, 2], dtype=np.int32, ctx=ctx)
    assert mx.nd.array(a, ctx=ctx).dtype == np.int32  # an NDArray source keeps its dtype
    assert mx.nd.array(np.float32(3), ctx=ctx).shape == ()
    for dt in DTYPES:
        x = (np.arange(12) % 7).astype(dt).reshape(3, 4)
        y = mx.nd.array(x, dtype=dt, ctx=ctx)
        assert y.dtype == dt and y.shape == (3, 4) and y.size == 12 and y.ndim == 2
        np.testing.assert_array_equal(y.asnumpy(), x)


def test_creation_functions(ctx):
    assert mx.nd.zeros((2, 3), ctx=ctx).asnumpy().tolist() == [[0] * 3] * 2
    assert mx.nd.ones(4, dtype="int32", ctx=ctx).asnumpy().tolist() == [1] * 4
    assert mx.nd.full((2,), 7.5, ctx=ctx).asnumpy().tolist() == [7.5, 7.5]
    assert mx.nd.empty((3, 2), ctx=ctx).shape == (3, 2)
    np.testing.assert_array_equal(mx.nd.arange(2, 8, 2, ctx=ctx).asnumpy(), [2, 4, 6])
    np.testing.assert_array_equal(mx.nd.arange(3, repeat=2, ctx=ctx).asnumpy(), [0, 0, 1, 1, 2, 2])
    x = mx.nd.array([[1, 2], [3, 4]], ctx=ctx)
    np.testing.assert_array_equal(mx.nd.zeros_like(x).asnumpy(), np.zeros((2, 2)))
    np.testing.assert_array_equal(mx.nd.ones_like(x).asnumpy(), np.ones((2, 2)))


def test_properties_and_transfer():
    x = mx.nd.array([[1, 2, 3], [4, 5, 6]], ctx=mx.cpu(1))
    assert x.context == mx.cpu(1)
    np.testing.assert_array_equal(x.T.asnumpy(), [[1, 4], [2, 5], [3, 6]])
    assert mx.nd.array([5]).asscalar() == 5.0
    with pytest.raises(ValueError):
        x.asscalar()
    np.testing.assert_array_equal(np.asarray(x), x.asnumpy())
    y = x.copyto(mx.cpu(2))
    assert y.context == mx.cpu(2)
    z = mx.nd.zeros((2, 3))
    x.copyto(z)
    np.testing.assert_array_equal(z.asnumpy(), x.asnumpy())
    assert x.as_in_context(mx.cpu(1)) is x
    assert x.as_in_context(mx.cpu(0)).context == mx.cpu(0)
    c = x.copy()
    c += 1
    assert x.asnumpy()[0, 0] == 1 and c.asnumpy()[0, 0] == 2
    i = x.astype("int32")
    assert i.dtype == np.int32 and i.asnumpy().tolist() == [[1, 2, 3], [4, 5, 6]]
    assert x.astype(np.float32, copy=False) is x
    x.wait_to_read()
    mx.nd.waitall()


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_arithmetic_matches_numpy(dt, ctx):
    rng = np.random.default_rng(0)
    a = rng.integers(1, 5, size=(3, 4)).astype(dt)
    b = rng.integers(1, 5, size=(4,)).astype(dt)
    x, y = mx.nd.array(a, dtype=dt, ctx=ctx), mx.nd.array(b, dtype=dt, ctx=ctx)
    np.testing.assert_allclose((x + y).asnumpy(), a + b, rtol=1e-3)
    np.testing.assert_allclose((x * y).asnumpy(), a * b, rtol=1e-3)
    np.testing.assert_allclose((x - 1).asnumpy(), a - dt(1), rtol=1e-3)
    np.testing.assert_allclose((10 - x).asnumpy(), dt(10) - a, rtol=1e-3)
    np.testing.assert_allclose((2 * x).asnumpy(), a * dt(2), rtol=1e-3)
    np.testing.assert_allclose((x % 3).asnumpy(), a % dt(3), rtol=1e-3)
    np.testing.assert_allclose((x**2).asnumpy(), a.astype(np.float64) ** 2, rtol=1e-2)
    if np.dtype(dt).kind == "f":
        np.testing.assert_allclose((x / y).asnumpy(), a / b, rtol=1e-3)
        np.testing.assert_allclose((1 / x).asnumpy(), 1 / a, rtol=1e-3)
        np.testing.assert_allclose((2**x).asnumpy(), 2.0**a, rtol=1e-3)
    np.testing.assert_array_equal((x > 2).asnumpy(), (a > 2).astype(dt))
    np.testing.assert_array_equal((x == y).asnumpy(), (a == b).astype(dt))
    np.testing.assert_array_equal((-x).asnumpy(), -a if np.dtype(dt).kind != "u" else (-a))


def test_in_place_forms_write_the_same_memory(ctx):
    x = mx.nd.ones((2, 2), ctx=ctx)
    view = x[1]
    x += 1
    x *= 3
    x -= 1
    x /= 5
    np.testing.assert_allclose(x.asnumpy(), np.full((2, 2), 1.0))
    np.testing.assert_allclose(view.asnumpy(), [1.0, 1.0])
    view += 2
    np.testing.assert_allclose(x.asnumpy(), [[1, 1], [3, 3]])


def test_unary_functions(ctx):
    a = np.array([-2.5, -0.5, 0.0, 0.5, 1.5, 2.5], dtype=np.float32)
    x = mx.nd.array(a, ctx=ctx)
    checks = {
        "negative": -a,
        "abs": np.abs(a),
        "sign": np.sign(a),
        "square": a * a,
        "exp": np.exp(a),
        "tanh": np.tanh(a),
        "sigmoid": 1 / (1 + np.exp(-a)),
        "relu": np.maximum(a, 0),
        "floor": np.floor(a),
        "ceil": np.ceil(a),
        "round": np.array([-3, -1, 0, 1, 2, 3], dtype=np.float32),  # half away from zero
        "sin": np.sin(a),
        "cos": np.cos(a),
        "expm1": np.expm1(a),
    }
    for name, want in checks.items():
        np.testing.assert_allclose(getattr(mx.nd, name)(x).asnumpy(), want, rtol=1e-5, atol=1e-6, err_msg=name)
    p = mx.nd.array([0.5, 1.0, 4.0], ctx=ctx)
    np.testing.assert_allclose(mx.nd.sqrt(p).asnumpy(), np.sqrt([0.5, 1, 4]), rtol=1e-6)
    np.testing.assert_allclose(mx.nd.rsqrt(p).asnumpy(), 1 / np.sqrt([0.5, 1, 4]), rtol=1e-6)
    np.testing.assert_allclose(mx.nd.log(p).asnumpy(), np.log([0.5, 1, 4]), rtol=1e-6)
    np.testing.assert_allclose(mx.nd.log1p(p).asnumpy(), np.log1p([0.5, 1, 4]), rtol=1e-6)
    np.testing.assert_allclose(mx.nd.clip(x, -1, 1).asnumpy(), np.clip(a, -1, 1))
    np.testing.assert_allclose(x.clip(a_min=0, a_max=2).asnumpy(), np.clip(a, 0, 2))
    np.testing.assert_allclose(mx.nd.maximum(x, 0.5).asnumpy(), np.maximum(a, 0.5))
    np.testing.assert_allclose(mx.nd.minimum(x, x * 2).asnumpy(), np.minimum(a, a * 2))


def test_first_axis_indexing_gives_views(ctx):
    x = mx.nd.arange(12, ctx=ctx).reshape((3, 4))
    row = x[1]
    assert row.shape == (4,)
    row[:] = 0
    assert x.asnumpy()[1].tolist() == [0] * 4
    part = x[1:3]
    part += 100
    assert x.asnumpy()[2, 0] == 108
    assert mx.nd.array([1, 2, 3], ctx=ctx)[0].shape == (1,)  # MXNet 1.x keeps one dimension
    assert mx.nd.array([1, 2, 3], ctx=ctx)[-1].asnumpy().tolist() == [3]
    with pytest.raises(IndexError):
        x[3]


def test_setitem_forms(ctx):
    x = mx.nd.zeros((3, 4), ctx=ctx)
    x[:] = 2
    assert x.asnumpy().sum() == 24
    x[1] = mx.nd.ones((4,), ctx=ctx)
    x[2] = np.arange(4)
    assert x.asnumpy().tolist() == [[2] * 4, [1] * 4, [0, 1, 2, 3]]
    x[0:2] = 5
    assert x.asnumpy()[:2].tolist() == [[5] * 4] * 2
    x[:] = np.ones((3, 4)) * 7
    assert (x.asnumpy() == 7).all()
    x[:] = mx.nd.array([1, 2, 3, 4], ctx=ctx)  # broadcast
    assert x.asnumpy()[2].tolist() == [1, 2, 3, 4]


def test_reshape_special_values_and_views(ctx):
    x = mx.nd.arange(24, ctx=ctx).reshape((2, 3, 4))
    assert x.reshape((0, -1)).shape == (2, 12)
    assert x.reshape(-1).shape == (24,)
    assert x.reshape(4, -1).shape == (4, 6)
    assert x.reshape((-3, 4)).shape == (6, 4)
    assert x.reshape((0, -4, 1, 3, 4)).shape == (2, 1, 3, 4)
    assert x.reshape((-2,)).shape == (2, 3, 4)
    y = x.reshape((6, 4))
    y[0] = -1
    assert x.asnumpy()[0, 0].tolist() == [-1] * 4
    with pytest.raises(mx.MXNetError):
        x.reshape((5, 5))


def test_bad_input_is_a_clear_error_and_leaves_arrays_unchanged(ctx):
    a = mx.nd.ones((2, 3), ctx=ctx)
    b = mx.nd.ones((4,), ctx=ctx)
    with pytest.raises(mx.MXNetError, match=r"broadcast_add.*\(2, 3\).*\(4,\)"):
        a + b
    with pytest.raises(mx.MXNetError, match=r"\(2, 3\)"):
        a += b
    np.testing.assert_array_equal(a.asnumpy(), np.ones((2, 3)))
    with pytest.raises(mx.MXNetError, match="unknown argument"):
        mx.nd.exp(a, bogus=1)
    with pytest.raises(mx.MXNetError, match="a_min"):
        mx.nd.clip(a, a_min="x", a_max=1)
    with pytest.raises(mx.MXNetError, match="dtype"):
        mx.nd.zeros((2,), dtype="complex64", ctx=ctx)
    with pytest.raises(mx.MXNetError, match="same context"):
        mx.nd.ones((2,), ctx=mx.cpu(0)) + mx.nd.ones((2,), ctx=mx.cpu(1))
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(mx.MXNetError):
        mx.nd.exp(a, out=mx.nd.zeros((3, 2), ctx=ctx))
    np.testing.assert_array_equal(a.asnumpy(), np.ones((2, 3)))


def test_every_cpu_context_is_a_distinct_device():
    xs = [mx.nd.full((3,), i, ctx=mx.cpu(i)) for i in range(4)]
    total = sum((x.copyto(mx.cpu(0)) for x in xs), mx.nd.zeros((3,)))
    assert total.asnumpy().tolist() == [6.0] * 3
    assert {x.context for x in xs} == {mx.cpu(i) for i in range(4)}


def test_many_arrays_are_freed():
    ctx = mx.cpu(5)
    mx.nd.waitall()
    base = mx.storage.stats(ctx)["bytes_in_use"]
    x = mx.nd.ones((100,), ctx=ctx)
    for _ in range(200):
        x = x * 1.0001
    x.wait_to_read()
    del x
    gc.collect()
    mx.nd.waitall()
    assert mx.storage.stats(ctx)["bytes_in_use"] == base


def test_repr_and_pickle(ctx):
    import pickle

    x = mx.nd.array([[1, 2], [3, 4]], ctx=ctx)
    assert repr(x).endswith(f"<NDArray 2x2 @{ctx}>")
    y = pickle.loads(pickle.dumps(x))
    np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())


@pytest.mark.parametrize("act_type", ["leaky", "elu", "selu", "gelu"])
def test_leaky_relu_in_place_matches_out_of_place(ctx, act_type):
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    want = mx.nd.LeakyReLU(mx.nd.array(x, ctx=ctx), act_type=act_type).asnumpy()
    a = mx.nd.array(x, ctx=ctx)
    mx.nd.LeakyReLU(a, act_type=act_type, out=a)
    np.testing.assert_allclose(a.asnumpy(), want, rtol=1e-6)


def test_batch_norm_refuses_to_write_over_its_data(ctx):
    a = mx.nd.ones((2, 3), ctx=ctx)
    stats = [mx.nd.ones((3,), ctx=ctx) for _ in range(4)]
    with pytest.raises(mx.MXNetError, match="must not share memory"):
        mx.nd.BatchNorm(a, *stats, out=a).wait_to_read()
    # The engine and the array stay usable.
    np.testing.assert_array_equal((a * 0).asnumpy(), np.zeros((2, 3)))


def test_eye_places_ones_on_a_diagonal() -> None:
    np.testing.assert_array_equal(mx.nd.eye(3).asnumpy(), np.eye(3))
    np.testing.assert_array_equal(mx.nd.eye(2, 4, k=1, dtype="int32").asnumpy(), np.eye(2, 4, k=1))
    assert mx.nd.eye(2, dtype="float64").dtype == np.float64


def test_inplace_shape_methods_share_memory() -> None:
    x = mx.nd.arange(6).reshape((1, 2, 1, 3))
    views = [x.flatten(inplace=True), x.squeeze(inplace=True), x.squeeze(axis=(0, 2), inplace=True),
             x.expand_dims(axis=-1, inplace=True)]
    copies = [x.flatten(), x.squeeze(), x.expand_dims(axis=-1)]
    assert [v.shape for v in views] == [(1, 6), (2, 3), (2, 3), (1, 2, 1, 3, 1)]
    x[:] = 7
    assert all((v.asnumpy() == 7).all() for v in views)
    assert all((c.asnumpy() != 7).any() for c in copies)
    assert mx.nd.ones((1, 1)).squeeze(inplace=True).shape == (1,)  # as MXNet
    with pytest.raises(ValueError):
        x.squeeze(axis=1, inplace=True)


def test_broadcast_to_takes_numpy_shapes_and_adds_leading_axes() -> None:
    x = mx.nd.array([[1], [2]])
    assert x.broadcast_to(np.array([2, 3])).asnumpy().tolist() == [[1] * 3, [2] * 3]
    assert x.broadcast_to((4, 2, 3)).shape == (4, 2, 3)
    assert mx.nd.broadcast_to(x, shape=np.array([2, 2])).shape == (2, 2)
    with pytest.raises(ValueError):
        x.broadcast_to((3, 3))


def test_moveaxis_takes_axis_lists() -> None:
    x = mx.nd.zeros((4, 1, 2, 3))
    assert mx.nd.moveaxis(x, [0, 1], [2, 3]).shape == (2, 3, 4, 1)
    assert mx.nd.moveaxis(x, [3, 0], [1, 0]).shape == (4, 3, 1, 2)
    assert mx.nd.moveaxis(x, range(4), range(4)).shape == (4, 1, 2, 3)
    for src, dst in [(4, 0), ([0, 0], [0, 1]), ([0, 1], [0])]:
        with pytest.raises(ValueError):
            mx.nd.moveaxis(x, src, dst)


def test_contiguous_basic_indexing_gives_views() -> None:
    is_contiguous = mx.nd.NDArray._basic_indexing_slice_is_contiguous
    assert is_contiguous((slice(1, 2), slice(None), slice(2, 4)), (3, 4, 5)) is False
    assert is_contiguous((slice(1, 2), slice(1, 3)), (3, 4, 5)) is True
    assert is_contiguous((slice(None, None, 2),), (3, 4)) is False
    x = mx.nd.arange(60).reshape((3, 4, 5))
    view, copy = x[1, 1:3], x[1, :, 2:4]
    view[:] = -1
    copy[:] = -2
    assert (x.asnumpy()[1, 1:3] == -1).all() and (x.asnumpy() != -2).all()


def test_advanced_indexing_follows_numpy_and_records() -> None:
    a = np.arange(8 * 16 * 9 * 9).reshape(8, 16, 9, 9)
    x = mx.nd.array(a, dtype="int32")
    for key in [(1, [2, 3], np.array([[3], [0]])), ([1, 2], slice(3, 5), None, None, [3, 4]),
                (None, slice(None), None, slice(3, 5), [2, 3], None, [3, 4]),
                (mx.nd.array([1, 1, 0]), mx.nd.array([0, 1, 0])), (1, None, -2, 3, -4)]:
        np_key = tuple(k.asnumpy().astype(int) if isinstance(k, mx.nd.NDArray) else k for k in key)
        np.testing.assert_array_equal(x[key].asnumpy(), a[np_key])
        y = a.copy()
        y[np_key] = -5
        x2 = mx.nd.array(a, dtype="int32")
        x2[key] = -5
        np.testing.assert_array_equal(x2.asnumpy(), y)
    # MXNet 1.9.1's values and gradient for x[1, [0, 2], 1:3].
    x = mx.nd.arange(24).reshape((2, 3, 4))
    x.attach_grad()
    with mx.autograd.record():
        y = x[1, [0, 2], 1:3]
    y.backward()
    assert y.asnumpy().tolist() == [[13, 14], [21, 22]]
    assert x.grad[1].asnumpy().tolist() == [[0, 1, 1, 0], [0, 0, 0, 0], [0, 1, 1, 0]]


def test_partial_assignment_while_recording_is_refused() -> None:
    x = mx.nd.zeros((4, 3))
    y = mx.nd.ones((2, 3))
    y.attach_grad()
    with mx.autograd.record(), pytest.raises(mx.MXNetError, match="Inplace operations"):
        x[1:3] = y
    with mx.autograd.record():
        x[1:3] = 5  # a scalar is not recorded, as in MXNet
        x[0:1] = mx.nd.full((1, 3), 7)  # nor is an array outside the graph
    assert x.asnumpy()[:3].tolist() == [[7] * 3] + [[5] * 3] * 2


def test_getstate_is_mxnet_raw_bytes() -> None:
    state = mx.nd.array([[1, 2]]).__getstate__()
    # What MXNet 1.9.1's NDArray.__getstate__ gives for this array.
    assert state == {"handle": bytearray(
        b"\xc9\xfa\x93\xf9\x00\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02"
        b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
        b"\x80?\x00\x00\x00@")}
    z = mx.nd.zeros((1, 2))
    z.__setstate__(state)
    assert z.asnumpy().tolist() == [[1, 2]]
    with pytest.raises(ValueError):
        mx.nd.zeros((3,)).__setstate__(state)


def test_cached_op_runs_a_symbol_under_autograd() -> None:
    sym = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc") * 3 + 2
    op = mx.nd.CachedOp(sym)
    d = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    w = mx.nd.array([[0.5, -1, 2], [1, 0, -0.5]])
    b = mx.nd.array([0.25, -1])
    # MXNet 1.9.1's values.
    assert op(d, w, b).asnumpy().tolist() == [[16.25, -2.5], [29.75, 2.0]]
    out = mx.nd.zeros((2, 2))
    assert op(d, w, b, out=out) is out and out.asnumpy().tolist() == [[16.25, -2.5], [29.75, 2.0]]
    w.attach_grad()
    d.attach_grad()
    with mx.autograd.record():
        o = op(d, w, b)
        (o * o).sum().backward()
    assert w.grad.asnumpy().tolist() == [[811.5, 1087.5, 1363.5], [33.0, 30.0, 27.0]]
    assert d.grad.asnumpy().tolist() == [[33.75, -97.5, 202.5], [101.25, -178.5, 351.0]]
    with pytest.raises(ValueError):
        op(d, w)


def test_relu_keeps_nan_and_gives_it_as_gradient():
    # As MXNet: relu(NaN) is NaN, and so is its gradient there.
    for f in (mx.nd.relu, lambda v: mx.nd.Activation(v, act_type="relu")):
        x = mx.nd.array([np.nan, -1.0, 0.0, 2.0])
        x.attach_grad()
        with mx.autograd.record():
            y = f(x)
        y.backward()
        np.testing.assert_array_equal(y.asnumpy(), [np.nan, 0, 0, 2])
        np.testing.assert_array_equal(x.grad.asnumpy(), [np.nan, 0, 0, 1])

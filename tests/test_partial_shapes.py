"""Shape inference over partly known shapes (0 = unknown size) and the NumPy-shape switch.

Expected values are what MXNet 1.9.1 infers for the same graphs, except where noted.
"""

import pytest
import rsmx as mx


def args_of(sym, shapes):
    return dict(zip(sym.list_arguments(), shapes, strict=True))


def test_a_zeros_state_takes_the_batch_size_of_what_it_is_added_to():
    x = mx.sym.Variable("x")
    s = mx.sym.FullyConnected(x, num_hidden=3, name="fc") + mx.sym.zeros((0, 3))
    arg, out, _ = s.infer_shape(x=(2, 5))
    assert arg == [(2, 5), (3, 5), (3,)]
    assert out == [(2, 3)]
    ex = s.simple_bind(mx.cpu(), x=(2, 5))
    assert ex.forward()[0].shape == (2, 3)


def test_fully_connected_learns_its_batch_size_from_its_output():
    x = mx.sym.Variable("x")
    s = mx.sym.Variable("s", shape=(0, 4))
    y = (mx.sym.FullyConnected(s, num_hidden=3, name="a")
         + mx.sym.FullyConnected(x, num_hidden=3, name="b"))
    arg, out, _ = y.infer_shape(x=(2, 5))
    assert args_of(y, arg)["s"] == (2, 4)
    assert out == [(2, 3)]
    arg, out, _ = y.infer_shape_partial()
    assert args_of(y, arg)["s"] == (0, 4)
    assert args_of(y, arg)["a_weight"] == (3, 4)
    assert out == [(0, 3)]


def test_convolution_fills_unknown_batch_and_spatial_sizes_from_its_output():
    a = mx.sym.Variable("a", shape=(0, 10, 0, 0))
    b = mx.sym.Convolution(a, num_filter=21, kernel=(3, 3), pad=(1, 1), name="c")
    d = b + mx.sym.Variable("o", shape=(5, 21, 32, 32))
    arg, _, _ = d.infer_shape()
    assert args_of(d, arg)["a"] == (5, 10, 32, 32)
    assert args_of(d, arg)["c_weight"] == (21, 10, 3, 3)


def test_slice_channel_infers_its_input_from_its_parts():
    a = mx.sym.Variable("a", shape=(0, 10))
    d = mx.sym.SliceChannel(a, num_outputs=10, axis=1, squeeze_axis=True)[1] + \
        mx.sym.Variable("c", shape=(5,))
    assert args_of(d, d.infer_shape()[0])["a"] == (5, 10)
    a = mx.sym.Variable("a", shape=(0, 15, 0))
    d = mx.sym.SliceChannel(a, num_outputs=3)[1] + mx.sym.Variable("c", shape=(3, 5, 2))
    assert args_of(d, d.infer_shape()[0])["a"] == (3, 15, 2)


@pytest.mark.parametrize("make, given, want_args, want_out", [
    (lambda a, b: mx.sym.concat(a, b, dim=1), {"a": (2, 0), "b": (0, 3)},
     [(2, 0), (2, 3)], [(2, 0)]),
    (lambda a, b: mx.sym.dot(a, b), {"a": (2, 0)}, [(2, 0), ()], [()]),
    (lambda a, b: mx.sym.pick(a, b), {"a": (2, 0)}, [(2, 0), (2,)], [(2,)]),
    (lambda a, b: a + b, {"a": (2, 0), "b": (0, 3)}, [(2, 3), (2, 3)], [(2, 3)]),
    # MXNet leaves the output's (2, 0); an unknown size broadcast with 3 can only give 3.
    (lambda a, b: mx.sym.broadcast_add(a, b), {"a": (2, 0), "b": (1, 3)},
     [(2, 0), (1, 3)], [(2, 3)]),
])
def test_partial_shapes_of_common_operators(make, given, want_args, want_out):
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    arg, out, _ = make(a, b).infer_shape_partial(**given)
    assert arg == want_args
    assert out == want_out


def test_transpose_reshape_and_where_keep_what_is_unknown():
    a = mx.sym.Variable("a")
    assert mx.sym.transpose(a).infer_shape_partial(a=(2, 0, 3))[1] == [(3, 0, 2)]
    assert mx.sym.reshape(a, shape=(-1,)).infer_shape_partial(a=(2, 0))[1] == [(0,)]
    w = mx.sym.where(mx.sym.Variable("c"), mx.sym.Variable("x"), mx.sym.Variable("y"))
    assert w.infer_shape_partial(c=(0, 2), x=(0, 2), y=(0, 2))[1] == [()]


def test_known_sizes_that_disagree_are_an_error_naming_the_operator():
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    with pytest.raises(mx.MXNetError, match="elemwise_add"):
        (a + b).infer_shape_partial(a=(2, 0), b=(3, 3))


def test_infer_shape_gives_none_while_a_size_is_unknown():
    x = mx.sym.Variable("x")
    s = mx.sym.FullyConnected(x, num_hidden=3) + mx.sym.zeros((0, 3))
    with pytest.warns(UserWarning, match="Cannot decide shape"):
        assert s.infer_shape() == (None, None, None)


def test_a_bound_array_keeps_its_own_shape():
    a = mx.sym.Variable("a")
    s = a + mx.sym.Variable("b")
    with pytest.raises(mx.MXNetError):
        s.bind(mx.cpu(), {"a": mx.nd.empty((0, 3)), "b": mx.nd.zeros((2, 3))}).forward()


def test_zero_sized_arrays_still_work_imperatively():
    z = mx.nd.empty((0, 3))
    assert (z + z).shape == (0, 3)
    assert mx.nd.concat(mx.nd.empty((2, 0)), mx.nd.ones((2, 3)), dim=1).shape == (2, 3)
    with pytest.raises(mx.MXNetError):
        z + mx.nd.zeros((2, 3))


def test_np_shape_switch_is_scoped_and_per_thread():
    import threading

    assert not mx.is_np_shape()
    with mx.np_shape():
        assert mx.is_np_shape()
        seen = []
        t = threading.Thread(target=lambda: seen.append(mx.is_np_shape()))
        t.start()
        t.join()
        assert seen == [False]
    assert not mx.is_np_shape()
    assert mx.set_np_shape(True) is False
    assert mx.set_np_shape(False) is True

    @mx.use_np_shape
    def inside():
        return mx.is_np_shape()

    assert inside() and not mx.is_np_shape()


def test_np_shape_reads_minus_one_as_unknown_and_zero_as_empty():
    data = mx.sym.var("data")
    with mx.np_shape():
        arg, out, _ = mx.sym.sin(data).infer_shape_partial()
        assert arg == [None] and out == [None]
        arg, out, _ = mx.sym.sin(data).infer_shape(data=(0, 2, 3))
        assert arg == [(0, 2, 3)] and out == [(0, 2, 3)]
        x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
        _, out, _ = mx.sym.dot(x, y).infer_shape_partial(x=(-1, 3, 4), y=(4, 5))
        assert out == [(-1, 3, 5)]
        v = mx.sym.var("v", shape=(-1, 2, 3))
        arg, out, _ = mx.sym.sin(v).infer_shape_partial()
        assert arg == [(-1, 2, 3)] and out == [(-1, 2, 3)]
    arg, out, _ = mx.sym.sin(data).infer_shape_partial()
    assert arg == [()] and out == [()]


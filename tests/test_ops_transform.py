"""Transform operators (reshape, transpose, concat, split, slice, tile, flip, broadcast...)
checked against numpy and against what MXNet 1.9.1 returns."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx

DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]


def iota(shape, dtype="float32"):
    n = int(np.prod(shape))
    a = np.arange(n).reshape(shape)
    if dtype == "bool":
        return a % 3 == 0
    return a.astype(dtype)


def nd(a, ctx):
    return mx.nd.array(a, ctx=ctx, dtype=a.dtype)


def check(got, want):
    got_np = got.asnumpy()
    assert got_np.shape == want.shape
    assert got_np.dtype == want.dtype
    np.testing.assert_array_equal(got_np, want)


# ---------------------------------------------------------------- Reshape family


# (input shape, shape codes, reverse, output shape as MXNet 1.9.1 gives it)
RESHAPE_CASES = [
    ((2, 3, 4), (0, -1), False, (2, 12)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((2, 3, 4), (-3, 4), False, (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), False, (1, 2, 3, 4)),
    ((2, 3, 4), (-4, -1, 1, -2), False, (2, 1, 3, 4)),
    ((2, 3, 4), (0, -3), False, (2, 12)),
    ((2, 3, 4), (2, -2), False, (2, 3, 4)),
    ((2, 3, 4), (-2, 1), False, (2, 3, 4, 1)),
    ((2, 3, 4), (0, -1, 0), False, (2, 3, 4)),
    ((2, 3, 4), (-3, -1), False, (6, 4)),
    ((2, 3, 4), (-4, 2, -1, 0, 0), False, (2, 1, 3, 4)),
    ((2, 3, 4), (-1,), False, (24,)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
    ((10, 5, 4), (-1, 0), False, (40, 5)),
    ((2, 3, 4, 5), (-3, -3), False, (6, 20)),
    ((2, 3, 4, 5), (0, 0, 0, -4, 5, 1), False, (2, 3, 4, 5, 1)),
    ((2, 3, 4, 5), (-4, 1, -1, -2), False, (1, 2, 3, 4, 5)),
    ((2, 3, 4, 5), (-3, -1), True, (12, 10)),
    ((2, 3, 4, 5), (0, -1), True, (4, 30)),
]


@pytest.mark.parametrize("in_shape,codes,reverse,out_shape", RESHAPE_CASES)
def test_reshape_special_codes(in_shape, codes, reverse, out_shape, ctx):
    a = iota(in_shape)
    y = mx.nd.reshape(nd(a, ctx), shape=codes, reverse=reverse)
    check(y, a.reshape(out_shape))
    z = mx.nd.Reshape(nd(a, ctx), shape=codes, reverse=reverse)
    assert z.shape == out_shape


def test_reshape_method_shares_the_codes(ctx):
    a = iota((2, 3, 4))
    x = nd(a, ctx)
    check(x.reshape((2, -1)), a.reshape(2, -1))
    check(x.reshape(4, -1), a.reshape(4, -1))
    check(x.reshape(shape=(0, -3)), a.reshape(2, 12))
    check(x.reshape((-1, 0), reverse=True), a.reshape(6, 4))


@pytest.mark.parametrize(
    "codes",
    [(4, 5), (5, -1), (-1, -1), (-5,), (0, 0, 0, 0), (0, 0, -3), (-4, 3, 3, -2), (-4, -1, -1, -2)],
)
def test_reshape_errors(codes, ctx):
    x = nd(iota((2, 3, 4)), ctx)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.reshape(x, shape=codes)


def test_reshape_error_message_names_shapes(ctx):
    x = nd(iota((2, 3)), ctx)
    with pytest.raises(
        mx.base.MXNetError, match=r"cannot reshape array of shape \(2, 3\) into shape \(4, 2\)"
    ):
        mx.nd.reshape(x, shape=(4, 2))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.reshape(nd(iota((2, 3, 4, 5)), ctx), shape=(-4, 1, -1, -2), reverse=True)


def test_reshape_deprecated_target_shape(ctx):
    a = iota((2, 3, 4))
    assert mx.nd.Reshape(nd(a, ctx), target_shape=(4, 0)).shape == (4, 6)
    assert mx.nd.Reshape(nd(a, ctx), target_shape=(4, 0), keep_highest=True).shape == (2, 12)


def test_flatten_expand_dims_squeeze(ctx):
    a = iota((2, 3, 4))
    x = nd(a, ctx)
    check(mx.nd.Flatten(x), a.reshape(2, 12))
    check(mx.nd.flatten(x), a.reshape(2, 12))
    check(mx.nd.flatten(nd(iota((3,)), ctx)), iota((3,)).reshape(3, 1))
    check(mx.nd.expand_dims(x, axis=3), a[..., None])
    check(mx.nd.expand_dims(x, axis=-1), a[..., None])
    check(mx.nd.expand_dims(x, axis=-4), a[None])
    check(x.expand_dims(axis=1), a[:, None])
    z = iota((1, 2, 1, 3))
    check(mx.nd.squeeze(nd(z, ctx)), z.reshape(2, 3))
    check(mx.nd.squeeze(nd(z, ctx), axis=2), z.reshape(1, 2, 3))
    check(mx.nd.squeeze(nd(z, ctx), axis=(0, -2)), z.reshape(2, 3))
    # MXNet 1.x keeps one axis when everything is squeezed out.
    assert mx.nd.squeeze(mx.nd.zeros((1, 1), ctx=ctx)).shape == (1,)
    assert mx.nd.squeeze(mx.nd.zeros((1,), ctx=ctx), axis=0).shape == (1,)


def test_flatten_expand_dims_squeeze_errors(ctx):
    x = nd(iota((2, 3, 4)), ctx)
    for axis in (4, -5):
        with pytest.raises(mx.base.MXNetError):
            mx.nd.expand_dims(x, axis=axis)
    z = mx.nd.zeros((1, 2, 1, 3), ctx=ctx)
    for axis in (1, 4, (0, 0)):
        with pytest.raises(mx.base.MXNetError):
            mx.nd.squeeze(z, axis=axis)


# ---------------------------------------------------------------- transpose and friends


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_every_dtype(dtype, ctx):
    a = iota((2, 3, 4), dtype)
    x = nd(a, ctx)
    check(mx.nd.transpose(x), a.transpose())
    check(mx.nd.transpose(x, axes=(1, 0, 2)), a.transpose(1, 0, 2))
    check(mx.nd.transpose(x, axes=(2, 0, 1)), a.transpose(2, 0, 1))
    check(x.T, a.T)


def test_transpose_negative_axes_and_errors(ctx):
    a = iota((2, 3, 4))
    x = nd(a, ctx)
    check(mx.nd.transpose(x, axes=(-1, 0, 1)), a.transpose(2, 0, 1))
    for axes in [(1, 0), (1, 1, 0), (1, 3, 0)]:
        with pytest.raises(mx.base.MXNetError):
            mx.nd.transpose(x, axes=axes)


@pytest.mark.parametrize(
    "shape,axes", [((1000, 1500), (1, 0)), ((64, 70, 80), (2, 1, 0)), ((8, 300, 200), (0, 2, 1))]
)
def test_transpose_large(shape, axes, ctx):
    a = np.random.default_rng(0).standard_normal(shape).astype("float32")
    check(mx.nd.transpose(nd(a, ctx), axes=axes), a.transpose(axes))


def test_swapaxes(ctx):
    a = iota((2, 3, 4))
    x = nd(a, ctx)
    check(mx.nd.swapaxes(x, dim1=0, dim2=2), np.swapaxes(a, 0, 2))
    check(mx.nd.SwapAxis(x, dim1=-1, dim2=0), np.swapaxes(a, -1, 0))
    check(mx.nd.SwapAxis(x), a)
    check(x.swapaxes(1, 2), np.swapaxes(a, 1, 2))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.swapaxes(x, dim1=3, dim2=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip(dtype, ctx):
    a = iota((2, 3, 4), dtype)
    x = nd(a, ctx)
    check(mx.nd.reverse(x, axis=1), np.flip(a, 1))
    check(mx.nd.flip(x, axis=(0, 2)), np.flip(a, (0, 2)))
    check(mx.nd.flip(x, axis=-1), np.flip(a, -1))
    check(x.flip(axis=0), np.flip(a, 0))
    # An axis listed twice is flipped twice (MXNet 1.9.1 does the same).
    check(mx.nd.flip(x, axis=(0, 0)), a)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.flip(x, axis=3)


def _depth_to_space(a, b):
    n, c, h, w = a.shape
    t = a.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return t.reshape(n, c // (b * b), h * b, w * b)


def _space_to_depth(a, b):
    n, c, h, w = a.shape
    t = a.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def test_depth_to_space_and_back(ctx):
    a = iota((2, 12, 3, 5))
    y = mx.nd.depth_to_space(nd(a, ctx), block_size=2)
    check(y, _depth_to_space(a, 2))
    check(mx.nd.space_to_depth(y, block_size=2), a)
    b = iota((1, 3, 6, 9))
    check(mx.nd.space_to_depth(nd(b, ctx), block_size=3), _space_to_depth(b, 3))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.depth_to_space(nd(iota((1, 6, 2, 4)), ctx), block_size=2)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.space_to_depth(nd(iota((1, 3, 3, 4)), ctx), block_size=2)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.depth_to_space(nd(iota((4, 3, 2)), ctx), block_size=2)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.depth_to_space(nd(a, ctx), block_size=0)


# ---------------------------------------------------------------- concat, stack, split


@pytest.mark.parametrize("dtype", DTYPES)
def test_concat(dtype, ctx):
    a = iota((2, 3, 4), dtype)
    b = iota((2, 5, 4), dtype)
    x, y = nd(a, ctx), nd(b, ctx)
    check(mx.nd.concat(x, y), np.concatenate([a, b], axis=1))
    check(mx.nd.concat(x, x, dim=0), np.concatenate([a, a], axis=0))
    check(mx.nd.Concat(x, x, x, dim=-1), np.concatenate([a, a, a], axis=-1))
    check(mx.nd.concat(x, dim=2), a)
    check(mx.nd.concatenate([x, x], axis=2), np.concatenate([a, a], axis=2))


def test_concat_large(ctx):
    a = np.random.default_rng(1).standard_normal((4, 300_000)).astype("float32")
    b = a[:, :1000].copy()
    check(mx.nd.concat(nd(a, ctx), nd(b, ctx), dim=1), np.concatenate([a, b], axis=1))
    check(mx.nd.concat(nd(a, ctx), nd(a, ctx), dim=0), np.concatenate([a, a], axis=0))


def test_concat_errors(ctx):
    x = nd(iota((2, 3, 4)), ctx)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.concat(x, nd(iota((2, 3, 5)), ctx), dim=1)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.concat(x, x, dim=3)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.concat(x, nd(iota((2, 3)), ctx), dim=0)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.concat(x, nd(iota((2, 3, 4), "int32"), ctx), dim=0)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.Concat(x, x, num_args=3, dim=0)


@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4])
def test_stack(axis, ctx):
    a = iota((2, 3, 4))
    b = a + 100
    check(mx.nd.stack(nd(a, ctx), nd(b, ctx), axis=axis), np.stack([a, b], axis=axis))


def test_stack_errors(ctx):
    x = nd(iota((2, 3, 4)), ctx)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.stack(x, x, axis=4)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.stack(x, nd(iota((2, 3, 5)), ctx))


def test_split(ctx):
    a = iota((2, 6, 4))
    x = nd(a, ctx)
    parts = mx.nd.split(x, num_outputs=3)
    assert len(parts) == 3
    for got, want in zip(parts, np.split(a, 3, axis=1), strict=True):
        check(got, want)
    for got, want in zip(
        mx.nd.split(x, num_outputs=2, axis=-1), np.split(a, 2, axis=-1), strict=True
    ):
        check(got, want)
    sq = mx.nd.SliceChannel(x, num_outputs=2, axis=0, squeeze_axis=True)
    check(sq[0], a[0])
    check(sq[1], a[1])
    # One output comes back as a single array.
    check(mx.nd.split(x, num_outputs=1, axis=1), a)
    check(x.split(num_outputs=2, axis=2)[1], a[:, :, 2:])
    # Splitting a 1-d array with squeeze_axis gives 0-d arrays, as in MXNet 1.9.1.
    s = mx.nd.split(
        nd(np.array([5.0, 6.0], dtype="float32"), ctx), num_outputs=2, axis=0, squeeze_axis=True
    )
    assert s[1].shape == ()
    assert s[1].asscalar() == 6.0


def test_split_errors(ctx):
    x = nd(iota((2, 3, 4)), ctx)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.split(x, num_outputs=2, axis=1)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.split(x, num_outputs=0, axis=1)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.split(x, num_outputs=2, axis=3)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.split(x, num_outputs=2, axis=2, squeeze_axis=True)


# ---------------------------------------------------------------- slicing


SLICES = [
    ((0, 1), (2, 3), None),
    ((None, 1), (None, 3), None),
    ((-1, -2), (None, None), None),
    ((None, None, None), (None, None, None), (1, 2, 3)),
    ((None, None, None), (None, None, None), (-1, -1, -2)),
    ((1, 2), (0, 0), (-1, -1)),
    ((1,), (None,), (-1,)),
    ((1,), (1,), None),
    ((2,), (1,), None),
    ((0, -10), (5, 10), None),
    ((5,), (6,), None),
    ((10,), (None,), (-1,)),
    ((0,), (-10,), None),
    ((None,), (-10,), (-1,)),
    ((0, 0), (2, 3), (None, 2)),
    ((None, None, 3), (None, None, 0), (None, None, -2)),
]


@pytest.mark.parametrize("begin,end,step", SLICES)
def test_slice_like_python(begin, end, step, ctx):
    a = iota((2, 3, 4))
    kwargs = {"begin": begin, "end": end}
    if step is not None:
        kwargs["step"] = step
    steps = step or (None,) * len(begin)
    key = tuple(slice(b, e, s) for b, e, s in zip(begin, end, steps, strict=True))
    check(mx.nd.slice(nd(a, ctx), **kwargs), a[key])
    check(mx.nd.crop(nd(a, ctx), **kwargs), a[key])


def _pick(rng, n):
    return None if rng.random() < 0.25 else int(rng.integers(-n - 2, n + 3))


def test_slice_random_against_numpy(ctx):
    rng = np.random.default_rng(2)
    a = iota((5, 6, 7), "int64")
    x = nd(a, ctx)
    for _ in range(200):
        nd_axes = int(rng.integers(1, 4))
        begin, end, step = [], [], []
        for k in range(nd_axes):
            n = a.shape[k]
            begin.append(_pick(rng, n))
            end.append(_pick(rng, n))
            s = int(rng.choice([-3, -2, -1, 1, 2, 3]))
            step.append(None if s == 1 and rng.random() < 0.5 else s)
        key = tuple(slice(b, e, s) for b, e, s in zip(begin, end, step, strict=True))
        check(mx.nd.slice(x, begin=tuple(begin), end=tuple(end), step=tuple(step)), a[key])


def test_slice_errors(ctx):
    x = nd(iota((2, 3, 4)), ctx)
    bad = [
        {"begin": (0,), "end": (1,), "step": (0,)},
        {"begin": (0, 0, 0, 0), "end": (1, 1, 1, 1)},
        {"begin": (0, 0), "end": (1,)},
        {"begin": (0, 0), "end": (2, 3), "step": (2,)},
    ]
    for kw in bad:
        with pytest.raises(mx.base.MXNetError):
            mx.nd.slice(x, **kw)


def test_slice_axis(ctx):
    a = iota((2, 3, 4))
    x = nd(a, ctx)
    check(mx.nd.slice_axis(x, axis=1, begin=1, end=3), a[:, 1:3])
    check(mx.nd.slice_axis(x, axis=1, begin=1, end=None), a[:, 1:])
    check(mx.nd.slice_axis(x, axis=-1, begin=-3, end=-1), a[..., -3:-1])
    check(mx.nd.slice_axis(x, axis=0, begin=0, end=1), a[:1])
    check(x.slice_axis(axis=2, begin=1, end=2), a[:, :, 1:2])
    # MXNet 1.9.1 rejects empty and out-of-range slices.
    for begin, end in [(2, 2), (2, 1), (0, 5), (-5, 2)]:
        with pytest.raises(mx.base.MXNetError):
            mx.nd.slice_axis(x, axis=1, begin=begin, end=end)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.slice_axis(x, axis=3, begin=0, end=1)


def test_slice_like(ctx):
    a = iota((2, 3, 4))
    x = nd(a, ctx)
    like = mx.nd.zeros((1, 2, 3), ctx=ctx, dtype="int32")
    y = mx.nd.slice_like(x, like)
    check(y, a[:1, :2, :3])
    check(mx.nd.slice_like(x, like, axes=(0, -1)), a[:1, :, :3])
    check(mx.nd.slice_like(x, mx.nd.zeros((1, 2), ctx=ctx), axes=(1,)), a[:, :2])
    with pytest.raises(mx.base.MXNetError):
        mx.nd.slice_like(x, mx.nd.zeros((1, 2), ctx=ctx))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.slice_like(x, mx.nd.zeros((3, 2, 3), ctx=ctx))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.slice_like(x, mx.nd.zeros((1, 2), ctx=ctx), axes=(2,))


# ---------------------------------------------------------------- tile, repeat


@pytest.mark.parametrize("reps", [(2,), (2, 1, 1, 2), (1, 2, 1), (), (3, 2), (0, 2)])
def test_tile(reps, ctx):
    a = iota((2, 3, 4))
    check(mx.nd.tile(nd(a, ctx), reps=reps), np.tile(a, reps))


def test_tile_large_and_errors(ctx):
    a = iota((300, 200), "float16")
    check(mx.nd.tile(nd(a, ctx), reps=(3, 4)), np.tile(a, (3, 4)))
    x = nd(iota((2, 3)), ctx)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.tile(x, reps=(-1,))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.tile(x, reps=(2**32, 2**32, 2**32))


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("repeats", [1, 3])
def test_repeat(axis, repeats, ctx):
    a = iota((2, 3, 4), "int32")
    kwargs = {} if axis is None else {"axis": axis}
    check(mx.nd.repeat(nd(a, ctx), repeats=repeats, **kwargs), np.repeat(a, repeats, axis=axis))


def test_repeat_zero_and_errors(ctx):
    x = nd(iota((2, 3, 4)), ctx)
    # MXNet 1.9.1 gives a 1-d empty array for repeats=0, whatever the axis.
    assert mx.nd.repeat(x, repeats=0).shape == (0,)
    assert mx.nd.repeat(x, repeats=0, axis=1).shape == (0,)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.repeat(x, repeats=-1, axis=1)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.repeat(x, repeats=2, axis=3)


# ---------------------------------------------------------------- broadcasting


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_to(dtype, ctx):
    a = iota((2, 1, 4), dtype)
    x = nd(a, ctx)
    check(mx.nd.broadcast_to(x, shape=(2, 3, 4)), np.broadcast_to(a, (2, 3, 4)))
    check(mx.nd.broadcast_to(x, shape=(0, 3, 0)), np.broadcast_to(a, (2, 3, 4)))
    check(x.broadcast_to((2, 5, 4)), np.broadcast_to(a, (2, 5, 4)))


def test_broadcast_to_errors(ctx):
    x = mx.nd.zeros((2, 1, 4), ctx=ctx)
    # Unlike numpy, MXNet does not add leading axes.
    for shape in [(2, 3, 5), (3, 4), (4, 2, 3, 4), (2, -1, 4), ()]:
        with pytest.raises(mx.base.MXNetError):
            mx.nd.broadcast_to(x, shape=shape)
    with pytest.raises(mx.base.MXNetError):
        mx.nd.broadcast_to(mx.nd.zeros((1, 4), ctx=ctx), shape=(2, 3, 4))


def test_broadcast_like(ctx):
    a = iota((2, 1, 4))
    x = nd(a, ctx)
    check(
        mx.nd.broadcast_like(x, mx.nd.zeros((2, 3, 4), ctx=ctx, dtype="int32")),
        np.broadcast_to(a, (2, 3, 4)),
    )
    b = iota((2, 1, 1))
    rhs = mx.nd.zeros((5, 6), ctx=ctx)
    check(
        mx.nd.broadcast_like(nd(b, ctx), rhs, lhs_axes=(1, 2), rhs_axes=(0, 1)),
        np.broadcast_to(b, (2, 5, 6)),
    )
    check(
        mx.nd.broadcast_like(nd(b, ctx), rhs, lhs_axes=(-2,), rhs_axes=(-1,)),
        np.broadcast_to(b, (2, 6, 1)),
    )
    with pytest.raises(mx.base.MXNetError):
        mx.nd.broadcast_like(nd(b, ctx), rhs, lhs_axes=(0,), rhs_axes=(0,))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.broadcast_like(nd(b, ctx), rhs, lhs_axes=(1, 2), rhs_axes=(0,))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.broadcast_like(mx.nd.zeros((1, 4), ctx=ctx), mx.nd.zeros((2, 3, 4), ctx=ctx))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.broadcast_like(mx.nd.zeros((2, 2, 4), ctx=ctx), mx.nd.zeros((2, 3, 4), ctx=ctx))


def test_broadcast_axis(ctx):
    b = iota((2, 1, 1))
    x = nd(b, ctx)
    check(mx.nd.broadcast_axis(x, axis=(1, 2), size=(3, 4)), np.broadcast_to(b, (2, 3, 4)))
    check(mx.nd.broadcast_axes(x, axis=1, size=4), np.broadcast_to(b, (2, 4, 1)))
    check(x.broadcast_axes(axis=2, size=5), np.broadcast_to(b, (2, 1, 5)))
    check(mx.nd.broadcast_axis(x), b)
    assert mx.nd.broadcast_axis(x, axis=1, size=0).shape == (2, 0, 1)
    for kw in [
        {"axis": 0, "size": 4},
        {"axis": (1, 2), "size": (4,)},
        {"axis": 3, "size": 2},
        {"axis": (1, 1), "size": (3, 4)},
    ]:
        with pytest.raises(mx.base.MXNetError):
            mx.nd.broadcast_axis(x, **kw)


def test_broadcast_large(ctx):
    a = np.random.default_rng(3).standard_normal((1, 700)).astype("float64")
    check(mx.nd.broadcast_to(nd(a, ctx), shape=(500, 700)), np.broadcast_to(a, (500, 700)))
    c = a.reshape(700, 1)
    check(mx.nd.broadcast_to(nd(c, ctx), shape=(700, 400)), np.broadcast_to(c, (700, 400)))


# ---------------------------------------------------------------- attributes and chaining


def test_unknown_attribute_is_rejected(ctx):
    x = nd(iota((2, 3)), ctx)
    with pytest.raises(mx.base.MXNetError, match="unknown argument"):
        mx.nd.transpose(x, axis=(1, 0))
    with pytest.raises(mx.base.MXNetError):
        mx.nd.slice(x, begin=(0,))


def test_chained_ops_keep_order(ctx):
    a = iota((4, 6))
    x = nd(a, ctx)
    y = mx.nd.transpose(mx.nd.reshape(x, shape=(0, 2, 3)), axes=(2, 0, 1))
    z = mx.nd.concat(*mx.nd.split(y, num_outputs=3, axis=0)[::-1], dim=0)
    want = a.reshape(4, 2, 3).transpose(2, 0, 1)[::-1]
    check(z, np.ascontiguousarray(want))
    out = mx.nd.zeros((3, 4, 2), ctx=ctx)
    mx.nd.transpose(mx.nd.reshape(x, shape=(0, 2, 3)), axes=(2, 0, 1), out=out)
    check(out, a.reshape(4, 2, 3).transpose(2, 0, 1))


def test_shape_array_and_size_array(ctx):
    x = mx.nd.zeros((2, 3, 4), ctx=ctx)
    s, n = mx.nd.shape_array(x), mx.nd.size_array(x)
    assert s.dtype == np.int64 and s.asnumpy().tolist() == [2, 3, 4]
    assert n.dtype == np.int64 and n.asnumpy().tolist() == [24]
    assert mx.nd.shape_array(mx.nd.zeros((), ctx=ctx)).shape == (0,)
    sym = mx.sym.shape_array(mx.sym.Variable("x"))
    assert sym.infer_shape(x=(5, 6))[1] == [(2,)]
    assert sym.infer_type(x=np.float32)[1] == [np.int64]


@pytest.mark.parametrize("rhs,attrs,want", [
    ((6, 2, 2), {}, (6, 2, 2)),
    ((4, 3, 5), {"lhs_begin": 1, "rhs_begin": 0, "rhs_end": 2}, (2, 4, 3)),
    ((12,), {"lhs_begin": -2, "rhs_begin": 0}, (2, 12)),
])
def test_reshape_like_matches_mxnet(ctx, rhs, attrs, want):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = mx.nd.array(a, ctx=ctx)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.reshape_like(x, mx.nd.zeros(rhs, ctx=ctx), **attrs)
    assert y.shape == want
    np.testing.assert_array_equal(y.asnumpy(), a.reshape(want))
    y.backward(mx.nd.ones(want, ctx=ctx) * 2)
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((2, 3, 4), 2.0))


def test_reshape_like_of_a_different_size_names_the_shapes():
    with pytest.raises(mx.MXNetError, match=r"reshape_like.*\(2, 3, 4\)"):
        mx.nd.reshape_like(mx.nd.zeros((2, 3, 4)), mx.nd.zeros((5,)))
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    assert mx.sym.reshape_like(a, b).infer_shape(a=(2, 3, 4), b=(6, 4))[1] == [(6, 4)]


def test_broadcast_like_refuses_empty_axes():
    lhs, rhs = mx.nd.ones((1, 3)), mx.nd.ones((4, 3))
    with pytest.raises(mx.MXNetError, match="must not be empty"):
        mx.nd.broadcast_like(lhs, rhs, lhs_axes=(), rhs_axes=())
    assert mx.nd.broadcast_like(lhs, rhs, lhs_axes=(0,), rhs_axes=(0,)).shape == (4, 3)


def test_legacy_crop(ctx):
    # Expectations printed by MXNet 1.9.1.
    x = mx.nd.array(np.arange(2 * 1 * 5 * 6).reshape(2, 1, 5, 6), ctx=ctx)
    assert mx.nd.Crop(x, h_w=(2, 3), offset=(1, 2)).asnumpy().tolist() == [
        [[[8, 9, 10], [14, 15, 16]]], [[[38, 39, 40], [44, 45, 46]]]]
    like = mx.nd.zeros((1, 1, 3, 2), ctx=ctx)
    got = mx.nd.Crop(x, like, num_args=2, center_crop=True).asnumpy()[0].tolist()
    assert got == [[[8, 9], [14, 15], [20, 21]]]
    s = mx.sym.Crop(mx.sym.var("a"), mx.sym.var("b"), num_args=2)
    assert s.list_arguments() == ["a", "b"]
    assert s.infer_shape(a=(2, 3, 8, 8), b=(1, 1, 4, 5))[1] == [(2, 3, 4, 5)]
    a = mx.nd.array(np.random.rand(1, 1, 4, 4), ctx=ctx)
    b = mx.nd.ones((1, 1, 2, 2), ctx=ctx)
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Crop(a, b, num_args=2, center_crop=True)
    y.backward(mx.nd.ones((1, 1, 2, 2), ctx=ctx))
    assert a.grad.asnumpy()[0, 0].tolist() == [[0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    assert not b.grad.asnumpy().any()
    with pytest.raises(mx.base.MXNetError, match=r"Crop.*6x3 does not fit.*5x6"):
        mx.nd.Crop(x, h_w=(6, 3))
    with pytest.raises(mx.base.MXNetError, match=r"Crop.*offset \(3, 0\)"):
        mx.nd.Crop(x, h_w=(3, 3), offset=(3, 0))

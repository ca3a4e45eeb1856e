"""Operators defined as graphs of other operators: values against NumPy, gradients
against finite differences, and the same results imperatively, bound, and recorded."""

import numpy as np
import pytest
import rsmx as mx
from rsmx.test_utils import assert_almost_equal, check_numeric_gradient, check_symbolic_forward

pytestmark = pytest.mark.timeout(120)

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def np_standardize(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps), mean, np.sqrt(var + eps), var


# ---------------------------------------------------------------- normalization layers


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_layer_norm_forward_outputs_and_gradient(axis):
    x, c = rand(3, 4, 5), None
    c = x.shape[axis]
    gamma, beta = rand(c), rand(c)
    norm, mean, std, _ = np_standardize(x, axis, 1e-5)
    pshape = [1, 1, 1]
    pshape[axis] = c
    want = norm * gamma.reshape(pshape) + beta.reshape(pshape)
    out = mx.nd.LayerNorm(mx.nd.array(x), mx.nd.array(gamma), mx.nd.array(beta), axis=axis)
    assert_almost_equal(out.asnumpy(), want, rtol=1e-4, atol=1e-5)
    outs = mx.nd.LayerNorm(
        mx.nd.array(x), mx.nd.array(gamma), mx.nd.array(beta), axis=axis, output_mean_var=True
    )
    assert len(outs) == 3
    assert_almost_equal(outs[1].asnumpy(), mean, rtol=1e-4, atol=1e-5)
    assert_almost_equal(outs[2].asnumpy(), std, rtol=1e-4, atol=1e-5)
    sym = mx.sym.LayerNorm(mx.sym.Variable("data"), axis=axis, name="ln")
    assert sym.list_arguments() == ["data", "ln_gamma", "ln_beta"]
    _, out_shapes, _ = sym.infer_shape(data=x.shape)
    assert out_shapes == [x.shape]
    check_numeric_gradient(
        sym, [x.astype(np.float64), gamma.astype(np.float64), beta.astype(np.float64)],
        numeric_eps=1e-3, rtol=1e-2, atol=1e-3, dtype=np.float64,
    )


def test_instance_norm_matches_numpy_and_differentiates():
    x, gamma, beta = rand(2, 3, 4, 5), rand(3), rand(3)
    norm, _, _, _ = np_standardize(x, (2, 3), 1e-3)
    want = norm * gamma.reshape(1, 3, 1, 1) + beta.reshape(1, 3, 1, 1)
    sym = mx.sym.InstanceNorm(mx.sym.Variable("data"), name="in")
    check_symbolic_forward(sym, [x, gamma, beta], [want], rtol=1e-4, atol=1e-5)
    check_numeric_gradient(
        sym, [x.astype(np.float64), gamma.astype(np.float64), beta.astype(np.float64)],
        numeric_eps=1e-3, rtol=1e-2, atol=1e-3, dtype=np.float64,
    )


def test_group_norm_scales_per_group():
    x, gamma, beta = rand(2, 6, 3, 3), rand(2), rand(2)
    g = x.reshape(2, 2, -1)
    norm, mean, std, _ = np_standardize(g, 2, 1e-5)
    want = (norm * gamma.reshape(1, 2, 1) + beta.reshape(1, 2, 1)).reshape(x.shape)
    outs = mx.nd.GroupNorm(
        mx.nd.array(x), mx.nd.array(gamma), mx.nd.array(beta), num_groups=2, output_mean_var=True
    )
    assert_almost_equal(outs[0].asnumpy(), want, rtol=1e-4, atol=1e-5)
    assert outs[1].shape == (2, 2) and outs[2].shape == (2, 2)
    assert_almost_equal(outs[2].asnumpy(), std.reshape(2, 2), rtol=1e-4, atol=1e-5)
    with pytest.raises(mx.base.MXNetError, match="num_groups"):
        mx.nd.GroupNorm(mx.nd.array(x), mx.nd.array(gamma), mx.nd.array(beta), num_groups=4)


@pytest.mark.parametrize(
    "mode,axes", [("instance", (1, 2, 3)), ("channel", (1,)), ("spatial", (2, 3))]
)
def test_l2_normalization_modes(mode, axes):
    x = rand(2, 3, 4, 5)
    want = x / np.sqrt((x * x).sum(axis=axes, keepdims=True) + 1e-10)
    sym = mx.sym.L2Normalization(mx.sym.Variable("data"), mode=mode)
    check_symbolic_forward(sym, [x], [want], rtol=1e-4, atol=1e-5)
    check_numeric_gradient(sym, [x.astype(np.float64)], numeric_eps=1e-4, rtol=1e-2, atol=1e-4, dtype=np.float64)


def test_lrn_sums_squares_over_neighbouring_channels():
    x = rand(2, 5, 3, 3)
    n, alpha, beta, k = 3, 1e-2, 0.75, 2.0
    sq = np.pad(x * x, ((0, 0), (1, 1), (0, 0), (0, 0)))
    window = sum(sq[:, i : i + 5] for i in range(n))
    want = x / (k + alpha / n * window) ** beta
    out = mx.nd.LRN(mx.nd.array(x), nsize=n, alpha=alpha, beta=beta, knorm=k)
    assert_almost_equal(out.asnumpy(), want, rtol=1e-4, atol=1e-5)
    sym = mx.sym.LRN(mx.sym.Variable("data"), nsize=n, alpha=alpha, beta=beta, knorm=k)
    check_numeric_gradient(sym, [x.astype(np.float64)], numeric_eps=1e-4, rtol=1e-2, atol=1e-4, dtype=np.float64)
    with pytest.raises(mx.base.MXNetError, match="nsize"):
        mx.nd.LRN(mx.nd.array(x), nsize=2)


@pytest.mark.parametrize("axes,keepdims", [((1,), False), ((0, 2), True), (None, False)])
def test_moments(axes, keepdims):
    x = rand(3, 4, 5)
    kw = {} if axes is None else {"axes": axes}
    mean, var = mx.nd.moments(mx.nd.array(x), keepdims=keepdims, **kw)
    assert_almost_equal(mean.asnumpy(), x.mean(axis=axes, keepdims=keepdims), rtol=1e-4, atol=1e-5)
    assert_almost_equal(var.asnumpy(), x.var(axis=axes, keepdims=keepdims), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- sequences


def np_sequence_mask(x, lengths, value, axis):
    out = x.copy()
    for n, length in enumerate(lengths.astype(int)):
        if axis == 0:
            out[length:, n] = value
        else:
            out[n, length:] = value
    return out


@pytest.mark.parametrize("axis", [0, 1])
def test_sequence_mask_last_reverse(axis):
    x = rand(4, 3, 2) if axis == 0 else rand(3, 4, 2)
    lengths = np.array([1, 4, 2], dtype=np.float32)
    data, ln = mx.nd.array(x), mx.nd.array(lengths)
    masked = mx.nd.SequenceMask(data, ln, use_sequence_length=True, value=-1.0, axis=axis)
    assert_almost_equal(masked.asnumpy(), np_sequence_mask(x, lengths, -1.0, axis))
    last = mx.nd.SequenceLast(data, ln, use_sequence_length=True, axis=axis)
    want = np.stack([x[int(t) - 1, n] if axis == 0 else x[n, int(t) - 1] for n, t in enumerate(lengths)])
    assert_almost_equal(last.asnumpy(), want)
    assert_almost_equal(mx.nd.SequenceMask(data, axis=axis).asnumpy(), x)
    if axis == 0:
        rev = mx.nd.SequenceReverse(data, ln, use_sequence_length=True)
        want = x.copy()
        for n, t in enumerate(lengths.astype(int)):
            want[:t, n] = x[:t, n][::-1]
        assert_almost_equal(rev.asnumpy(), want)
        assert_almost_equal(mx.nd.SequenceReverse(data).asnumpy(), x[::-1])
        assert_almost_equal(mx.nd.SequenceLast(data).asnumpy(), x[-1])


def test_sequence_ops_differentiate_data_only():
    x = rand(4, 3, 2).astype(np.float64)
    lengths = np.array([1, 4, 2], dtype=np.float64)
    data, ln = mx.sym.Variable("data"), mx.sym.Variable("len")
    for sym in (
        mx.sym.SequenceMask(data, ln, use_sequence_length=True),
        mx.sym.SequenceLast(data, ln, use_sequence_length=True),
        mx.sym.SequenceReverse(data, ln, use_sequence_length=True),
    ):
        assert sym.list_arguments() == ["data", "len"]
        check_numeric_gradient(
            sym, {"data": x, "len": lengths}, grad_nodes=["data"], numeric_eps=1e-4,
            rtol=1e-3, atol=1e-5, dtype=np.float64,
        )
    assert mx.sym.SequenceMask(data).list_arguments() == ["data"]


# ---------------------------------------------------------------- small operators


def test_div_sqrt_dim_and_quadratic():
    x = rand(2, 3, 16)
    assert_almost_equal(mx.nd.contrib.div_sqrt_dim(mx.nd.array(x)).asnumpy(), x / 4.0)
    q = mx.nd.contrib.quadratic(mx.nd.array(x), a=2.0, b=-1.0, c=0.5)
    assert_almost_equal(q.asnumpy(), 2 * x * x - x + 0.5, rtol=1e-5, atol=1e-5)
    sym = mx.sym.contrib.quadratic(mx.sym.Variable("data"), a=2.0, b=-1.0, c=0.5)
    check_numeric_gradient(sym, [x.astype(np.float64)], numeric_eps=1e-4, rtol=1e-3, atol=1e-4, dtype=np.float64)


def test_allclose_and_all_finite():
    a = rand(3, 4)
    b = a + 1e-7
    close = mx.nd.contrib.allclose(mx.nd.array(a), mx.nd.array(b))
    assert close.shape == () and close.dtype == np.uint8 and close.asnumpy() == 1
    b[1, 2] += 1.0
    assert mx.nd.contrib.allclose(mx.nd.array(a), mx.nd.array(b)).asnumpy() == 0
    n = np.array([np.nan, 1.0], dtype=np.float32)
    assert mx.nd.contrib.allclose(mx.nd.array(n), mx.nd.array(n)).asnumpy() == 1
    assert mx.nd.contrib.allclose(mx.nd.array(n), mx.nd.array(n), equal_nan=False).asnumpy() == 0
    assert mx.nd.all_finite(mx.nd.array(a)).asnumpy().tolist() == [1.0]
    a[0, 0] = np.inf
    assert mx.nd.all_finite(mx.nd.array(a)).asnumpy().tolist() == [0.0]
    both = mx.nd.multi_all_finite(mx.nd.ones(3), mx.nd.array(a), num_arrays=2)
    assert both.asnumpy().tolist() == [0.0]
    assert mx.nd.multi_all_finite(mx.nd.ones(3), mx.nd.ones(2), num_arrays=2).asnumpy().tolist() == [1.0]


def test_index_array_and_arange_like():
    x = mx.nd.zeros((2, 3))
    idx = mx.nd.contrib.index_array(x)
    assert idx.dtype == np.int64
    want = np.stack(np.meshgrid(np.arange(2), np.arange(3), indexing="ij"), axis=-1)
    assert (idx.asnumpy() == want).all()
    assert (mx.nd.contrib.index_array(x, axes=(1,)).asnumpy() == want[..., 1:]).all()
    r = mx.nd.contrib.arange_like(x, start=1.0, step=0.5)
    assert_almost_equal(r.asnumpy(), (1 + 0.5 * np.arange(6)).reshape(2, 3))
    assert_almost_equal(mx.nd.contrib.arange_like(x, axis=1).asnumpy(), np.arange(3))


def test_index_copy_and_batch_take():
    old = rand(5, 3)
    new = rand(2, 3)
    out = mx.nd.contrib.index_copy(mx.nd.array(old), mx.nd.array([3, 0]), mx.nd.array(new))
    want = old.copy()
    want[[3, 0]] = new
    assert_almost_equal(out.asnumpy(), want)
    a = rand(4, 3)
    got = mx.nd.batch_take(mx.nd.array(a), mx.nd.array([0, 2, 1, 2], dtype="int32"))
    assert_almost_equal(got.asnumpy(), a[np.arange(4), [0, 2, 1, 2]])


@pytest.mark.parametrize("k", [0, 1, -2])
def test_diag(k):
    m = rand(4, 5)
    assert_almost_equal(mx.nd.diag(mx.nd.array(m), k=k).asnumpy(), np.diag(m, k))
    v = rand(3)
    assert_almost_equal(mx.nd.diag(mx.nd.array(v), k=k).asnumpy(), np.diag(v, k))
    t = rand(2, 3, 4)
    got = mx.nd.diag(mx.nd.array(t), k=k, axis1=1, axis2=2).asnumpy()
    assert_almost_equal(got, np.diagonal(t, k, axis1=1, axis2=2))


def test_split_v2_by_indices_and_sections():
    x = rand(4, 6)
    parts = mx.nd.split_v2(mx.nd.array(x), (1, 4), axis=1)
    assert len(parts) == 3
    for got, want in zip(parts, np.split(x, [1, 4], axis=1), strict=True):
        assert_almost_equal(got.asnumpy(), want)
    parts = mx.nd.split_v2(mx.nd.array(x), 2, axis=0)
    assert [p.shape for p in parts] == [(2, 6), (2, 6)]
    sym = mx.sym.split_v2(mx.sym.Variable("data"), (2,), axis=1, name="sp")
    assert sym.list_outputs() == ["sp_output0", "sp_output1"]
    _, shapes, _ = sym.infer_shape(data=(4, 6))
    assert shapes == [(4, 2), (4, 4)]


def test_ravel_and_unravel_round_trip():
    idx = np.array([[1, 0, 2], [3, 1, 0]], dtype=np.float32)
    flat = mx.nd.ravel_multi_index(mx.nd.array(idx), shape=(3, 4))
    assert flat.asnumpy().tolist() == np.ravel_multi_index(idx.astype(int), (3, 4)).tolist()
    back = mx.nd.unravel_index(flat, shape=(3, 4))
    assert back.asnumpy().tolist() == idx.tolist()


# ---------------------------------------------------------------- Pad, UpSampling


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_modes_match_numpy(mode):
    x = rand(2, 2, 4, 5)
    width = (0, 0, 0, 0, 1, 2, 2, 1)
    kw = {"constant_value": 3.0} if mode == "constant" else {}
    got = mx.nd.Pad(mx.nd.array(x), mode=mode, pad_width=width, **kw)
    np_kw = {"constant_values": 3.0} if mode == "constant" else {}
    want = np.pad(x, [(0, 0), (0, 0), (1, 2), (2, 1)], mode=mode, **np_kw)
    assert_almost_equal(got.asnumpy(), want)
    sym = mx.sym.Pad(mx.sym.Variable("data"), mode=mode, pad_width=width)
    check_numeric_gradient(sym, [x.astype(np.float64)], numeric_eps=1e-4, rtol=1e-3, atol=1e-5, dtype=np.float64)
    with pytest.raises(mx.base.MXNetError, match="batch and channel"):
        mx.nd.Pad(mx.nd.array(x), mode=mode, pad_width=(1, 0, 0, 0, 1, 1, 1, 1))


def test_upsampling_nearest_concat_and_sum():
    a, b = rand(1, 2, 2, 2), rand(1, 2, 4, 4)
    got = mx.nd.UpSampling(mx.nd.array(a), mx.nd.array(b), scale=2, sample_type="nearest", num_args=2)
    up = a.repeat(2, axis=2).repeat(2, axis=3)
    assert_almost_equal(got.asnumpy(), np.concatenate([up, b], axis=1))
    got = mx.nd.UpSampling(
        mx.nd.array(a), mx.nd.array(b), scale=2, sample_type="nearest", num_args=2, multi_input_mode="sum"
    )
    assert_almost_equal(got.asnumpy(), up + b)


def test_upsampling_bilinear_is_a_grouped_deconvolution():
    x = rand(1, 3, 4, 4)
    sym = mx.sym.UpSampling(mx.sym.Variable("data"), scale=2, sample_type="bilinear", num_filter=3, num_args=2, name="up")
    args, outs, _ = sym.infer_shape(data=x.shape)
    assert args == [x.shape, (3, 1, 4, 4)] and outs == [(1, 3, 8, 8)]
    w = rand(3, 1, 4, 4)
    want = mx.nd.Deconvolution(
        mx.nd.array(x), mx.nd.array(w), kernel=(4, 4), stride=(2, 2), pad=(1, 1),
        num_filter=3, num_group=3, no_bias=True,
    )
    check_symbolic_forward(sym, [x, w], [want.asnumpy()], rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- the machinery


def test_composite_writes_into_out_and_records_for_autograd():
    x = mx.nd.array(rand(2, 3, 4))
    gamma, beta = mx.nd.ones((4,)), mx.nd.zeros((4,))
    out = mx.nd.zeros((2, 3, 4))
    res = mx.nd.LayerNorm(x, gamma, beta, out=out)
    assert res is out
    assert abs(out.asnumpy().mean()) < 1e-5
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.L2Normalization(x)
        loss = (y * y).sum()
    loss.backward()
    # The norm of a normalized vector does not change along the data: zero gradient.
    assert np.abs(x.grad.asnumpy()).max() < 1e-4


def test_executor_keeps_the_composite_nodes_name_for_its_output():
    data = mx.sym.Variable("data")
    sym = mx.sym.LRN(data, nsize=3, name="lrn")
    assert sym.list_outputs() == ["lrn_output"]
    ex = sym.simple_bind(mx.cpu(), data=(1, 3, 2, 2))
    seen = []
    ex.set_monitor_callback(lambda name, arr: seen.append(name))
    ex.forward(data=mx.nd.ones((1, 3, 2, 2)))
    ex.outputs[0].wait_to_read()
    # The monitor sees the composite's outputs, hidden ones included, not its parts.
    assert seen == ["lrn_output", "lrn_tmp_norm"]
    assert ex.output_dict.keys() == {"lrn_output"}
    seen.clear()
    ex.set_monitor_callback(lambda name, arr: seen.append(name), monitor_all=True)
    ex.forward(data=mx.nd.ones((1, 3, 2, 2)))
    mx.nd.waitall()
    assert seen == ["data", "lrn_data", "lrn_output", "lrn_tmp_norm"]


def test_bad_input_names_the_composite_operator():
    with pytest.raises(mx.base.MXNetError, match="LayerNorm"):
        mx.nd.LayerNorm(mx.nd.ones((2, 3)), mx.nd.ones((4,)), mx.nd.ones((3,)))
    with pytest.raises(mx.base.MXNetError, match="SequenceMask"):
        mx.nd.SequenceMask(mx.nd.ones((4, 3)), mx.nd.ones((2,)), use_sequence_length=True)


# ---------------------------------------------------------------- losses, linear algebra


def test_smooth_l1_and_softmax_cross_entropy():
    x = rand(4, 5) * 3
    sigma = 2.0
    a = np.abs(x)
    want = np.where(a < 1 / sigma**2, 0.5 * (sigma * x) ** 2, a - 0.5 / sigma**2)
    assert_almost_equal(mx.nd.smooth_l1(mx.nd.array(x), scalar=sigma).asnumpy(), want, rtol=1e-5, atol=1e-6)
    label = np.array([0, 4, 2, 1], dtype=np.float32)
    logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    got = mx.nd.softmax_cross_entropy(mx.nd.array(x), mx.nd.array(label))
    assert got.shape == (1,)
    assert_almost_equal(got.asnumpy(), [-logp[np.arange(4), label.astype(int)].sum()], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_and_gemm2_on_batches(ta, tb):
    a = rand(2, 3, 4, 5)
    b = rand(2, 3, 5, 6)
    if ta:
        a = a.swapaxes(-1, -2).copy()
    if tb:
        b = b.swapaxes(-1, -2).copy()
    c = rand(2, 3, 4, 6)
    opa = a.swapaxes(-1, -2) if ta else a
    opb = b.swapaxes(-1, -2) if tb else b
    got = mx.nd.linalg.gemm(mx.nd.array(a), mx.nd.array(b), mx.nd.array(c), transpose_a=ta, transpose_b=tb, alpha=2.0, beta=0.5)
    assert_almost_equal(got.asnumpy(), 2 * opa @ opb + 0.5 * c, rtol=1e-4, atol=1e-4)
    got = mx.nd.linalg.gemm2(mx.nd.array(a), mx.nd.array(b), transpose_a=ta, transpose_b=tb, alpha=-1.0)
    assert_almost_equal(got.asnumpy(), -(opa @ opb), rtol=1e-4, atol=1e-4)


def test_gemm2_with_the_row_axis_elsewhere_and_gradient():
    a, b = rand(4, 2, 3), rand(3, 2, 5)
    got = mx.nd.linalg.gemm2(mx.nd.array(a), mx.nd.array(b), axis=0)
    want = np.einsum("ibk,kbj->ibj", a, b)
    assert_almost_equal(got.asnumpy(), want, rtol=1e-4, atol=1e-4)
    sym = mx.sym.linalg.gemm2(mx.sym.Variable("A"), mx.sym.Variable("B"), transpose_b=True)
    check_numeric_gradient(sym, [rand(2, 3, 4).astype(np.float64), rand(2, 5, 4).astype(np.float64)],
                           numeric_eps=1e-4, rtol=1e-3, atol=1e-4, dtype=np.float64)


def test_syrk_sumlogdiag_extractdiag():
    a = rand(2, 3, 4)
    assert_almost_equal(mx.nd.linalg.syrk(mx.nd.array(a), alpha=0.5).asnumpy(),
                        0.5 * a @ a.swapaxes(-1, -2), rtol=1e-4, atol=1e-5)
    assert_almost_equal(mx.nd.linalg.syrk(mx.nd.array(a), transpose=True).asnumpy(),
                        a.swapaxes(-1, -2) @ a, rtol=1e-4, atol=1e-5)
    m = np.abs(rand(2, 4, 4)) + 0.5
    got = mx.nd.linalg.sumlogdiag(mx.nd.array(m)).asnumpy()
    assert_almost_equal(got, np.log(np.diagonal(m, axis1=1, axis2=2)).sum(axis=-1), rtol=1e-5, atol=1e-5)
    assert_almost_equal(mx.nd.linalg.extractdiag(mx.nd.array(m), offset=1).asnumpy(),
                        np.diagonal(m, 1, axis1=1, axis2=2))


def np_packed_positions(n, offset, lower):
    """MXNet's packing of a triangle: rows of the lower triangle in turn; the upper one
    packed as its transpose."""
    a = abs(offset)
    pos = {}
    for r in range(n):
        for c in range(n):
            row, col = (c, r) if offset > 0 or (offset == 0 and not lower) else (r, c)
            row -= a
            if row >= 0 and row >= col:
                pos[(r, c)] = row * (row + 1) // 2 + col
    return pos


@pytest.mark.parametrize("offset,lower", [(0, True), (0, False), (-1, True), (2, True)])
def test_extracttrian_and_maketrian(offset, lower):
    n = 4
    a = rand(2, n, n)
    pos = np_packed_positions(n, offset, lower)
    want = np.zeros((2, len(pos)), np.float32)
    for (r, c), i in pos.items():
        want[:, i] = a[:, r, c]
    got = mx.nd.linalg.extracttrian(mx.nd.array(a), offset=offset, lower=lower)
    assert_almost_equal(got.asnumpy(), want)
    back = mx.nd.linalg.maketrian(got, offset=offset, lower=lower).asnumpy()
    mask = np.zeros((n, n), bool)
    for r, c in pos:
        mask[r, c] = True
    assert_almost_equal(back, np.where(mask, a, 0))
    x = mx.sym.Variable("x")
    sym = mx.sym.linalg.maketrian(mx.sym.linalg.extracttrian(x, offset=offset, lower=lower) ** 2,
                                  offset=offset, lower=lower)
    check_numeric_gradient(sym, [a.astype(np.float64)], numeric_eps=1e-4, rtol=1e-3, atol=1e-4,
                           dtype=np.float64)


def test_extracttrian_order_matches_mxnet():
    # MXNet 1.9.1: linalg.extracttrian(arange(9).reshape(3, 3), offset=0, lower=False)
    a = mx.nd.arange(9).reshape((3, 3))
    assert mx.nd.linalg.extracttrian(a, lower=False).asnumpy().tolist() == [0, 1, 4, 2, 5, 8]
    assert mx.nd.linalg.extracttrian(a).asnumpy().tolist() == [0, 3, 4, 6, 7, 8]


def test_trian_errors_name_the_operator():
    with pytest.raises(mx.base.MXNetError, match="extracttrian.*square"):
        mx.nd.linalg.extracttrian(mx.nd.ones((2, 3)))
    with pytest.raises(mx.base.MXNetError, match="extracttrian.*offset 3"):
        mx.nd.linalg.extracttrian(mx.nd.ones((3, 3)), offset=3)
    with pytest.raises(mx.base.MXNetError, match="maketrian.*triangle"):
        mx.nd.linalg.maketrian(mx.nd.ones((2, 4)))


@pytest.mark.parametrize("offset", [-2, 0, 1])
def test_makediag(offset):
    v = rand(2, 3)
    got = mx.nd.linalg.makediag(mx.nd.array(v), offset=offset).asnumpy()
    want = np.stack([np.diagflat(row, k=offset) for row in v])
    assert_almost_equal(got, want)
    x = mx.sym.Variable("x")
    check_numeric_gradient(mx.sym.linalg.makediag(x, offset=offset) * 3, [v.astype(np.float64)],
                           numeric_eps=1e-4, rtol=1e-3, atol=1e-4, dtype=np.float64)


# ---------------------------------------------------------------- Correlation


def np_correlation(d1, d2, k, md, s1, s2, pad, multiply):
    n, c, h, w = d1.shape
    p1 = np.pad(d1, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    p2 = np.pad(d2, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    border = md + (k - 1) // 2
    th = int(np.ceil((h + 2 * pad - 2 * border) / s1))
    tw = int(np.ceil((w + 2 * pad - 2 * border) / s1))
    r = md // s2
    gw = 2 * r + 1
    out = np.zeros((n, gw * gw, th, tw))
    for tc in range(gw * gw):
        dx, dy = (tc % gw - r) * s2, (tc // gw - r) * s2
        for i in range(th):
            for j in range(tw):
                y1, x1 = i * s1 + md, j * s1 + md
                a = p1[:, :, y1 : y1 + k, x1 : x1 + k]
                b = p2[:, :, y1 + dy : y1 + dy + k, x1 + dx : x1 + dx + k]
                v = a * b if multiply else np.abs(a - b)
                out[:, tc, i, j] = v.reshape(n, -1).sum(axis=1) / (k * k * c)
    return out


@pytest.mark.parametrize("k,md,s1,s2,pad,multiply", [(1, 2, 1, 1, 2, True), (3, 2, 2, 2, 3, False)])
def test_correlation_matches_its_definition(k, md, s1, s2, pad, multiply):
    d1, d2 = rand(2, 3, 6, 7), rand(2, 3, 6, 7)
    kw = dict(kernel_size=k, max_displacement=md, stride1=s1, stride2=s2, pad_size=pad, is_multiply=multiply)
    got = mx.nd.Correlation(mx.nd.array(d1), mx.nd.array(d2), **kw)
    assert_almost_equal(got.asnumpy(), np_correlation(d1, d2, k, md, s1, s2, pad, multiply), rtol=1e-4, atol=1e-5)
    sym = mx.sym.Correlation(mx.sym.Variable("a"), mx.sym.Variable("b"), **kw)
    check_numeric_gradient(sym, [d1.astype(np.float64), d2.astype(np.float64)], numeric_eps=1e-4,
                           rtol=1e-2, atol=1e-4, dtype=np.float64)
    with pytest.raises(mx.base.MXNetError, match="odd"):
        mx.nd.Correlation(mx.nd.array(d1), mx.nd.array(d2), kernel_size=2)


# ---------------------------------------------------------------- BatchNorm's other names


@pytest.mark.parametrize("op", ["BatchNorm_v1", "SyncBatchNorm"])
def test_batch_norm_forms_run_as_batch_norm(op):
    x = rand(4, 3, 2, 2)
    data = mx.sym.Variable("data")
    make = mx.sym.contrib.SyncBatchNorm if op == "SyncBatchNorm" else mx.sym.BatchNorm_v1
    kw = {"key": "bn"} if op == "SyncBatchNorm" else {}
    sym = make(data, fix_gamma=False, name="bn", **kw)
    ref = mx.sym.BatchNorm(data, fix_gamma=False, name="bn")
    assert sym.list_arguments() == ref.list_arguments()
    assert sym.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    outs = []
    for s in (sym, ref):
        ex = s.simple_bind(mx.cpu(), data=x.shape)
        ex.arg_dict["bn_gamma"][:] = 1.5
        ex.forward(is_train=True, data=mx.nd.array(x))
        ex.backward(mx.nd.ones(x.shape))
        outs.append((ex.outputs[0].asnumpy(), ex.grad_dict["data"].asnumpy(), ex.aux_dict["bn_moving_mean"].asnumpy()))
    for got, want in zip(outs[0], outs[1], strict=True):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- attention products


def np_heads(x, heads, parts, which):
    seq, batch, _ = x.shape
    d = x.shape[2] // (heads * parts)
    p = x.reshape(seq, batch, heads, parts, d)[:, :, :, which, :]
    return p.transpose(1, 2, 0, 3).reshape(batch * heads, seq, d)


def test_interleaved_self_attention_products():
    heads, seq, batch, d = 2, 5, 3, 4
    qkv = rand(seq, batch, heads * 3 * d)
    q, k, v = (np_heads(qkv, heads, 3, i) for i in range(3))
    att = mx.nd.contrib.interleaved_matmul_selfatt_qk(mx.nd.array(qkv), heads=heads)
    assert_almost_equal(att.asnumpy(), (q / np.sqrt(d)) @ k.transpose(0, 2, 1), rtol=1e-4, atol=1e-5)
    w = rand(batch * heads, seq, seq)
    out = mx.nd.contrib.interleaved_matmul_selfatt_valatt(mx.nd.array(qkv), mx.nd.array(w), heads=heads)
    want = (w @ v).reshape(batch, heads, seq, d).transpose(2, 0, 1, 3).reshape(seq, batch, heads * d)
    assert_almost_equal(out.asnumpy(), want, rtol=1e-4, atol=1e-5)


def test_interleaved_encoder_decoder_attention_products():
    heads, lq, lk, batch, d = 2, 3, 5, 2, 4
    queries = rand(lq, batch, heads * d)
    kv = rand(lk, batch, heads * 2 * d)
    q, k, v = np_heads(queries, heads, 1, 0), np_heads(kv, heads, 2, 0), np_heads(kv, heads, 2, 1)
    att = mx.nd.contrib.interleaved_matmul_encdec_qk(mx.nd.array(queries), mx.nd.array(kv), heads=heads)
    assert_almost_equal(att.asnumpy(), (q / np.sqrt(d)) @ k.transpose(0, 2, 1), rtol=1e-4, atol=1e-5)
    w = rand(batch * heads, lq, lk)
    out = mx.nd.contrib.interleaved_matmul_encdec_valatt(mx.nd.array(kv), mx.nd.array(w), heads=heads)
    want = (w @ v).reshape(batch, heads, lq, d).transpose(2, 0, 1, 3).reshape(lq, batch, heads * d)
    assert_almost_equal(out.asnumpy(), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(mx.base.MXNetError, match="encdec_qk"):
        mx.nd.contrib.interleaved_matmul_encdec_qk(mx.nd.array(queries), mx.nd.array(queries), heads=heads)


def test_amp_cast_and_the_shape_tie():
    x = mx.nd.array([1.5, -2.25])
    y = mx.nd.amp_cast(x, dtype="float16")
    assert y.dtype == np.float16 and y.asnumpy().tolist() == [1.5, -2.25]
    w = mx.sym.Variable("weight")
    tied = mx.sym._internal._identity_with_attr_like_rhs(mx.sym.broadcast_add(w, mx.sym.Variable("s", shape=(1,))), w)
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), weight=tied, num_hidden=11, no_bias=True)
    args, _, _ = net.infer_shape(data=(7, 100))
    assert dict(zip(net.list_arguments(), args, strict=True))["weight"] == (11, 100)


def np_im2col(x, k, s, d, p):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = np.zeros((n, c, k[0], k[1], oh, ow), dtype=x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            ys, xs = i * d[0], j * d[1]
            cols[:, :, i, j] = xp[:, :, ys : ys + s[0] * oh : s[0], xs : xs + s[1] * ow : s[1]]
    return cols.reshape(n, c * k[0] * k[1], oh * ow)


@pytest.mark.parametrize("k,s,d,p", [((2, 2), (1, 1), (1, 1), (0, 0)), ((3, 2), (2, 1), (1, 2), (1, 1))])
def test_im2col_and_its_adjoint_col2im(k, s, d, p):
    x = rand(2, 3, 6, 7)
    kw = dict(kernel=k, stride=s, dilate=d, pad=p)
    cols = mx.nd.im2col(mx.nd.array(x), **kw)
    want = np_im2col(x, k, s, d, p)
    assert_almost_equal(cols.asnumpy(), want)
    y = rand(*want.shape)
    back = mx.nd.col2im(mx.nd.array(y), output_size=(6, 7), **kw)
    assert back.shape == x.shape
    # col2im is im2col's adjoint: <im2col(x), y> == <x, col2im(y)>.
    assert np.isclose((want * y).sum(), (x * back.asnumpy()).sum(), rtol=1e-4)


def np_adaptive_avg(x, oh, ow):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        r0, r1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            c0, c1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
    return out


@pytest.mark.parametrize("size", [3, (4, 7), (5, 1)])
def test_adaptive_avg_pooling(size):
    x = rand(2, 3, 5, 6)
    oh, ow = (size, size) if isinstance(size, int) else size
    got = mx.nd.contrib.AdaptiveAvgPooling2D(mx.nd.array(x), output_size=size)
    assert_almost_equal(got.asnumpy(), np_adaptive_avg(x, oh, ow), rtol=1e-5, atol=1e-6)
    sym = mx.sym.contrib.AdaptiveAvgPooling2D(mx.sym.Variable("data"), output_size=size)
    check_numeric_gradient(sym, [x.astype(np.float64)], numeric_eps=1e-4, rtol=1e-3, atol=1e-5, dtype=np.float64)


# ---------------------------------------------------------------- densities


def test_random_pdf_log_densities_match_their_formulas():
    from math import lgamma, pi

    lg = np.vectorize(lgamma)
    x = np.abs(rand(2, 5)) + 0.1
    k = np.array([[3.0], [7.0]], dtype=np.float32) + np.zeros((2, 5), np.float32)
    a, b = np.array([1.5, 2.5], np.float32), np.array([0.5, 2.0], np.float32)
    col = lambda v: v.reshape(2, 1)  # noqa: E731
    cases = {
        "normal": ((x, a, b), -0.5 * ((x - col(a)) / col(b)) ** 2 - np.log(np.sqrt(2 * pi) * col(b))),
        "uniform": ((x, a, a + b), -np.log(col(b)) + 0 * x),
        "gamma": ((x, a, b), col(a) * np.log(col(b)) + (col(a) - 1) * np.log(x) - col(b) * x - lg(col(a))),
        "exponential": ((x, a), np.log(col(a)) - col(a) * x),
        "poisson": ((k, a), k * np.log(col(a)) - lg(k + 1) - col(a)),
        "negative_binomial": (
            (k, a, b / 4),
            lg(k + col(a)) - lg(k + 1) - lg(col(a)) + col(a) * np.log(col(b / 4)) + k * np.log(1 - col(b / 4)),
        ),
    }
    for name, (args, want) in cases.items():
        f = getattr(mx.nd, f"random_pdf_{name}")
        nd_args = [mx.nd.array(v) for v in args]
        got = f(*nd_args, is_log=True)
        assert_almost_equal(got.asnumpy(), want, rtol=1e-4, atol=1e-4, names=(name, "want"))
        assert_almost_equal(f(*nd_args).asnumpy(), np.exp(want), rtol=1e-4, atol=1e-5)
    alpha = np.array([[1.5, 2.0, 3.0]], np.float32)
    s = np.array([[[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]], np.float32)
    want = ((alpha[:, None] - 1) * np.log(s)).sum(-1) + lg(alpha.sum(-1, keepdims=True)) - lg(alpha).sum(-1, keepdims=True)
    got = mx.nd.random_pdf_dirichlet(mx.nd.array(s), mx.nd.array(alpha), is_log=True)
    assert got.shape == (1, 2)
    assert_almost_equal(got.asnumpy(), want, rtol=1e-4, atol=1e-4)


def test_random_pdf_gradient_flows_to_the_parameters():
    sym = mx.sym.random_pdf_normal(mx.sym.Variable("x"), mx.sym.Variable("mu"), mx.sym.Variable("sigma"), is_log=True)
    x = rand(2, 3).astype(np.float64)
    mu, sigma = rand(2).astype(np.float64), (np.abs(rand(2)) + 0.5).astype(np.float64)
    check_numeric_gradient(sym, [x, mu, sigma], numeric_eps=1e-5, rtol=1e-3, atol=1e-5, dtype=np.float64)

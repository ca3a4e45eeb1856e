"""GridGenerator, BilinearSampler, SpatialTransformer and ROIPooling against MXNet 1.9.1's
results, with numeric gradient checks, float16 and float64, and their errors.

The fixture ``fixtures/vision/vision_ops.npz`` was made by ``gen_vision_ops.py`` (beside
it) with MXNet 1.9.1: each case holds the op's inputs and arguments, a head gradient, the
output and every input's gradient.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError
from rsmx.test_utils import check_numeric_gradient

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "vision", "vision_ops.npz")


def _cases() -> list[tuple[str, dict]]:
    data = np.load(FIXTURE)
    out = []
    for i, c in enumerate(json.loads(str(data["cases"]))):
        c = dict(c)
        c["inputs"] = [data[f"c{i}_{n}"] for n in c["names"]]
        c["grads"] = [data[f"c{i}_grad_{n}"] for n in c["names"]]
        c["head"], c["out"] = data[f"c{i}_head"], data[f"c{i}_out"]
        out.append((f"{c['op']}-{c['out'].dtype.name}-{i}", c))
    return out


CASES = _cases()


def _run(op, attrs, inputs, head, ctx, grad_req="write"):
    """Forward and backward of `op` bound on `ctx`: the output and the inputs' gradients."""
    names = [f"in{i}" for i in range(len(inputs))]
    sym = getattr(mx.sym, op)(*[mx.sym.Variable(n) for n in names], **attrs)
    args = {n: mx.nd.array(a, dtype=a.dtype, ctx=ctx) for n, a in zip(names, inputs, strict=True)}
    grads = {n: mx.nd.ones(a.shape, dtype=a.dtype, ctx=ctx)
             for n, a in zip(names, inputs, strict=True)}
    ex = sym.bind(ctx, args, args_grad=grads, grad_req=grad_req)
    out = ex.forward(is_train=True)[0]
    ex.backward([mx.nd.array(head, dtype=head.dtype, ctx=ctx)])
    return out.asnumpy(), [grads[n].asnumpy() for n in names]


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_matches_mxnet(case, ctx):
    out, grads = _run(case["op"], case["attrs"], case["inputs"], case["head"], ctx)
    tol = {"rtol": 1e-5, "atol": 1e-5} if out.dtype == np.float32 else {"rtol": 1e-10,
                                                                          "atol": 1e-12}
    np.testing.assert_allclose(out, case["out"], **tol)
    for name, got, want in zip(case["names"], grads, case["grads"], strict=True):
        np.testing.assert_allclose(got, want, err_msg=f"gradient of {name}", **tol)


def test_add_requests_accumulate(ctx):
    _, case = CASES[3]
    _, grads = _run(case["op"], case["attrs"], case["inputs"], case["head"], ctx, "add")
    for got, want in zip(grads, case["grads"], strict=True):
        np.testing.assert_allclose(got, want + 1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_other_float_types_agree_with_float32(dtype, ctx):
    rng = np.random.RandomState(7)
    data = rng.uniform(-1, 1, (2, 3, 5, 6))
    loc = np.tile([0.9, 0.1, 0.05, -0.1, 1.1, 0.0], (2, 1))
    rois = np.array([[0, 1, 1, 8, 7], [1, 0, 2, 4, 9]])
    runs = {}
    for t in ("float32", dtype):
        d = mx.nd.array(data, dtype=t, ctx=ctx)
        st = mx.nd.SpatialTransformer(d, mx.nd.array(loc, dtype=t, ctx=ctx), target_shape=(4, 3),
                                      transform_type="affine", sampler_type="bilinear")
        roi = mx.nd.ROIPooling(d, mx.nd.array(rois, dtype=t, ctx=ctx), pooled_size=(2, 3),
                               spatial_scale=0.5)
        warp = mx.nd.GridGenerator(mx.nd.array(data[:, :2], dtype=t, ctx=ctx),
                                   transform_type="warp")
        runs[t] = [x.asnumpy().astype(np.float64) for x in (st, roi, warp)]
        assert all(np.dtype(x.dtype) == np.dtype(t) for x in (st, roi, warp))
    tol = 2e-3 if dtype == "float16" else 1e-6
    for a, b in zip(runs["float32"], runs[dtype], strict=True):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)


def test_grid_generator_affine_identity_is_the_normalised_grid(ctx):
    grid = mx.nd.GridGenerator(mx.nd.array([[1, 0, 0, 0, 1, 0]], ctx=ctx), transform_type="affine",
                               target_shape=(3, 5)).asnumpy()
    assert grid.shape == (1, 2, 3, 5)
    np.testing.assert_allclose(grid[0, 0], np.tile(np.linspace(-1, 1, 5), (3, 1)), atol=1e-6)
    np.testing.assert_allclose(grid[0, 1], np.tile(np.linspace(-1, 1, 3)[:, None], (1, 5)),
                               atol=1e-6)
    # Sampling at the identity grid gives the data back.
    data = mx.nd.array(np.arange(15.0).reshape(1, 1, 3, 5), ctx=ctx)
    back = mx.nd.BilinearSampler(data, mx.nd.array(grid, ctx=ctx))
    np.testing.assert_allclose(back.asnumpy(), data.asnumpy(), atol=1e-5)


def test_numeric_gradients():
    rng = np.random.RandomState(11)
    data = rng.uniform(-1, 1, (1, 2, 4, 5))
    # Grid points kept off the pixel lines, where the interpolation has kinks.
    grid = (np.floor(rng.uniform(-4, 4, (1, 2, 3, 3))) + 0.37) / 4
    check_numeric_gradient(mx.sym.BilinearSampler(mx.sym.var("data"), mx.sym.var("grid")),
                           [data, grid], numeric_eps=1e-4, rtol=1e-2, atol=1e-3)
    check_numeric_gradient(mx.sym.GridGenerator(mx.sym.var("data"), transform_type="affine",
                                                target_shape=(3, 4)),
                           [rng.uniform(-1, 1, (2, 6))], numeric_eps=1e-3, rtol=1e-2, atol=1e-3)
    check_numeric_gradient(mx.sym.GridGenerator(mx.sym.var("data"), transform_type="warp"),
                           [rng.uniform(-1, 1, (1, 2, 3, 4))], numeric_eps=1e-3, rtol=1e-2,
                           atol=1e-3)
    # Distinct values, so each bin's maximum is clear of its neighbours.
    roi_data = rng.permutation(40).reshape(1, 2, 4, 5) / 10.0
    rois = mx.nd.array([[0, 0, 0, 4, 3], [0, 1, 1, 3, 3]])
    sym = mx.sym.ROIPooling(mx.sym.var("data"), mx.sym.var("rois"), pooled_size=(2, 2),
                            spatial_scale=1.0)
    check_numeric_gradient(sym, {"data": roi_data, "rois": rois.asnumpy()},
                           grad_nodes=["data"], numeric_eps=1e-3, rtol=1e-2, atol=1e-3)


def test_roi_pooling_symbol_and_empty_bins(ctx):
    sym = mx.sym.ROIPooling(mx.sym.var("data"), mx.sym.var("rois"), pooled_size=(2, 2),
                            spatial_scale=1.0, name="pool")
    assert sym.list_outputs() == ["pool_output"]
    assert sym.get_internals().list_outputs() == ["data", "rois", "pool_output"]
    _, out_shapes, _ = sym.infer_shape(data=(2, 3, 6, 6), rois=(4, 5))
    assert out_shapes == [(4, 3, 2, 2)]
    data = mx.nd.array(np.arange(36.0).reshape(1, 1, 6, 6), ctx=ctx)
    # A batch index out of range and a region outside the map give zeros.
    rois = mx.nd.array([[3, 0, 0, 2, 2], [0, 10, 10, 20, 20], [0, 0, 0, 5, 5]], ctx=ctx)
    out = mx.nd.ROIPooling(data, rois, pooled_size=(2, 2), spatial_scale=1.0).asnumpy()
    np.testing.assert_array_equal(out[0], 0)
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_array_equal(out[2, 0], [[14, 17], [32, 35]])


def test_symbols_list_mxnets_names():
    st = mx.sym.SpatialTransformer(mx.sym.var("data"), mx.sym.var("loc"), target_shape=(3, 4),
                                   transform_type="affine", sampler_type="bilinear", name="st")
    assert st.list_arguments() == ["data", "loc"]
    assert st.list_outputs() == ["st_output"]
    _, out_shapes, _ = st.infer_shape(data=(2, 3, 5, 6), loc=(2, 6))
    assert out_shapes == [(2, 3, 3, 4)]
    bs = mx.sym.BilinearSampler(mx.sym.var("data"), mx.sym.var("grid"), name="bs")
    assert bs.list_outputs() == ["bs_output"]
    gg = mx.sym.GridGenerator(mx.sym.var("data"), transform_type="warp", name="gg")
    assert gg.infer_shape(data=(2, 2, 4, 5))[1] == [(2, 2, 4, 5)]
    # The symbol JSON counts MXNet's hidden outputs in node_row_ptr.
    row_ptr = json.loads(st.tojson())["node_row_ptr"]
    assert row_ptr == [0, 1, 2, 5]


def test_errors(ctx):
    d = mx.nd.zeros((2, 3, 4, 4), ctx=ctx)
    with pytest.raises(MXNetError, match=r"BilinearSampler.*grid.*\(2, 3, 4, 4\)"):
        mx.nd.BilinearSampler(d, d)
    with pytest.raises(MXNetError, match=r"BilinearSampler.*batch size"):
        mx.nd.BilinearSampler(d, mx.nd.zeros((1, 2, 4, 4), ctx=ctx))
    with pytest.raises(MXNetError, match=r"GridGenerator.*affine.*\(2, 5\)"):
        mx.nd.GridGenerator(mx.nd.zeros((2, 5), ctx=ctx), transform_type="affine",
                            target_shape=(3, 3))
    with pytest.raises(MXNetError, match=r"GridGenerator.*target_shape"):
        mx.nd.GridGenerator(mx.nd.zeros((2, 6), ctx=ctx), transform_type="affine")
    with pytest.raises(MXNetError, match=r"GridGenerator.*warp.*\(2, 3, 4, 4\)"):
        mx.nd.GridGenerator(d, transform_type="warp")
    with pytest.raises(MXNetError, match=r"SpatialTransformer.*loc.*\(2, 6\).*\(2, 4\)"):
        mx.nd.SpatialTransformer(d, mx.nd.zeros((2, 4), ctx=ctx), target_shape=(2, 2),
                                 transform_type="affine", sampler_type="bilinear")
    with pytest.raises(MXNetError, match=r"SpatialTransformer.*sampler_type"):
        mx.nd.SpatialTransformer(d, mx.nd.zeros((2, 6), ctx=ctx), target_shape=(2, 2),
                                 transform_type="affine", sampler_type="nearest")
    with pytest.raises(MXNetError, match=r"ROIPooling.*rois.*\(3, 4\)"):
        mx.nd.ROIPooling(d, mx.nd.zeros((3, 4), ctx=ctx), pooled_size=(2, 2), spatial_scale=1.0)
    with pytest.raises(MXNetError, match=r"ROIPooling.*spatial_scale.*\[0, 1\]"):
        mx.nd.ROIPooling(d, mx.nd.zeros((3, 5), ctx=ctx), pooled_size=(2, 2), spatial_scale=2.0)
    with pytest.raises(MXNetError, match=r"ROIPooling.*pooled_size"):
        mx.nd.ROIPooling(d, mx.nd.zeros((3, 5), ctx=ctx), pooled_size=(0, 2), spatial_scale=1.0)
    with pytest.raises(MXNetError, match=r"BilinearSampler.*float"):
        i = mx.nd.zeros((1, 1, 2, 2), dtype="int32", ctx=ctx)
        mx.nd.BilinearSampler(i, mx.nd.zeros((1, 2, 2, 2), dtype="int32", ctx=ctx))

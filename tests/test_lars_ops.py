"""``multi_sum_sq`` and ``multi_lars`` against MXNet 1.9.1's results, and their errors.

The fixture ``fixtures/update_ops/lars_ops.npz`` was made by ``gen_lars_ops.py`` (beside
it) with MXNet 1.9.1.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import rsmx as mx
from mxnet_cases import load_cases
from rsmx.base import MXNetError

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "update_ops", "lars_ops.npz")


CASES = load_cases(FIXTURE)


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_matches_mxnet(case, ctx):
    arrs = [mx.nd.array(a, dtype=a.dtype, ctx=ctx) for a in case["inputs"]]
    out = getattr(mx.nd, case["op"])(*arrs, **case["attrs"]).asnumpy()
    assert out.dtype == np.float32 and out.shape == case["out"].shape
    np.testing.assert_allclose(out, case["out"], rtol=1e-5, atol=1e-7)


def test_symbols():
    v = mx.sym.var
    s = mx.sym.multi_sum_sq(v("a"), v("b"), num_arrays=2)
    assert s.infer_shape(a=(2, 3), b=(4,))[1] == [(2,)]
    lars = mx.sym.multi_lars(v("lrs"), v("w"), v("g"), v("wds"), eta=0.001, eps=1e-8)
    assert lars.list_arguments() == ["lrs", "w", "g", "wds"]


def test_errors(ctx):
    a = mx.nd.ones((3,), ctx=ctx)
    with pytest.raises(MXNetError, match=r"multi_sum_sq.*num_arrays is 3 but 2"):
        mx.nd.multi_sum_sq(a, a, num_arrays=3)
    with pytest.raises(MXNetError, match=r"multi_sum_sq.*float"):
        mx.nd.multi_sum_sq(a.astype("int32"), num_arrays=1)
    with pytest.raises(MXNetError, match=r"multi_lars.*wds.*\(2,\)"):
        mx.nd.multi_lars(a, a, a, mx.nd.ones((2,), ctx=ctx), eta=0.1, eps=0.0)
    with pytest.raises(MXNetError, match=r"multi_lars.*float32"):
        mx.nd.multi_lars(a, a, a, a.astype("float64"), eta=0.1, eps=0.0)

"""The host build of ``linalg.cu`` (the matrix products cuBLAS lacks) against numpy: every
dtype, both transposes, batches, accumulation and integer wrap-around, with poisoned
outputs, in every thread order."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from rsmx.cuda import build, host
from test_cuda_kernels import BLOCK, DTYPES, ORDERS, HostModule, grid_for, poisoned

# The kernels run on the host by themselves, never through the engine.
pytestmark = pytest.mark.engine_free


@pytest.fixture(scope="module")
def linalg():
    headers, sources = build.sources()
    path = host.build_all()["linalg"]
    return HostModule(path, host.kernel_names("linalg", sources["linalg"], headers))


def draw(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def reference(a, b, ta, tb, dtype):
    """numpy's product in wide arithmetic, cut to the dtype as wrapping arithmetic does."""
    a = np.swapaxes(a, -1, -2) if ta else a
    b = np.swapaxes(b, -1, -2) if tb else b
    if np.issubdtype(dtype, np.integer):
        # numpy's uint64 products wrap modulo 2^64; the cast keeps the low bits.
        wide = np.matmul(a.astype(np.int64).view(np.uint64), b.astype(np.int64).view(np.uint64))
        return wide.astype(dtype)
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


@pytest.mark.parametrize("suffix", list(DTYPES))
@pytest.mark.parametrize("dims", [(1, 0, 3, 4), (1, 1, 1, 1), (3, 5, 7, 33), (2, 31, 3, 2)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_matches_numpy(linalg, suffix, dims, ta, tb):
    batch, m, n, k = dims
    dtype = DTYPES[suffix]
    rng = np.random.default_rng(batch * 1000 + m * 100 + n * 10 + k)
    a = draw(rng, (batch, k, m) if ta else (batch, m, k), dtype)
    b = draw(rng, (batch, n, k) if tb else (batch, k, n), dtype)
    want = reference(a, b, ta, tb, dtype)
    base = draw(rng, (batch, m, n), dtype)
    for add in (0, 1):
        outs = []
        for order in ORDERS:
            c = base.copy() if add else poisoned(batch * m * n, dtype).reshape(batch, m, n)
            i64 = ctypes.c_int64
            args = [c, a, b, i64(batch), i64(m), i64(n), i64(k), i64(m if ta else k),
                    i64(k if tb else n), i64(n), i64(m * k), i64(k * n), i64(m * n),
                    ctypes.c_int(ta), ctypes.c_int(tb), ctypes.c_int(add)]
            linalg.launch(f"matmul_{suffix}", grid_for(batch * m * n), BLOCK, args, order)
            outs.append(c)
        assert all(o.tobytes() == outs[0].tobytes() for o in outs[1:]), "thread orders disagree"
        got = outs[0]
        if np.issubdtype(dtype, np.integer):
            expect = (base.astype(np.int64) + want.astype(np.int64)).astype(dtype) if add else want
            np.testing.assert_array_equal(got, expect)
        else:
            expect = base.astype(np.float64) + want if add else want
            tol = 1e-2 if suffix == "f16" else 1e-5
            np.testing.assert_allclose(got.astype(np.float64), expect, rtol=tol, atol=tol)

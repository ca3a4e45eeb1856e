"""The random kernels on the host: draws depend only on the key and the index (every
thread order gives the same bits), fall in range, and have the right moments."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from test_cuda_kernels import check_orders, modules  # noqa: F401  (fixture)

# The kernels run on the host by themselves, never through the engine.
pytestmark = pytest.mark.engine_free

FLOATS = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


@pytest.mark.parametrize("suffix", FLOATS)
@pytest.mark.parametrize("n", [0, 1, 33, 100003])
def test_uniform_draws_are_in_range_and_order_free(modules, suffix, n):  # noqa: F811
    dtype = FLOATS[suffix]
    rest = [ctypes.c_ulonglong(12345), ctypes.c_double(-2.0), ctypes.c_double(3.0), ctypes.c_int(0)]
    got = check_orders(modules["random"], f"random_uniform_{suffix}", [], rest, (n,), dtype)
    assert np.all((got >= -2.0) & (got <= 3.0))
    if n > 1000:
        assert abs(float(got.astype(np.float64).mean()) - 0.5) < 0.05
        other = check_orders(modules["random"], f"random_uniform_{suffix}", [],
                             [ctypes.c_ulonglong(54321), *rest[1:]], (n,), dtype)
        assert not np.array_equal(got, other)


@pytest.mark.parametrize("suffix", ["f32", "f64"])
def test_normal_draws_have_the_asked_moments(modules, suffix):  # noqa: F811
    dtype = FLOATS[suffix]
    rest = [ctypes.c_ulonglong(7), ctypes.c_double(1.5), ctypes.c_double(2.0), ctypes.c_int(0)]
    got = check_orders(modules["random"], f"random_normal_{suffix}", [], rest, (100003,), dtype)
    assert np.isfinite(got).all()
    assert abs(got.mean() - 1.5) < 0.05 and abs(got.std() - 2.0) < 0.05

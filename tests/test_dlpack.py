"""DLPack: NDArrays shared with numpy without copies, both ways, and their lifetimes."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import rsmx as mx


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "uint8", "int8", "int32", "int64"])
def test_numpy_reads_an_ndarray_in_place(dtype) -> None:
    a = mx.nd.array(np.arange(12).reshape(3, 4), dtype=dtype)
    view = np.from_dlpack(a)
    assert view.dtype == np.dtype(dtype) and view.shape == (3, 4)
    np.testing.assert_array_equal(view, np.arange(12).reshape(3, 4).astype(dtype))
    a += 1
    a.wait_to_read()
    np.testing.assert_array_equal(view, np.arange(1, 13).reshape(3, 4).astype(dtype))


def test_an_ndarray_over_numpy_memory_writes_into_it() -> None:
    n = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = mx.nd.from_dlpack(n)
    assert m.shape == (2, 3) and m.dtype == np.float32
    np.testing.assert_array_equal(m.asnumpy(), n)
    m *= 10
    m.wait_to_read()
    np.testing.assert_array_equal(n, np.arange(6).reshape(2, 3) * 10)
    n[0, 0] = -1
    assert m.asnumpy()[0, 0] == -1


def test_borrowed_memory_outlives_its_lender_until_the_ndarray_goes() -> None:
    m = mx.nd.from_dlpack(np.full((1000,), 3.0, dtype=np.float64))
    gc.collect()
    total = mx.nd.sum(m * 2)
    assert total.asscalar() == 6000.0
    del m
    mx.nd.waitall()


def test_capsules_round_trip_and_are_taken_once() -> None:
    a = mx.nd.arange(5)
    cap = a.to_dlpack_for_read()
    b = mx.nd.from_dlpack(cap)
    b[:] = 9
    b.wait_to_read()
    np.testing.assert_array_equal(a.asnumpy(), [9] * 5)
    with pytest.raises(mx.MXNetError, match="taken once"):
        mx.nd.from_dlpack(cap)
    w = mx.nd.to_dlpack_for_write(a)
    np.testing.assert_array_equal(mx.nd.from_dlpack(w).asnumpy(), [9] * 5)
    # A capsule nobody takes is freed with its reference to the array.
    mx.nd.to_dlpack_for_read(mx.nd.ones((3,)))
    gc.collect()


def test_what_cannot_be_shared_is_refused() -> None:
    n = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    with pytest.raises(mx.MXNetError, match="not contiguous"):
        mx.nd.from_dlpack(n)
    with pytest.raises(mx.MXNetError, match="no rsmx dtype"):
        mx.nd.from_dlpack(np.zeros(2, dtype=np.complex64))
    with pytest.raises(mx.MXNetError, match="DLPack capsule"):
        mx.nd.from_dlpack([1, 2])
    assert mx.nd.ones((2,)).__dlpack_device__() == (1, 0)


def test_from_numpy_shares_or_copies_as_asked() -> None:
    for zero_copy in (False, True):
        for src in (
            np.array([[1, 2], [3, 4], [5, 6]], dtype="float32"),
            np.array((1.0,)).reshape(()),
            np.array(()).reshape((1, 0, 2)),
        ):
            np.testing.assert_array_equal(mx.nd.from_numpy(src.copy(), zero_copy=zero_copy).asnumpy(), src)
    n = np.array([[1, 2], [3, 4], [5, 6]], dtype="float32")
    m = mx.nd.from_numpy(n)
    # Zero-copy: numpy may no longer write it, rsmx writes through to it.
    with pytest.raises(ValueError):
        n[2, 1] = 0
    m[2, 1] = 100
    m.wait_to_read()
    assert n[2, 1] == 100
    with pytest.raises(mx.MXNetError, match="c-contiguous"):
        mx.nd.from_numpy(np.ones((3, 2)).T)

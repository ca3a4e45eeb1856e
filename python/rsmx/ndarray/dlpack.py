"""DLPack: NDArrays shared without a copy with numpy, PyTorch and other libraries."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from ..base import MXNetTypeError, MXNetValueError
from .ndarray import NDArray, _flag, array

__all__ = ["from_dlpack", "from_numpy", "to_dlpack_for_read", "to_dlpack_for_write"]


def to_dlpack_for_read(data: NDArray) -> Any:
    """A DLPack capsule sharing ``data``'s memory, once its pending writes are done; the
    consumer may read it."""
    return _core.dlpack_export(data, False)


def to_dlpack_for_write(data: NDArray) -> Any:
    """A DLPack capsule sharing ``data``'s memory, once all its pending work is done; the
    consumer may write it."""
    return _core.dlpack_export(data, True)


def from_dlpack(dlpack: Any) -> NDArray:
    """An NDArray over the memory of a DLPack capsule, or of any object with
    ``__dlpack__`` (a numpy array, a PyTorch tensor), without a copy."""
    if hasattr(dlpack, "__dlpack__"):
        dlpack = dlpack.__dlpack__()
    if type(dlpack).__name__ != "PyCapsule":
        raise MXNetTypeError(
            f"from_dlpack: expected a DLPack capsule or an object with __dlpack__, got {type(dlpack).__name__}"
        )
    return _core.dlpack_import(dlpack)


def from_numpy(ndarray: np.ndarray, zero_copy: bool = True, array_cls: Any = NDArray) -> NDArray:  # noqa: FBT001, FBT002
    """An NDArray with the contents of a numpy array. With ``zero_copy`` (a C-contiguous
    array only) it is backed by the numpy array's memory, which is made read-only on the
    numpy side, as MXNet does; otherwise the data is copied."""
    if not zero_copy:
        return array(ndarray, dtype=ndarray.dtype)
    if not ndarray.flags["C_CONTIGUOUS"]:
        raise MXNetValueError("Only c-contiguous arrays are supported for zero-copy")
    ndarray.flags["WRITEABLE"] = False
    return _core.numpy_share(ndarray, _flag(ndarray.dtype))

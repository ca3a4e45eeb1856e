"""Helpers shared by the data iterators: putting user data into canonical form,
reordering it by an index and slicing it along the batch axis."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from ..base import MXNetTypeError, MXNetValueError
from ..ndarray import NDArray
from ..ndarray import array as _nd_array

__all__ = ["_init_data", "_has_instance", "_getdata_by_idx", "_slice_along_batch_axis"]


def _init_data(data: Any, allow_empty: bool, default_name: str) -> list[tuple[str, NDArray]]:
    """Turns data given as an array, a list of arrays or a dict of arrays into a list of
    ``(name, NDArray)`` pairs sorted by name.

    Parameters
    ----------
    data : NDArray, numpy.ndarray, list or dict, or None
        The arrays. A single array is named ``default_name``; a list of several arrays
        names them ``_0_<default_name>``, ``_1_<default_name>``, ...
    allow_empty : bool
        Whether ``None`` or an empty list is acceptable.
    default_name : str
        The name of a single array.

    Returns
    -------
    list of (str, NDArray)
        The named arrays, sorted by name. Values that are not NDArrays are copied into new
        NDArrays (float32 unless they are NDArrays already).
    """
    if data is None:
        if not allow_empty:
            raise MXNetValueError(f"{default_name}: no data given")
        data = []
    if isinstance(data, (np.ndarray, NDArray)):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not data and not allow_empty:
            raise MXNetValueError(f"{default_name}: the list of arrays is empty")
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict((f"_{i}_{default_name}", d) for i, d in enumerate(data))
    if not isinstance(data, dict):
        raise MXNetTypeError(
            f"{default_name}: input must be an NDArray, a numpy.ndarray, a list of them or a "
            f"dict with them as values, got {type(data).__name__}"
        )
    out: dict[str, NDArray] = {}
    for k, v in data.items():
        if isinstance(v, NDArray):
            out[k] = v
            continue
        try:
            out[k] = _nd_array(v)
        except Exception as e:  # noqa: BLE001
            raise MXNetTypeError(
                f"invalid type {type(v).__name__} for '{k}': it should be an NDArray or a "
                f"numpy.ndarray"
            ) from e
    return sorted(out.items())


def _has_instance(data: list[tuple[str, Any]], dtype: Any) -> bool:
    """Whether any array in a list of ``(name, array)`` pairs is an instance of ``dtype``."""
    return any(isinstance(arr, dtype) for _, arr in data)


def _getdata_by_idx(data: list[tuple[str, NDArray]], idx: np.ndarray) -> list[tuple[str, NDArray]]:
    """Copies of the arrays with their first axis reordered by ``idx``.

    As in MXNet 1.x, the copies are float32 whatever the dtype of the originals.
    """
    return [(k, _nd_array(v.asnumpy()[idx], v.context)) for k, v in data]


def _slice_along_batch_axis(data: NDArray, s: slice, batch_axis: int) -> NDArray:
    """A copy of ``data[s]`` taken along ``batch_axis``."""
    return data.slice_axis(axis=batch_axis, begin=s.start, end=s.stop)

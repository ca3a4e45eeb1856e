"""NDArray indexing: ``x[key]`` and ``x[key] = value`` with MXNet 1.x semantics.

Basic indexing (ints, slices, ``None``, ``...``) whose result is contiguous in memory
gives a view that shares memory; other basic indexing gives a copy through ``slice``.
A key with integer arrays (lists, numpy arrays, NDArrays; floats are truncated as in
MXNet) follows numpy's advanced indexing, through ``gather_nd`` so autograd records it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import (
    MXNetError,
    MXNetIndexError,
    MXNetTypeError,
    MXNetValueError,
    integer_types,
    numeric_types,
)
from .ndarray import NDArray, _op, array, empty

_INPLACE_RECORDING = (
    "Inplace operations (+=, -=, x[:]=, etc) are not supported when recording with autograd."
)


def _is_int(k: Any) -> bool:
    return isinstance(k, integer_types) and not isinstance(k, (bool, np.bool_))


def _as_int(v: Any) -> Any:
    return int(v) if _is_int(v) else v


def _index_array(k: Any) -> np.ndarray:
    """An advanced index as a numpy integer array."""
    arr = k.asnumpy() if isinstance(k, NDArray) else np.asarray(k)
    if arr.dtype == np.bool_:
        raise MXNetTypeError("boolean mask indexing is not supported")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.number):
            raise MXNetIndexError(f"cannot index with an array of {arr.dtype}")
        arr = arr.astype(np.int64)
    return arr


def _normalize(key: Any) -> tuple:
    """The key as a tuple of ints, slices (of ints), ``None``, ``...`` and numpy
    integer arrays."""
    if not isinstance(key, tuple):
        key = (key,)
    out: list[Any] = []
    for k in key:
        if k is None or k is Ellipsis:
            out.append(k)
        elif _is_int(k):
            out.append(int(k))
        elif isinstance(k, slice):
            out.append(slice(_as_int(k.start), _as_int(k.stop), _as_int(k.step)))
        elif isinstance(k, (NDArray, np.ndarray, list, tuple)):
            out.append(_index_array(k))
        else:
            raise MXNetTypeError(f"unsupported index type {type(k).__name__}")
    return tuple(out)


def _expand(shape: tuple, key: tuple) -> list[Any]:
    """A basic key with its ellipsis expanded and missing trailing axes added."""
    if sum(k is Ellipsis for k in key) > 1:
        raise MXNetIndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > len(shape):
        raise MXNetIndexError(f"too many indices for an array of shape {shape}: {n_real} were given")
    items: list[Any] = []
    for k in key:
        items.extend([slice(None)] * (len(shape) - n_real) if k is Ellipsis else [k])
    if Ellipsis not in key:
        items.extend([slice(None)] * (len(shape) - n_real))
    return items


def _plan(shape: tuple, key: tuple) -> tuple[list[range], list[int]]:
    """Per axis the range of the region a basic key selects (ints become one-element
    ranges), and the shape of the result (ints dropped, ``None`` adding ones)."""
    region: list[range] = []
    out_shape: list[int] = []
    for k in _expand(shape, key):
        if k is None:
            out_shape.append(1)
            continue
        ax = len(region)
        n = shape[ax]
        if _is_int(k):
            if not -n <= k < n:
                raise MXNetIndexError(f"index {k} is out of bounds for axis {ax} with size {n}")
            region.append(range(k % n, k % n + 1))
            continue
        if k.step == 0:
            raise MXNetValueError("slice step cannot be zero")
        region.append(range(*k.indices(n)))
        out_shape.append(len(region[-1]))
    return region, out_shape


def is_contiguous(key: tuple, shape: tuple) -> bool:
    """Whether the slices ``key`` (one per leading axis) select a region that is one
    block of memory in a row-major array of ``shape``."""
    key = tuple(key) + (slice(None),) * (len(shape) - len(key))
    return _ranges_contiguous([range(*k.indices(n)) for k, n in zip(key, shape, strict=True)], shape)


def _ranges_contiguous(region: list[range], shape: tuple) -> bool:
    """Whether the ranges (one per axis) select one block of memory."""
    partial = False
    for r, n in zip(reversed(region), reversed(shape), strict=True):
        if len(r) == 0:
            return True
        if len(r) == 1:
            partial = partial or n != 1
            continue
        if partial or r.step != 1:
            return False
        partial = len(r) != n
    return True


def _view(a: NDArray, region: list[range], out_shape: list[int]) -> NDArray | None:
    """The region as a view sharing ``a``'s memory, or None when it is not contiguous."""
    if a.ndim == 0 or not _ranges_contiguous(region, a.shape):
        return None
    size = int(np.prod([len(r) for r in region]))
    if size == 0:
        return None
    start, stride = 0, 1
    for r, n in zip(reversed(region), reversed(a.shape), strict=True):
        start += r.start * stride
        stride *= n
    if size == a.size:
        flat = a
    else:
        flat = a._reshape_view((a.size,))._slice(start, start + size)
    return flat._reshape_view(out_shape or [1])


def _slice_attr(values: list) -> str:
    return "(" + ", ".join("None" if v is None else str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _basic_get(a: NDArray, key: tuple) -> NDArray:
    region, out_shape = _plan(a.shape, key)
    view = _view(a, region, out_shape)
    if view is not None:
        return view
    if 0 in out_shape:
        return empty(tuple(out_shape), ctx=a.context, dtype=a.dtype)
    begin = [r.start for r in region]
    end = [None if r.stop < 0 else r.stop for r in region]
    step = [r.step for r in region]
    out = _op("slice")(a, begin=_slice_attr(begin), end=_slice_attr(end), step=_slice_attr(step))
    return out._reshape_view(out_shape or [1])


def _coordinates(shape: tuple, key: tuple) -> np.ndarray:
    """For an advanced key: the position in ``shape`` of each element of the result, as
    an array of shape ``(len(shape),) + result shape``."""
    coords = []
    for ax, n in enumerate(shape):
        along = np.arange(n).reshape([n if i == ax else 1 for i in range(len(shape))])
        try:
            coords.append(np.broadcast_to(along, shape)[key])
        except IndexError as e:
            raise MXNetIndexError(str(e)) from None
    return np.stack(coords)


def _advanced_get(a: NDArray, key: tuple) -> NDArray:
    coords = _coordinates(a.shape, key)
    out_shape = coords.shape[1:]
    if coords[0].size == 0:
        return empty(out_shape, ctx=a.context, dtype=a.dtype)
    idx = array(coords.reshape(len(a.shape), -1) if not out_shape else coords, ctx=a.context, dtype=np.int64)
    out = _op("gather_nd")(a, idx)
    return out if out_shape else out.reshape((1,))


def _first_axis_view(a: NDArray, key: Any) -> NDArray | None:
    """The view for an integer or a step-1 slice on axis 0 (the common case, answered by
    the core without planning), else None."""
    if _is_int(key):
        n = a.shape[0] if a.ndim else 0
        k = int(key)
        if not -n <= k < n:
            raise MXNetIndexError(f"index {k} is out of bounds for axis 0 with size {n}")
        k %= n
        return a._slice(k, k + 1) if a.ndim == 1 else a._at(k)
    if isinstance(key, slice) and key.step in (None, 1) and a.ndim:
        start, stop, _ = key.indices(a.shape[0])
        return a._slice(start, max(start, stop))
    return None


def get_item(a: NDArray, key: Any) -> NDArray:
    """``a[key]``."""
    view = _first_axis_view(a, key)
    if view is not None:
        return view
    key = _normalize(key)
    if any(isinstance(k, np.ndarray) for k in key):
        return _advanced_get(a, key)
    return _basic_get(a, key)


def _strip_leading_ones(shape: tuple, ndim: int) -> tuple:
    """``shape`` without the leading ones beyond ``ndim`` dims (MXNet accepts such values)."""
    s = list(shape)
    while len(s) > ndim and s[0] == 1:
        s.pop(0)
    return tuple(s)


def _assign(dst: NDArray, value: Any) -> None:
    """Writes ``value`` (scalar, NDArray or array-like, broadcast) into all of ``dst``."""
    if isinstance(value, numeric_types) and not isinstance(value, np.ndarray):
        _op("_full")(shape=dst.shape, value=float(value), dtype=np.dtype(dst.dtype).name, ctx=dst.context, out=dst)
        return
    if isinstance(value, NDArray):
        if value.shape != dst.shape:
            shape = _strip_leading_ones(value.shape, dst.ndim)
            shape = (1,) * (dst.ndim - len(shape)) + shape
            value = _op("broadcast_to")(value.reshape(shape), shape=dst.shape)
        value.copyto(dst)
        return
    src = np.asarray(value)
    try:
        src = np.broadcast_to(src.reshape(_strip_leading_ones(src.shape, dst.ndim)), dst.shape)
    except ValueError:
        raise MXNetValueError(
            f"cannot assign a value of shape {src.shape} to a region of shape {dst.shape}"
        ) from None
    dst._copy_from_numpy(np.asarray(src, dtype=dst.dtype, order="C"))


def _host_assign(a: NDArray, key: tuple, value: Any) -> None:
    """``a[key] = value`` through a numpy copy of ``a``."""
    cur = a.asnumpy()
    src = np.asarray(value.asnumpy() if isinstance(value, NDArray) else value)
    target = cur[key].shape
    try:
        src = np.broadcast_to(src.reshape(_strip_leading_ones(src.shape, len(target))), target)
    except ValueError:
        raise MXNetValueError(
            f"cannot assign a value of shape {src.shape} to a region of shape {target}"
        ) from None
    cur[key] = src
    a._copy_from_numpy(np.ascontiguousarray(cur))


def _refuse_recorded_write(a: NDArray, value: Any) -> None:
    """As MXNet, refuses to write part of an array in place while recording when the
    array or the value belongs to the recorded graph."""
    from .. import _core, autograd

    if not autograd.is_recording():
        return
    if _core.autograd_in_graph(a) or (isinstance(value, NDArray) and _core.autograd_in_graph(value)):
        raise MXNetError(_INPLACE_RECORDING)


def set_item(a: NDArray, key: Any, value: Any) -> None:
    """``a[key] = value``."""
    if not a.writable:
        raise MXNetValueError("trying to assign to a read-only NDArray")
    view = _first_axis_view(a, key)
    if view is not None:
        if view.size != a.size:
            _refuse_recorded_write(a, value)
        _assign(view, value)
        return
    key = _normalize(key)
    if any(isinstance(k, np.ndarray) for k in key):
        _refuse_recorded_write(a, value)
        _host_assign(a, key, value)
        return
    region, out_shape = _plan(a.shape, key)
    view = _view(a, region, out_shape)
    if view is not None and view.size == a.size:
        _assign(view, value)
        return
    _refuse_recorded_write(a, value)
    if view is not None:
        _assign(view, value)
        return
    _host_assign(a, key, value)

"""NDArray indexing: ``x[key]`` and ``x[key] = value`` with MXNet 1.x semantics.

An integer or a step-1 slice on the first axis gives a view that shares memory; other
basic indexing gives a copy; integer arrays index the first axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetIndexError, MXNetTypeError, integer_types, numeric_types
from .ndarray import NDArray, _op, array


def _is_int(k: Any) -> bool:
    return isinstance(k, integer_types) and not isinstance(k, bool)


def _first_axis_view(a: NDArray, key: Any) -> NDArray | None:
    """The view for an integer or step-1 slice on axis 0, else None."""
    if _is_int(key):
        if a.ndim == 1:
            n = a.shape[0]
            k = int(key)
            if not -n <= k < n:
                raise MXNetIndexError(f"index {k} is out of bounds for axis 0 with size {n}")
            k %= n
            return a._slice(k, k + 1)
        return a._at(int(key))
    if isinstance(key, slice) and key.step in (None, 1):
        if a.ndim == 0:
            raise MXNetIndexError("cannot slice a 0-dimensional NDArray")
        start, stop, _ = key.indices(a.shape[0])
        return a._slice(start, max(start, stop))
    return None


def _expand_key(a: NDArray, key: tuple) -> tuple[list[Any], list[int]]:
    """Basic-index key to one entry per axis (ints and slices), and the new axes' places."""
    if sum(k is Ellipsis for k in key) > 1:
        raise MXNetIndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > a.ndim:
        raise MXNetIndexError(
            f"too many indices for an array of shape {a.shape}: {n_real} were given"
        )
    entries: list[Any] = []
    new_axes: list[int] = []
    for k in key:
        if k is Ellipsis:
            entries.extend([slice(None)] * (a.ndim - n_real))
        elif k is None:
            new_axes.append(len(entries) + len(new_axes))
        else:
            entries.append(k)
    entries.extend([slice(None)] * (a.ndim - len(entries)))
    return entries, new_axes


def _region(a: NDArray, entries: list[Any]) -> tuple[tuple, tuple, tuple, list[int]]:
    begin, end, step, drop = [], [], [], []
    for ax, k in enumerate(entries):
        n = a.shape[ax]
        if _is_int(k):
            i = int(k)
            if not -n <= i < n:
                raise MXNetIndexError(f"index {i} is out of bounds for axis {ax} with size {n}")
            i %= n
            begin.append(i)
            end.append(i + 1)
            step.append(1)
            drop.append(ax)
        elif isinstance(k, slice):
            if k.step == 0:
                raise MXNetIndexError("slice step cannot be zero")
            b, e, s = k.indices(n)
            begin.append(b)
            end.append(e if e >= 0 else None)
            step.append(s)
        else:
            raise MXNetTypeError(f"unsupported index type {type(k).__name__}")
    return tuple(begin), tuple(end), tuple(step), drop


def _slice_attr(t: tuple) -> str:
    return "(" + ", ".join("None" if v is None else str(v) for v in t) + ("," if len(t) == 1 else "") + ")"


def get_item(a: NDArray, key: Any) -> NDArray:
    """``a[key]``."""
    view = _first_axis_view(a, key)
    if view is not None:
        return view
    if isinstance(key, (NDArray, np.ndarray, list)):
        idx = key if isinstance(key, NDArray) else array(np.asarray(key), ctx=a.context)
        if idx.dtype == np.bool_:
            raise MXNetTypeError("boolean mask indexing is not supported")
        return _op("take")(a, idx, axis=0)
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, (NDArray, np.ndarray, list)) for k in key):
        return _advanced_get(a, key)
    entries, new_axes = _expand_key(a, key)
    if all(isinstance(k, slice) and k == slice(None) for k in entries[1:]) and not new_axes:
        view = _first_axis_view(a, entries[0])
        if view is not None:
            return view
    begin, end, step, drop = _region(a, entries)
    out = _op("slice")(a, begin=_slice_attr(begin), end=_slice_attr(end), step=_slice_attr(step))
    shape = [s for ax, s in enumerate(out.shape) if ax not in drop]
    for p in new_axes:
        shape.insert(p, 1)
    if not shape:
        shape = [1]
    return out._reshape_view(shape)


def _advanced_get(a: NDArray, key: tuple) -> NDArray:
    """Integer-array indexing over leading axes, through ``gather_nd`` in numpy order."""
    idx = np.stack(np.broadcast_arrays(*[np.asarray(k.asnumpy() if isinstance(k, NDArray) else k) for k in key]))
    res = a.asnumpy()[tuple(idx)]
    return array(res, ctx=a.context, dtype=a.dtype)


def _assign(dst: NDArray, value: Any) -> None:
    """Writes ``value`` (scalar, NDArray or array-like, broadcast) into all of ``dst``."""
    if isinstance(value, numeric_types) and not isinstance(value, np.ndarray):
        _op("_full")(shape=dst.shape, value=float(value), dtype=np.dtype(dst.dtype).name, ctx=dst.context, out=dst)
        return
    if isinstance(value, NDArray):
        if value.shape != dst.shape:
            value = _op("broadcast_to")(value.reshape(_fit(value.shape, dst.shape)), shape=dst.shape)
        value.copyto(dst)
        return
    src = np.asarray(value)
    try:
        src = np.broadcast_to(src, dst.shape)
    except ValueError:
        from ..base import MXNetValueError

        raise MXNetValueError(
            f"cannot assign a value of shape {src.shape} to a region of shape {dst.shape}"
        ) from None
    dst._copy_from_numpy(np.asarray(src, dtype=dst.dtype, order="C"))


def _fit(src: tuple, dst: tuple) -> tuple:
    """``src`` with leading ones dropped or added so it can broadcast to ``dst``."""
    s = list(src)
    while len(s) > len(dst) and s[0] == 1:
        s.pop(0)
    return tuple([1] * (len(dst) - len(s)) + s)


def set_item(a: NDArray, key: Any, value: Any) -> None:
    """``a[key] = value``."""
    if not a.writable:
        from ..base import MXNetValueError

        raise MXNetValueError("trying to assign to a read-only NDArray")
    view = _first_axis_view(a, key)
    if view is not None:
        _assign(view, value)
        return
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, (NDArray, np.ndarray, list)) for k in key):
        cur = a.asnumpy()
        idx = tuple(np.asarray(k.asnumpy() if isinstance(k, NDArray) else k) for k in key)
        cur[idx] = value.asnumpy() if isinstance(value, NDArray) else value
        a._copy_from_numpy(np.ascontiguousarray(cur))
        return
    entries, _ = _expand_key(a, tuple(k for k in key if k is not None))
    if all(isinstance(k, slice) and k == slice(None) for k in entries[1:]):
        view = _first_axis_view(a, entries[0])
        if view is not None:
            _assign(view, value)
            return
    begin, end, step, drop = _region(a, entries)
    region_shape = tuple(len(range(*slice(b, e, s).indices(n))) if e is not None else len(range(b, -1, s)) for b, e, s, n in zip(begin, end, step, a.shape, strict=True))
    if isinstance(value, NDArray):
        value = value.asnumpy()
    src = np.asarray(value, dtype=a.dtype)
    kept = tuple(s for ax, s in enumerate(region_shape) if ax not in drop)
    try:
        src = np.broadcast_to(src.reshape(_fit(src.shape, kept)) if src.ndim else src, kept).reshape(region_shape)
    except ValueError:
        from ..base import MXNetValueError

        raise MXNetValueError(
            f"cannot assign a value of shape {src.shape} to a region of shape {kept}"
        ) from None
    _core_slice_assign(a, begin, end, step, src)


def _core_slice_assign(a: NDArray, begin: tuple, end: tuple, step: tuple, src: np.ndarray) -> None:
    cur = a.asnumpy()
    cur[tuple(slice(b, e, s) for b, e, s in zip(begin, end, step, strict=True))] = src
    a._copy_from_numpy(np.ascontiguousarray(cur))


"""NDArray functions for operators rsmx builds from other operators."""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from .. import _composed
from ..base import MXNetValueError
from .ndarray import NDArray, _ctx, mx_real_t

__all__ = ["linspace", "split_v2", "fill_element_0index", "histogram"]
INTERNAL = ["_slice_assign", "_slice_assign_scalar", "_crop_assign", "_crop_assign_scalar"]


def _op() -> types.ModuleType:
    from . import op

    return op


def _written(result: NDArray, out: NDArray | None) -> NDArray:
    """``result``, copied into ``out`` when one is given."""
    if out is None:
        return result
    result.copyto(out)
    return out


def linspace(start: float, stop: float, num: int, endpoint: bool = True, ctx: Any = None,
             dtype: Any = mx_real_t) -> NDArray:
    """``num`` evenly spaced values from ``start`` to ``stop`` (included when
    ``endpoint``)."""
    values = _composed.linspace_values(_op(), start, stop, num, endpoint, ctx=_ctx(ctx))
    return values.astype(np.dtype(dtype or mx_real_t), copy=False)


def split_v2(ary: NDArray, indices_or_sections: Any, axis: int = 0,
             squeeze_axis: bool = False) -> Any:
    """The pieces of ``ary`` along ``axis``: ``indices_or_sections`` equal ones (an int)
    or those starting at each index of a tuple; one piece is returned bare."""
    return _composed.split_v2(_op(), ary, indices_or_sections, axis, squeeze_axis,
                              axis_size=ary.shape[axis])


def histogram(a: NDArray, bins: Any = 10, range: Any = None) -> tuple[NDArray, NDArray]:  # noqa: A002
    """The counts of ``a``'s elements (flattened) in each bin, and the bin edges: ``bins``
    equal-width bins over ``range`` (an int), or the bins between the edges of an
    NDArray. Without a range, numpy computes the bins over the data and both results are
    float32, as in MXNet."""
    from .ndarray import array

    op = _op()
    if isinstance(bins, NDArray):
        return op._histogram(a, bins)
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        if range is None:
            # As MXNet: numpy's result, as float32 arrays.
            counts, edges = np.histogram(a.asnumpy(), bins=int(bins))
            return array(counts, ctx=a.context), array(edges, ctx=a.context)
        return op._histogram(a, bin_cnt=int(bins), range=tuple(range))
    raise MXNetValueError("histogram: bins should be either an integer or an NDArray")


def fill_element_0index(lhs: NDArray, mhs: NDArray, rhs: NDArray, out: NDArray | None = None,
                        **kwargs: Any) -> NDArray:
    """A copy of the 2-D ``lhs`` with ``lhs[i, rhs[i]] = mhs[i]`` for each row ``i``."""
    op = _op()
    if lhs.ndim != 2:
        raise MXNetValueError(f"fill_element_0index: lhs must be 2-D, got shape {lhs.shape}")
    mask = op.one_hot(rhs, depth=lhs.shape[1], dtype=lhs.dtype)
    values = op.broadcast_like(mhs.reshape((-1, 1)).astype(lhs.dtype, copy=False), lhs)
    return _written(op.where(mask, values, lhs), out)


def _slice_key(begin: Any, end: Any, step: Any) -> tuple[slice, ...]:
    step = step or [None] * len(begin)
    return tuple(slice(b, e, s) for b, e, s in zip(begin, end, step, strict=False))


def _assigned(lhs: NDArray, value: Any, begin: Any, end: Any, step: Any,
              out: NDArray | None) -> NDArray:
    """``lhs`` (into ``out``, or a copy) with the slice ``begin:end:step`` set to ``value``."""
    target = lhs.copy() if out is None else out
    if target is not lhs:
        lhs.copyto(target)
    target[_slice_key(begin, end, step)] = value
    return target


def _slice_assign(lhs: NDArray, rhs: NDArray, begin: Any = (), end: Any = (), step: Any = (),
                  out: NDArray | None = None, **kwargs: Any) -> NDArray:
    """``lhs`` with ``lhs[begin:end:step] = rhs``."""
    return _assigned(lhs, rhs, begin, end, step, out)


def _slice_assign_scalar(data: NDArray, scalar: float = 0.0, begin: Any = (), end: Any = (),
                         step: Any = (), out: NDArray | None = None, **kwargs: Any) -> NDArray:
    """``data`` with ``data[begin:end:step] = scalar``."""
    return _assigned(data, float(scalar), begin, end, step, out)


_crop_assign = _slice_assign
_crop_assign_scalar = _slice_assign_scalar


def install(public: types.ModuleType, internal: types.ModuleType, op: types.ModuleType) -> None:
    """Adds these functions to ``mx.nd`` (public names), ``mx.nd._internal`` and
    ``mx.nd.op``, where the core has no operator of the name."""
    g = globals()
    for name in __all__:
        if not hasattr(op, name):
            setattr(public, name, g[name])
            setattr(op, name, g[name])
    for name in INTERNAL:
        if not hasattr(internal, name):
            setattr(internal, name, g[name])
            setattr(op, name, g[name])

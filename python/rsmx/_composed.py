"""Python-level functions over operators (``split_v2``, ``linspace``), for NDArrays and
Symbols alike."""

from __future__ import annotations

import types
from typing import Any

from .base import MXNetValueError, integer_types

__all__ = ["split_v2", "linspace_values"]


def split_v2(op: types.ModuleType, ary: Any, indices_or_sections: Any, axis: int = 0,
             squeeze_axis: bool = False, axis_size: int | None = None, **kwargs: Any) -> Any:
    """The pieces of ``ary`` along ``axis`` through the ``_split_v2`` operator:
    ``indices_or_sections`` equal ones (an int) or those starting at each index of a
    tuple (the first at 0). ``axis_size`` is the length of ``axis`` where known;
    ``kwargs`` (a symbol's ``name``) go to the operator."""
    if isinstance(indices_or_sections, integer_types):
        sections = int(indices_or_sections)
        if sections <= 0 or (axis_size is not None and axis_size % sections):
            raise MXNetValueError("array split does not result in an equal division")
        return op._split_v2(ary, indices=(), axis=axis, squeeze_axis=squeeze_axis, sections=sections,
                            **kwargs)
    if not isinstance(indices_or_sections, tuple):
        raise MXNetValueError("indices_or_sections must either int or tuple of ints")
    indices = (0, *(int(i) for i in indices_or_sections))
    return op._split_v2(ary, indices=indices, axis=axis, squeeze_axis=squeeze_axis, **kwargs)


def linspace_values(op: types.ModuleType, start: float, stop: float, num: int, endpoint: bool,
                    **arange_kwargs: Any) -> Any:
    """``num`` evenly spaced float64 values from ``start`` to ``stop`` (included when
    ``endpoint``)."""
    num = int(num)
    if num < 0:
        raise MXNetValueError(f"linspace: num must not be negative, got {num}")
    divisions = num - 1 if endpoint and num > 1 else num
    step = (float(stop) - float(start)) / divisions if divisions else 0.0
    steps = op._arange(start=0, stop=num, step=1, dtype="float64", **arange_kwargs)
    return op._plus_scalar(op._mul_scalar(steps, scalar=step), scalar=float(start))

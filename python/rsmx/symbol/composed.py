"""Symbol functions for operators rsmx builds from other operators."""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from .. import _composed
from ..base import MXNetValueError
from .register import make_sym_function
from .symbol import Symbol

__all__ = ["linspace", "split_v2", "histogram"]


def _op() -> types.ModuleType:
    from . import op

    return op


def _named(result: Symbol, name: str | None, hint: str) -> Symbol:
    """``result`` behind an identity node named ``name`` (or by the name manager from
    ``hint``), so the composed graph's output has the name a single node would have."""
    identity = make_sym_function(hint, "_copy", ["data"], False, [], "")
    return identity(result, name=name)


def linspace(start: float, stop: float, num: int, endpoint: bool = True, name: str | None = None,
             dtype: Any = None) -> Symbol:
    """A symbol of ``num`` evenly spaced values from ``start`` to ``stop`` (included when
    ``endpoint``)."""
    values = _composed.linspace_values(_op(), start, stop, num, endpoint)
    return _named(_op().Cast(values, dtype=np.dtype(dtype or np.float32).name), name, "linspace")


def split_v2(ary: Symbol, indices_or_sections: Any, axis: int = 0, squeeze_axis: bool = False,
             name: str | None = None) -> Symbol:
    """The pieces of ``ary`` along ``axis`` as one grouped symbol:
    ``indices_or_sections`` equal ones (an int) or those starting at each index of a
    tuple."""
    return _composed.split_v2(_op(), ary, indices_or_sections, axis, squeeze_axis, name=name)


def histogram(a: Symbol, bins: Any = 10, range: Any = None, **kwargs: Any) -> Symbol:  # noqa: A002
    """The histogram of ``a`` as a two-output symbol (counts, bin edges): ``bins``
    equal-width bins over ``range``, or the bins between the edges of a symbol."""
    op = _op()
    if isinstance(bins, Symbol):
        return op._histogram(data=a, bins=bins, **kwargs)
    if isinstance(bins, int) and not isinstance(bins, bool):
        if range is None:
            raise MXNetValueError("histogram: a range is needed in symbol mode")
        return op._histogram(data=a, bin_cnt=bins, range=tuple(range), **kwargs)
    raise MXNetValueError("histogram: bins should be either an integer or a Symbol")


def install(public: types.ModuleType, op: types.ModuleType) -> None:
    """Adds these functions to ``mx.sym`` and ``mx.sym.op`` where the core has no
    operator of the name, and ``pad`` and ``split_v2`` as Symbol methods."""
    g = globals()
    for name in __all__:
        if not hasattr(op, name):
            setattr(public, name, g[name])
            setattr(op, name, g[name])
    for name in ("pad", "split_v2"):
        if not hasattr(Symbol, name):
            setattr(Symbol, name, _method(getattr(public, name)))


def _method(function: Any) -> Any:
    def method(self: Symbol, *args: Any, **kwargs: Any) -> Any:
        return function(self, *args, **kwargs)

    method.__name__ = function.__name__
    method.__doc__ = f"Same as ``mx.sym.{function.__name__}(self, ...)``."
    return method

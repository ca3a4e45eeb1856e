"""Symbolic graphs: ``mx.sym``, with every operator of the registry as a function."""

from __future__ import annotations

import sys
import types

from . import random  # noqa: F401  (mx.sym.random)
from . import register as _register
from .symbol import Group, Symbol, Variable, load, load_json, var

_internal = types.ModuleType(__name__ + "._internal", "Operators whose names start with _.")
op = types.ModuleType(__name__ + ".op", "Every operator by every name.")
sys.modules[_internal.__name__] = _internal
sys.modules[op.__name__] = op
_register.register_all(sys.modules[__name__], _internal, op)


def pow(base, exp):  # noqa: A001
    """``base ** exp`` for symbols and numbers."""
    if isinstance(base, Symbol):
        return base.__pow__(exp)
    if isinstance(exp, Symbol):
        return exp.__rpow__(base)
    return base**exp


power = pow


def _symbols_or_numbers(left, right, pair_op, scalar_op, py):
    """``pair_op`` of two symbols, ``scalar_op`` of a symbol and a number (either side: the
    functions here are symmetric), or ``py`` of two numbers."""
    if isinstance(left, Symbol) and isinstance(right, Symbol):
        return getattr(op, pair_op)(left, right)
    if isinstance(left, Symbol):
        return getattr(op, scalar_op)(left, scalar=float(right))
    if isinstance(right, Symbol):
        return getattr(op, scalar_op)(right, scalar=float(left))
    return py(left, right)


def hypot(left, right):
    """Element-wise ``sqrt(left**2 + right**2)`` of symbols and numbers."""
    import numpy as np

    return _symbols_or_numbers(left, right, "_Hypot", "_HypotScalar", np.hypot)


def maximum(left, right):
    """Element-wise maximum of symbols and numbers."""
    return _symbols_or_numbers(left, right, "_Maximum", "_MaximumScalar", max)


def minimum(left, right):
    """Element-wise minimum of symbols and numbers."""
    return _symbols_or_numbers(left, right, "_Minimum", "_MinimumScalar", min)


def zeros(shape, dtype=None, **kwargs):
    """A symbol of zeros."""
    return op._zeros(shape=shape, dtype=dtype or "float32", **kwargs)


def ones(shape, dtype=None, **kwargs):
    """A symbol of ones."""
    return op._ones(shape=shape, dtype=dtype or "float32", **kwargs)


def full(shape, val, dtype=None, **kwargs):
    """A symbol filled with ``val``."""
    return op._full(shape=shape, value=val, dtype=dtype or "float32", **kwargs)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=False, name=None, dtype=None):
    """A symbol of evenly spaced values."""
    return op._arange(start=start, stop=stop, step=step, repeat=repeat, name=name,
                      dtype=dtype or "float32")


def _install_methods() -> None:
    from ..ndarray.ndarray import _OP_METHODS

    def make(name):
        def method(self, *args, **kwargs):
            return getattr(op, name)(self, *args, **kwargs)

        method.__name__ = name
        method.__doc__ = f"Same as ``mx.sym.{name}(self, ...)``."
        return method

    for name in [*_OP_METHODS, "reshape", "reshape_like", "broadcast_axis"]:
        target = "Reshape" if name == "reshape" else name
        if hasattr(op, target) and not hasattr(Symbol, name):
            setattr(Symbol, name, make(target))

    def astype(self, dtype):
        return op.Cast(self, dtype=dtype)

    Symbol.astype = astype


_install_methods()

from . import composed as _composed  # noqa: E402
from . import contrib, image, linalg  # noqa: E402

_composed.install(sys.modules[__name__], op)

__all__ = [
    "Symbol", "Variable", "var", "Group", "load", "load_json", "pow", "maximum", "minimum",
    "zeros", "ones", "full", "arange", "contrib", "linalg", "image",
]

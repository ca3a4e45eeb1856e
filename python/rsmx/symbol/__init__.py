"""Symbolic graphs: ``mx.sym``, with every operator of the registry as a function."""

from __future__ import annotations

import sys
import types

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


def maximum(left, right):
    """Element-wise maximum of symbols and numbers."""
    if isinstance(left, Symbol) and isinstance(right, Symbol):
        return op._Maximum(left, right)
    if isinstance(left, Symbol):
        return op._MaximumScalar(left, scalar=float(right))
    if isinstance(right, Symbol):
        return op._MaximumScalar(right, scalar=float(left))
    return max(left, right)


def minimum(left, right):
    """Element-wise minimum of symbols and numbers."""
    if isinstance(left, Symbol) and isinstance(right, Symbol):
        return op._Minimum(left, right)
    if isinstance(left, Symbol):
        return op._MinimumScalar(left, scalar=float(right))
    if isinstance(right, Symbol):
        return op._MinimumScalar(right, scalar=float(left))
    return min(left, right)


__all__ = ["Symbol", "Variable", "var", "Group", "load", "load_json", "pow", "maximum", "minimum"]

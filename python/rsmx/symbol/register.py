"""Makes a Symbol function for every operator in the core's registry."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from .. import _core
from .._op_doc import op_docstring
from ..attribute import AttrScope
from ..base import MXNetTypeError, _Null
from ..name import NameManager
from ..ndarray.register import attr_str
from .symbol import _HIDDEN_KEYS, Symbol, _stored_attrs

__all__ = ["make_sym_function", "register_all", "register_namespace"]


# The initializer an operator gives the variables of some inputs that have none, as in
# MXNet: PReLU's slopes start at 0.25, BatchNorm's moving statistics at 0 and 1.
_INPUT_VAR_INIT = {
    "LeakyReLU": {1: '["Constant", {"value": 0.25}]'},
    "BatchNorm": {3: '["zero", {}]', 4: '["one", {}]'},
}


def _init_input_vars(handle: _core.SymbolHandle, inits: dict[int, str]) -> None:
    """Sets ``__init__`` on the variables at the input positions of ``inits`` of the new
    node ``handle`` that have none."""
    children = handle.children()
    if children is None or handle.num_outputs() == 0:
        return
    for index, init in inits.items():
        if index >= children.num_outputs():
            continue
        child = children.output(index)
        if child.op_name() == "null" and child.attr("__init__") is None:
            child.set_attr("__init__", init)


def make_sym_function(
    func_name: str, op_name: str, inputs: list[str], variadic: bool, params: list[str], doc: str
) -> Callable[..., Symbol]:
    """A function ``f(*inputs, name=None, attr=None, **attributes)`` returning a Symbol."""
    hint = func_name.lower()

    def sym_function(*args: Any, **kwargs: Any) -> Symbol:
        name = kwargs.pop("name", None)
        attr = kwargs.pop("attr", None)
        pos: list[Symbol] = []
        rest: list[Any] = []
        slot, skipped = 0, False
        for a in args:
            if not variadic and not rest and slot < len(inputs) and (a is None or isinstance(a, Symbol)):
                # Positional inputs fill the input slots in order; None leaves one out
                # (`Convolution(x, w, None, ...)`), as in MXNet, and later ones go by name.
                if a is None:
                    skipped = True
                elif skipped:
                    kwargs[inputs[slot]] = a
                else:
                    pos.append(a)
                slot += 1
            elif isinstance(a, Symbol) and not rest:
                pos.append(a)
            else:
                rest.append(a)
        if variadic and not pos and isinstance(kwargs.get("data"), (list, tuple)):
            pos = list(kwargs.pop("data"))
        named: list[tuple[str, Any]] = []
        attrs: dict[str, str] = {}
        hidden: dict[str, str] = {}
        free = [p for p in params if not (variadic and p == "num_args")]
        if len(rest) > len(free):
            raise MXNetTypeError(f"{func_name}: too many positional arguments")
        for p, v in zip(free, rest, strict=False):
            kwargs[p] = v
        for k, v in kwargs.items():
            if isinstance(v, Symbol):
                named.append((k, v.handle))
            elif v is None and k in inputs:
                continue
            elif v is _Null or (v is None and k == "dtype"):
                continue
            elif k in _HIDDEN_KEYS:
                # `lr_mult=2` on an operator is the node's `__lr_mult__`, as in MXNet.
                hidden[k] = str(v)
            else:
                attrs[k] = attr_str(k, v)
        attrs.update(_stored_attrs(AttrScope.current.get(attr)))
        attrs.update(_stored_attrs(hidden))
        node_name = NameManager.current.get(name, hint)
        handle = _core.SymbolHandle.create(op_name, attrs, [s.handle for s in pos], named, node_name)
        if op_name in _INPUT_VAR_INIT:
            _init_input_vars(handle, _INPUT_VAR_INIT[op_name])
        return Symbol(handle)

    sym_function.__name__ = func_name
    sym_function.__qualname__ = func_name
    sym_function.__doc__ = op_docstring(
        op_name,
        doc,
        inputs,
        variadic,
        params,
        "Symbol",
        "Also takes ``name`` (the node's name) and ``attr`` (a dict of attributes).",
    )
    return sym_function


def register_all(public: types.ModuleType, internal: types.ModuleType, op: types.ModuleType) -> None:
    """Adds every registered operator to ``mx.sym`` (public names), ``mx.sym._internal``
    (names starting with ``_``) and ``mx.sym.op``."""
    for name, aliases, inputs, variadic, params, doc in _core.list_ops():
        for n in [name, *aliases]:
            f = make_sym_function(n, name, inputs, variadic, params, doc)
            setattr(op, n, f)
            if n.startswith("_"):
                setattr(internal, n, f)
            elif not hasattr(public, n):
                setattr(public, n, f)


def register_namespace(module: types.ModuleType, namespace: str) -> None:
    """Adds the operators registered as ``_<namespace>_X`` to ``module`` as ``X``
    (``mx.sym.contrib.quadratic`` makes a ``_contrib_quadratic`` node)."""
    from .._namespaces import fill_namespace

    def make(short: str, entry: tuple) -> Callable[..., Symbol]:
        name, _aliases, inputs, variadic, params, doc = entry
        f = make_sym_function(short, name, inputs, variadic, params, doc)
        return f

    fill_namespace(module, namespace, make)

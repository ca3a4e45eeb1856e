"""Makes a Python function for every operator in the core's registry."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _core
from .._op_doc import op_docstring
from ..base import _Null
from ..context import Context, current_context

__all__ = ["attr_str", "make_op_function", "register_all", "register_namespace"]


# Graph attributes (`lr_mult=2` on a layer): an imperative call has no node to keep them.
_IGNORED_KEYS = frozenset(
    ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage", "profiler_scope")
)


def attr_str(key: str, value: Any) -> str:
    """The string MXNet passes to the core for attribute ``key``."""
    if key == "dtype" and value is not None:
        return np.dtype(value).name
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(str(v.item() if isinstance(v, np.generic) else v) for v in value) + (
            ",)" if len(value) == 1 else ")"
        )
    return str(value)


def make_op_function(
    name: str, inputs: list[str], variadic: bool, params: list[str], doc: str
) -> Callable[..., Any]:
    """A function ``f(*inputs, *params, out=None, name=None, ctx=None, **attrs)``."""
    from .ndarray import NDArray

    n_in = len(inputs)

    def op_function(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        kwargs.pop("name", None)
        ctx = kwargs.pop("ctx", None)
        arrays: list[NDArray] = []
        attrs: dict[str, str] = {}
        if variadic:
            i = 0
            while i < len(args) and isinstance(args[i], NDArray):
                arrays.append(args[i])
                i += 1
            if not arrays and isinstance(kwargs.get("data"), (list, tuple)):
                arrays = list(kwargs.pop("data"))
            rest = args[i:]
            if "num_args" in params:
                kwargs.setdefault("num_args", len(arrays))
        else:
            slots: list[Any] = [None] * n_in
            pos = 0
            rest_list: list[Any] = []
            for a in args:
                if pos < n_in and (isinstance(a, NDArray) or a is None):
                    slots[pos] = a
                    pos += 1
                else:
                    rest_list.append(a)
            for j, in_name in enumerate(inputs):
                if in_name in kwargs:
                    slots[j] = kwargs.pop(in_name)
            for j, s in enumerate(slots):
                if s is not None and not isinstance(s, NDArray):
                    from ..base import MXNetTypeError

                    raise MXNetTypeError(
                        f"{name}: input '{inputs[j]}' must be an NDArray, got {type(s).__name__}"
                    )
            arrays = [s for s in slots if s is not None]
            rest = tuple(rest_list)
        free_params = [p for p in params if p != "num_args" or not variadic]
        if len(rest) > len(free_params):
            from ..base import MXNetTypeError

            raise MXNetTypeError(f"{name}: too many positional arguments")
        for p, v in zip(free_params, rest, strict=False):
            kwargs[p] = v
        for k, v in kwargs.items():
            if v is _Null or (v is None and k == "dtype") or k in _IGNORED_KEYS:
                continue
            attrs[k] = attr_str(k, v)
        ctx_pair = None
        if ctx is not None:
            ctx_pair = Context(ctx)._pair if not isinstance(ctx, str) else _parse_ctx(ctx)._pair
        elif not arrays:
            ctx_pair = current_context()._pair
        if "ctx" in params and ctx is not None:
            attrs["ctx"] = str(ctx)
        outs = None
        if out is not None:
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
        res = _core.invoke(name, arrays, attrs, outs, ctx_pair)
        if out is not None:
            return out
        return res[0] if len(res) == 1 else res

    op_function.__name__ = name
    op_function.__qualname__ = name
    op_function.__doc__ = op_docstring(name, doc, inputs, variadic, params, "NDArray")
    return op_function


def _parse_ctx(s: str) -> Context:
    t, _, rest = s.partition("(")
    return Context(t, int(rest.rstrip(")") or 0))


def register_all(public: types.ModuleType, internal: types.ModuleType, op: types.ModuleType) -> None:
    """Adds every registered operator to ``mx.nd`` (public names), ``mx.nd._internal``
    (names starting with ``_``) and ``mx.nd.op``."""
    for name, aliases, inputs, variadic, params, doc in _core.list_ops():
        for n in [name, *aliases]:
            f = make_op_function(name, inputs, variadic, params, doc)
            f.__name__ = n
            setattr(op, n, f)
            if n.startswith("_"):
                setattr(internal, n, f)
            elif not hasattr(public, n):
                setattr(public, n, f)


def register_namespace(module: types.ModuleType, namespace: str) -> None:
    """Adds the operators registered as ``_<namespace>_X`` to ``module`` as ``X``
    (``mx.nd.contrib.quadratic`` runs ``_contrib_quadratic``)."""
    from .._namespaces import fill_namespace

    def make(short: str, entry: tuple) -> Callable[..., Any]:
        name, _aliases, inputs, variadic, params, doc = entry
        f = make_op_function(name, inputs, variadic, params, doc)
        f.__name__ = f.__qualname__ = short
        return f

    fill_namespace(module, namespace, make)

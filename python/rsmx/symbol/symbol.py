"""The Symbol class: a graph of operators over variables, composed in Python and held
by the core, with MXNet 1.x's API."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import _core
from ..attribute import AttrScope
from ..base import (
    MXNetError,
    MXNetIndexError,
    MXNetTypeError,
    MXNetValueError,
    NotImplementedForSymbol,
)
from ..context import Context, current_context
from ..name import NameManager
from ..util import is_np_shape

__all__ = ["Symbol", "Variable", "var", "Group", "load", "load_json"]

_HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage", "profiler_scope")

_DTYPE_FLAGS = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.float16): 2,
    np.dtype(np.uint8): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int8): 5,
    np.dtype(np.int64): 6,
    np.dtype(np.bool_): 7,
}
_FLAG_TYPES = {v: k.type for k, v in _DTYPE_FLAGS.items()}


def _dtype_flag(t: Any) -> int:
    try:
        return _DTYPE_FLAGS[np.dtype(t)]
    except (KeyError, TypeError) as e:
        raise MXNetTypeError(f"unsupported dtype {t!r}") from e


def _stored_attrs(attr: dict[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (attr or {}).items():
        if not isinstance(v, str):
            raise MXNetValueError(f"attribute '{k}' must be a string, got {type(v).__name__}")
        out[f"__{k}__" if k in _HIDDEN_KEYS else k] = v
    return out


class Symbol:
    """Symbolic outputs of a graph; compose with operators from ``mx.sym``."""

    __slots__ = ("handle",)

    def __init__(self, handle: _core.SymbolHandle):
        self.handle = handle

    # ------------------------------------------------------------------ structure
    @property
    def name(self) -> str | None:
        """The name of a single-output symbol's node; ``None`` for a group."""
        return self.handle.name()

    def __repr__(self) -> str:
        name = self.name
        if name is None:
            return f"<Symbol group [{', '.join(self.list_outputs())}]>"
        return f"<Symbol {name}>"

    def __len__(self) -> int:
        return self.handle.num_outputs()

    def __iter__(self) -> Iterator[Symbol]:
        return (self[i] for i in range(len(self)))

    def __getitem__(self, index: int | str) -> Symbol:
        if isinstance(index, str):
            names = self.list_outputs()
            hits = [i for i, n in enumerate(names) if n == index]
            if not hits:
                # MXNet also accepts the node name of a single-output entry.
                hits = [i for i, n in enumerate(names) if n == index + "_output"]
            if not hits:
                raise MXNetValueError(f"cannot find output '{index}' among {names}")
            if len(hits) > 1:
                raise MXNetValueError(f"there are several outputs named '{index}'")
            index = hits[0]
        if isinstance(index, slice):
            return Group([self[i] for i in range(len(self))[index]])
        if not isinstance(index, (int, np.integer)):
            raise MXNetTypeError(f"symbol index must be an int or str, got {type(index).__name__}")
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise MXNetIndexError(f"symbol output index {index} out of range for {n} outputs")
        return Symbol(self.handle.output(int(index)))

    def list_arguments(self) -> list[str]:
        """Names of the arguments (inputs that are not auxiliary states)."""
        return self.handle.list_arguments()

    def list_outputs(self) -> list[str]:
        """Names of the outputs."""
        return self.handle.list_outputs()

    def list_auxiliary_states(self) -> list[str]:
        """Names of the auxiliary states (such as BatchNorm's moving statistics)."""
        return self.handle.list_auxiliary_states()

    def list_inputs(self) -> list[str]:
        """Names of every variable: arguments and auxiliary states."""
        return self.handle.list_inputs()

    def get_internals(self) -> Symbol:
        """Every node's outputs, as one group."""
        return Symbol(self.handle.internals())

    def get_children(self) -> Symbol | None:
        """The inputs of the output nodes (each node once, however many of its outputs
        this symbol has), or ``None`` for a variable."""
        h = self.handle.children()
        if h is None or len(self.list_outputs()) < 2:
            return None if h is None else Symbol(h)
        seen: set[int] = set()
        parts = []
        for i, (node, _, _) in enumerate(json.loads(self.tojson())["heads"]):
            if node not in seen:
                seen.add(node)
                child = self[i].get_children()
                if child is not None:
                    parts.append(child)
        return Group(parts) if parts else None

    def _gen_atomic_symbol(self) -> Symbol:
        """The operator of this symbol's node with its attributes but none of its inputs,
        to compose anew (positionally) with other inputs."""
        graph = json.loads(self.tojson())
        nodes = {nid for nid, _, _ in graph["heads"]}
        if len(nodes) != 1:
            raise MXNetError(
                "Generating atomic symbol from other symbol only works for nongrouped symbol."
            )
        node = graph["nodes"][nodes.pop()]
        if node["op"] == "null":
            raise MXNetError("cannot generate an atomic symbol from a variable")
        attrs = node.get("attrs") or {}
        return Symbol(_core.SymbolHandle.create(node["op"], attrs, [], [], ""))

    # ------------------------------------------------------------------ attributes
    def attr(self, key: str) -> str | None:
        """The attribute ``key`` of a single-output symbol's node, or ``None``."""
        return self.handle.attr(key)

    def list_attr(self, recursive: bool = False) -> dict[str, str]:
        """The node's attributes (``recursive`` is no longer supported, as in MXNet)."""
        if recursive:
            raise DeprecationWarning(
                "Symbol.list_attr with recursive=True has been deprecated. "
                "Please use attr_dict instead."
            )
        return dict(self.handle.list_attr())

    def attr_dict(self) -> dict[str, dict[str, str]]:
        """Attributes of every node that has any, by node name."""
        return {name: dict(attrs) for name, attrs in self.handle.attr_dict()}

    def _set_attr(self, **kwargs: str) -> None:
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise MXNetValueError("Set Attr only accepts string values")
            self.handle.set_attr(k, v)

    # ------------------------------------------------------------------ composition
    def __call__(self, *args: Symbol, **kwargs: Any) -> Symbol:
        name = kwargs.pop("name", None)
        for s in list(args) + list(kwargs.values()):
            if not isinstance(s, Symbol):
                raise MXNetTypeError("compose only accepts Symbol inputs")
        res = Symbol(
            self.handle.compose([s.handle for s in args], [(k, s.handle) for k, s in kwargs.items()])
        )
        if name is not None and len(res) == 1 and res.handle.op_name() != "null":
            warnings.warn("renaming a composed symbol is not supported; the name is kept", stacklevel=2)
        return res

    def __copy__(self) -> Symbol:
        return Symbol(self.handle)

    def __deepcopy__(self, memo: dict) -> Symbol:
        return load_json(self.tojson())

    def __getstate__(self) -> dict[str, str]:
        return {"handle": self.tojson()}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.handle = _core.SymbolHandle.from_json(state["handle"])

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, other: Any, op: str, scalar_op: str, reverse: bool = False) -> Symbol:
        from . import op as _op

        if isinstance(other, Symbol):
            args = (other, self) if reverse else (self, other)
            return getattr(_op, op)(*args)
        if isinstance(other, (int, float, np.number, bool)):
            # As MXNet, the scalar is written as Python writes it (`2`, `2.5`).
            scalar = other if type(other) in (int, float) else float(other)
            return getattr(_op, scalar_op)(self, scalar=scalar)
        raise MXNetTypeError(f"type {type(other).__name__} not supported with Symbol")

    def __add__(self, o: Any) -> Symbol:
        return self._binary(o, "_Plus", "_PlusScalar")

    def __radd__(self, o: Any) -> Symbol:
        return self._binary(o, "_Plus", "_PlusScalar")

    def __sub__(self, o: Any) -> Symbol:
        return self._binary(o, "_Minus", "_MinusScalar")

    def __rsub__(self, o: Any) -> Symbol:
        return self._binary(o, "_Minus", "_RMinusScalar", reverse=True)

    def __mul__(self, o: Any) -> Symbol:
        return self._binary(o, "_Mul", "_MulScalar")

    def __rmul__(self, o: Any) -> Symbol:
        return self._binary(o, "_Mul", "_MulScalar")

    def __truediv__(self, o: Any) -> Symbol:
        return self._binary(o, "_Div", "_DivScalar")

    def __rtruediv__(self, o: Any) -> Symbol:
        return self._binary(o, "_Div", "_RDivScalar", reverse=True)

    def __mod__(self, o: Any) -> Symbol:
        return self._binary(o, "_Mod", "_ModScalar")

    def __rmod__(self, o: Any) -> Symbol:
        return self._binary(o, "_Mod", "_RModScalar", reverse=True)

    def __pow__(self, o: Any) -> Symbol:
        return self._binary(o, "_Power", "_PowerScalar")

    def __rpow__(self, o: Any) -> Symbol:
        return self._binary(o, "_Power", "_rpower_scalar", reverse=True)

    def __neg__(self) -> Symbol:
        return self.__mul__(-1.0)

    def __abs__(self) -> Symbol:
        from . import op as _op

        return _op.abs(self)

    def __eq__(self, o: Any) -> Symbol:  # type: ignore[override]
        return self._binary(o, "_equal", "_equal_scalar")

    def __ne__(self, o: Any) -> Symbol:  # type: ignore[override]
        return self._binary(o, "_not_equal", "_not_equal_scalar")

    def __gt__(self, o: Any) -> Symbol:
        return self._binary(o, "_greater", "_greater_scalar")

    def __ge__(self, o: Any) -> Symbol:
        return self._binary(o, "_greater_equal", "_greater_equal_scalar")

    def __lt__(self, o: Any) -> Symbol:
        return self._binary(o, "_lesser", "_lesser_scalar")

    def __le__(self, o: Any) -> Symbol:
        return self._binary(o, "_lesser_equal", "_lesser_equal_scalar")

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise NotImplementedForSymbol(self.__bool__, "bool")

    # NDArray methods a Symbol has no meaning for.
    def wait_to_read(self) -> None:
        raise NotImplementedForSymbol(self.wait_to_read, None)

    def asnumpy(self) -> None:
        raise NotImplementedForSymbol(self.asnumpy, None)

    def asscalar(self) -> None:
        raise NotImplementedForSymbol(self.asscalar, None)

    def copy(self) -> None:
        raise NotImplementedForSymbol(self.copy, None)

    def as_in_context(self) -> None:
        raise NotImplementedForSymbol(self.as_in_context, None)

    def detach(self) -> None:
        raise NotImplementedForSymbol(self.detach, None)

    def backward(self) -> None:
        raise NotImplementedForSymbol(self.backward, None)

    # ------------------------------------------------------------------ inference
    def _known(self, args: tuple, kwargs: dict, what: str) -> dict[str, Any]:
        known: dict[str, Any] = {}
        if args:
            names = self.list_arguments()
            if len(args) > len(names):
                raise MXNetValueError(
                    f"{what}: {len(args)} positional values for {len(names)} arguments"
                )
            for n, v in zip(names, args, strict=False):
                if v is not None:
                    known[n] = v
        for k, v in kwargs.items():
            if v is not None:
                known[k] = v
        return known

    def infer_shape(self, *args: Any, **kwargs: Any):
        """``(arg_shapes, out_shapes, aux_shapes)`` from known argument shapes, or
        ``(None, None, None)`` (with a warning) when some cannot be inferred."""
        arg, out, aux = self._infer_shape(args, kwargs)
        unknown_dim = -1 if is_np_shape() else 0
        unknown_shape = lambda s: s is None or unknown_dim in s  # noqa: E731
        if any(unknown_shape(s) for s in arg + out + aux):
            unknown = [n for n, s in zip(self.list_arguments(), arg, strict=False) if unknown_shape(s)]
            warnings.warn(
                "Cannot decide shape for the following arguments (0s in shape means unknown "
                f"dimensions). Consider providing them as input:\n\t{unknown}",
                stacklevel=2,
            )
            return None, None, None
        return arg, out, aux

    def infer_shape_partial(self, *args: Any, **kwargs: Any):
        """Like ``infer_shape``, with ``()`` for the shapes that cannot be inferred."""
        arg, out, aux = self._infer_shape(args, kwargs)
        if is_np_shape():
            return arg, out, aux
        fix = lambda v: [() if s is None else s for s in v]  # noqa: E731
        return fix(arg), fix(out), fix(aux)

    def _infer_shape(self, args: tuple, kwargs: dict):
        known = {}
        for k, v in self._known(args, kwargs, "infer_shape").items():
            if not isinstance(v, (tuple, list)):
                raise MXNetTypeError(f"infer_shape: the shape of '{k}' must be a tuple")
            known[k] = [int(d) for d in v]
        arg, out, aux = self.handle.infer_shape(known, is_np_shape())
        conv = lambda v: [None if s is None else tuple(s) for s in v]  # noqa: E731
        return conv(arg), conv(out), conv(aux)

    def infer_type(self, *args: Any, **kwargs: Any):
        """``(arg_types, out_types, aux_types)`` as numpy types from known argument types,
        or ``(None, None, None)`` when some cannot be inferred."""
        known = {k: _dtype_flag(v) for k, v in self._known(args, kwargs, "infer_type").items()}
        arg, out, aux = self.handle.infer_type(known)
        if any(t is None for t in arg + out + aux):
            return None, None, None
        conv = lambda v: [_FLAG_TYPES[t] for t in v]  # noqa: E731
        return conv(arg), conv(out), conv(aux)

    def infer_type_partial(self, *args: Any, **kwargs: Any):
        """Like ``infer_type``, with ``None`` for the types that cannot be inferred."""
        known = {k: _dtype_flag(v) for k, v in self._known(args, kwargs, "infer_type").items()}
        arg, out, aux = self.handle.infer_type(known)
        conv = lambda v: [None if t is None else _FLAG_TYPES[t] for t in v]  # noqa: E731
        return conv(arg), conv(out), conv(aux)

    # ------------------------------------------------------------------ files
    def tojson(self, remove_amp_cast: bool = True) -> str:
        """The graph as MXNet's JSON (marked ``is_np_shape`` under NumPy shape semantics)."""
        text = self.handle.to_json()
        return _mark_np_shape(text) if is_np_shape() else text

    def save(self, fname: str, remove_amp_cast: bool = True) -> None:
        """Writes the JSON to ``fname``."""
        if not isinstance(fname, str):
            raise MXNetTypeError("fname must be a string")
        with open(fname, "w") as f:
            f.write(self.tojson())

    def debug_str(self) -> str:
        """A readable listing of the graph's nodes."""
        graph = json.loads(self.tojson())
        lines = []
        for node in graph["nodes"]:
            if node["op"] == "null":
                lines.append(f"Variable:{node['name']}")
                continue
            lines.append("--------------------")
            lines.append(f"Op:{node['op']}, Name={node['name']}")
            lines.append("Inputs:")
            for i, (nid, idx, _) in enumerate(node["inputs"]):
                lines.append(f"\targ[{i}]={graph['nodes'][nid]['name']}({idx}) version=0")
            if node.get("attrs"):
                lines.append("Attrs:")
                lines.extend(f"\t{k}={v}" for k, v in node["attrs"].items())
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ binding
    def simple_bind(
        self,
        ctx: Context,
        grad_req: Any = "write",
        type_dict: dict | None = None,
        stype_dict: dict | None = None,
        group2ctx: dict | None = None,
        shared_arg_names: list[str] | None = None,
        shared_exec: Any = None,
        shared_buffer: dict | None = None,
        **kwargs: Any,
    ):
        """Binds with arrays allocated from the shapes in ``kwargs`` (and types in
        ``type_dict``); see ``Executor``."""
        from ..executor import simple_bind

        return simple_bind(
            self,
            ctx,
            grad_req=grad_req,
            type_dict=type_dict,
            group2ctx=group2ctx,
            shared_arg_names=shared_arg_names,
            shared_exec=shared_exec,
            shared_buffer=shared_buffer,
            # As MXNet's, only tuple values are shapes; other keywords are ignored.
            shapes={k: v for k, v in kwargs.items() if isinstance(v, (tuple, list))},
        )

    def bind(
        self,
        ctx: Context,
        args: Any,
        args_grad: Any = None,
        grad_req: Any = "write",
        aux_states: Any = None,
        group2ctx: dict | None = None,
        shared_exec: Any = None,
    ):
        """Binds to the given arrays; see ``Executor``."""
        from ..executor import bind

        return bind(self, ctx, args, args_grad, grad_req, aux_states, group2ctx, shared_exec)

    def eval(self, ctx: Context | None = None, **kwargs: Any):
        """Binds to ``kwargs`` and runs forward; returns the outputs."""
        ctx = ctx or current_context()
        ex = self.bind(ctx, kwargs, grad_req="null")
        return ex.forward()


def Variable(
    name: str,
    attr: dict | None = None,
    shape: tuple | None = None,
    lr_mult: float | None = None,
    wd_mult: float | None = None,
    dtype: Any = None,
    init: Any = None,
    stype: str | None = None,
    **kwargs: Any,
) -> Symbol:
    """A variable: an input of the graph, given a value at bind time."""
    if not isinstance(name, str):
        raise MXNetTypeError("Expect a string for variable `name`")
    attrs = _stored_attrs(AttrScope.current.get(attr))
    if shape is not None:
        attrs["__shape__"] = str((int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(_dtype_flag(dtype))
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None:
        attrs["__storage_type__"] = str({"default": 0, "row_sparse": 1, "csr": 2}[stype])
    for k, v in kwargs.items():
        if k.startswith("__") and k.endswith("__"):
            attrs[k] = str(v)
        else:
            raise MXNetValueError(
                f"Attribute name={k} is not supported. Additional attributes must start and "
                "end with double underscores, e.g, __yourattr__"
            )
    return Symbol(_core.SymbolHandle.variable(name, attrs))


var = Variable


def Group(symbols: list[Symbol]) -> Symbol:
    """The outputs of several symbols as one symbol."""
    if not symbols or any(not isinstance(s, Symbol) for s in symbols):
        raise MXNetTypeError("Expected a list of symbols as input")
    return Symbol(_core.SymbolHandle.group([s.handle for s in symbols]))


_GRAPH_ATTRS = re.compile(r'"attrs": \{("mxnet_version": \["int", -?\d+\])\}\s*\}\s*$')


def _mark_np_shape(text: str) -> str:
    """``text`` (the core's JSON) with the graph attribute ``is_np_shape`` added, laid out
    as MXNet writes it."""
    found = _GRAPH_ATTRS.search(text)
    if found is None:
        return text
    attrs = f'"attrs": {{\n    "is_np_shape": ["int", 1], \n    {found.group(1)}\n  }}\n}}'
    return text[: found.start()] + attrs


def _np_shape_attr(shape: str) -> str | None:
    """A legacy ``__shape__`` value in NumPy semantics: 0 dims become unknown (-1), and no
    dims at all an unknown shape (None); a value that is no shape is kept."""
    try:
        dims = [int(d) for d in shape.strip("()[] ").split(",") if d.strip()]
    except ValueError:
        return shape
    if not dims:
        return None
    return "[" + ",".join(str(-1 if d == 0 else d) for d in dims) + "]"


def _legacy_shapes_to_np(json_str: str) -> str:
    """The JSON of a graph saved without NumPy shape semantics, with its variables'
    ``__shape__`` attributes rewritten for them (as MXNet does when loading such a file
    under ``np_shape``)."""
    graph = json.loads(json_str)
    flag = graph.get("attrs", {}).get("is_np_shape", ["int", 0])
    if int(flag[1]):
        return json_str
    for node in graph.get("nodes", []):
        attrs = node.get("attrs") or node.get("attr") or {}
        if "__shape__" in attrs:
            converted = _np_shape_attr(attrs["__shape__"])
            if converted is None:
                del attrs["__shape__"]
            else:
                attrs["__shape__"] = converted
    return json.dumps(graph)


def load_json(json_str: str) -> Symbol:
    """A symbol from MXNet's JSON; under NumPy shape semantics the 0s of shapes saved
    without them are read as unknown dims."""
    if not isinstance(json_str, str):
        raise MXNetTypeError("json_str needs to be a string")
    if is_np_shape() and "__shape__" in json_str:
        json_str = _legacy_shapes_to_np(json_str)
    return Symbol(_core.SymbolHandle.from_json(json_str))


def load(fname: str) -> Symbol:
    """A symbol from a JSON file MXNet or rsmx wrote."""
    if not isinstance(fname, str):
        raise MXNetTypeError("fname needs to be a string")
    try:
        with open(fname) as f:
            text = f.read()
    except OSError as e:
        raise MXNetError(f"cannot read symbol file '{fname}': {e}") from e
    return load_json(text)


def _name(name: str | None, hint: str) -> str:
    return NameManager.current.get(name, hint)


def _default_ctx(ctx: Context | None) -> Context:
    return ctx if ctx is not None else current_context()

"""The Executor: a symbol bound to arrays, run forward and backward by the core."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from . import _core
from . import ndarray as nd
from .base import MXNetTypeError, MXNetValueError
from .context import Context
from .ndarray import NDArray
from .symbol.cse import cse_enabled, eliminate_common_expr
from .util import is_np_shape

__all__ = ["Executor", "bind", "simple_bind"]

_REQS = ("null", "write", "add")


def _ctx(ctx: Any) -> Context:
    if not isinstance(ctx, Context):
        raise MXNetTypeError(f"ctx must be a Context, got {type(ctx).__name__}")
    return ctx


def _grad_reqs(grad_req: Any, names: list[str]) -> list[str]:
    if isinstance(grad_req, str):
        reqs = [grad_req] * len(names)
    elif isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(names):
            raise MXNetValueError(
                f"grad_req has {len(grad_req)} entries for {len(names)} arguments"
            )
        reqs = list(grad_req)
    elif isinstance(grad_req, dict):
        # As MXNet's, names that are not arguments are ignored: one dict serves several
        # symbols.
        reqs = [grad_req.get(n, "null") for n in names]
    else:
        raise MXNetTypeError("grad_req must be a str, a list or a dict")
    for r in reqs:
        if r not in _REQS:
            raise MXNetValueError(f"grad_req must be 'write', 'add' or 'null', got {r!r}")
    return reqs


def _array_list(arrays: Any, names: list[str], what: str, allow_missing: bool) -> list:
    if arrays is None:
        if allow_missing:
            return [None] * len(names)
        raise MXNetValueError(f"{what} is required")
    if isinstance(arrays, dict):
        out = []
        for n in names:
            if n in arrays:
                out.append(arrays[n])
            elif allow_missing:
                out.append(None)
            else:
                raise MXNetValueError(f"key '{n}' is missing in '{what}'")
        return out
    if isinstance(arrays, (list, tuple)):
        if len(arrays) != len(names):
            raise MXNetValueError(
                f"Length of {what} does not match the number of arguments: expected "
                f"{len(names)} ({', '.join(names)}), got {len(arrays)}"
            )
        return list(arrays)
    raise MXNetTypeError(f"{what} must be a list or a dict of NDArrays")


def _check_arrays(arrays: list, names: list[str], what: str) -> None:
    for n, a in zip(names, arrays, strict=True):
        if a is not None and not isinstance(a, NDArray):
            raise MXNetTypeError(f"{what}['{n}'] must be an NDArray, got {type(a).__name__}")


def bind(sym, ctx, args, args_grad=None, grad_req="write", aux_states=None, group2ctx=None,
         shared_exec=None) -> Executor:
    """Binds ``sym`` to ``args`` (list or dict), gradients ``args_grad`` and auxiliary
    states ``aux_states``."""
    ctx = _ctx(ctx)
    arg_names = sym.list_arguments()
    aux_names = sym.list_auxiliary_states()
    arg_arrays = _array_list(args, arg_names, "args", allow_missing=False)
    _check_arrays(arg_arrays, arg_names, "args")
    grad_arrays = _array_list(args_grad, arg_names, "args_grad", allow_missing=True)
    _check_arrays(grad_arrays, arg_names, "args_grad")
    reqs = _grad_reqs(grad_req, arg_names)
    if args_grad is None:
        reqs = ["null"] * len(arg_names)
    reqs = [r if g is not None else "null" for r, g in zip(reqs, grad_arrays, strict=True)]
    grad_arrays = [g if r != "null" else None for r, g in zip(reqs, grad_arrays, strict=True)]
    if aux_states is None and not aux_names:
        aux_states = []
    aux_arrays = _array_list(aux_states, aux_names, "aux_states", allow_missing=False)
    _check_arrays(aux_arrays, aux_names, "aux_states")
    g2c = {k: _ctx(v)._pair for k, v in (group2ctx or {}).items()}
    bound = eliminate_common_expr(sym) if cse_enabled() else sym
    handle = _core.bind(
        bound.handle,
        ctx._pair,
        arg_arrays,
        grad_arrays,
        reqs,
        aux_arrays,
        g2c,
        shared_exec._handle if shared_exec is not None else None,
    )
    exe = Executor(handle, sym, ctx, arg_arrays, grad_arrays, reqs, aux_arrays, group2ctx)
    exe._bound_symbol = bound
    return exe


def _declared_inputs() -> dict[str, tuple[list[str], bool]]:
    """Each operator's input names and whether it takes any number of them."""
    table: dict[str, tuple[list[str], bool]] = {}
    for name, aliases, inputs, variadic, *_ in _core.list_ops():
        for n in (name, *aliases):
            table[n] = (list(inputs), bool(variadic))
    return table


def _graph_inputs(sym) -> dict[str, tuple[list[str | None], list[str]]]:
    """For each op node of ``sym``: the variable feeding each input (None where an op
    does) and the input names its operator declares (``arg<i>`` for any number of
    inputs, ``input<i>`` past the declared ones)."""
    import json

    nodes = json.loads(sym.tojson())["nodes"]
    declared = _declared_inputs()
    table: dict[str, tuple[list[str | None], list[str]]] = {}
    for node in nodes:
        if node["op"] == "null":
            continue
        names, variadic = declared.get(node["op"], ([], False))
        sources = [nodes[i] for i, *_ in node["inputs"]]
        variables = [src["name"] if src["op"] == "null" else None for src in sources]
        labels = [f"arg{k}" if variadic else (names[k] if k < len(names) else f"input{k}")
                  for k in range(len(sources))]
        table[node["name"]] = (variables, labels)
    return table


def _view_of(buf: NDArray, shape: tuple) -> NDArray:
    """The first elements of ``buf`` seen as ``shape``."""
    n = int(np.prod(shape, dtype=np.int64))
    return buf.reshape((-1,))[:n].reshape(shape)


def _from_buffer(buffer: dict, name: str, shape: tuple, dtype: Any, ctx: Context) -> NDArray:
    """A view of ``buffer[name]`` shaped ``shape`` when it is large enough; otherwise a new
    zero array, which replaces the buffer's entry."""
    buf = buffer.get(name)
    if buf is not None and buf.size >= int(np.prod(shape, dtype=np.int64)):
        if buf.dtype != np.dtype(dtype):
            raise MXNetTypeError(
                f"simple_bind: shared buffer '{name}' has dtype {np.dtype(buf.dtype).name}, "
                f"needed {np.dtype(dtype).name}"
            )
        return _view_of(buf, shape)
    if buf is not None:
        logging.warning(
            "Bucketing: data %s has a shape %s, which is larger than already allocated "
            "shape %s. Need to re-allocate. Consider putting default bucket key to be the "
            "bucket taking the largest input for better memory sharing.",
            name, shape, buf.shape,
        )
    arr = nd.zeros(shape, ctx, dtype=dtype)
    buffer[name] = arr
    return arr


def simple_bind(sym, ctx, grad_req="write", type_dict=None, group2ctx=None,
                shared_arg_names=None, shared_exec=None, shared_buffer=None,
                shapes=None) -> Executor:
    """Binds ``sym`` with new arrays shaped from ``shapes`` (argument name to shape)."""
    ctx = _ctx(ctx)
    shapes = dict(shapes or {})
    arg_shapes, _, aux_shapes = sym.infer_shape_partial(**shapes)
    arg_names = sym.list_arguments()
    aux_names = sym.list_auxiliary_states()
    unknown_dim = -1 if is_np_shape() else 0
    missing = [n for n, s in zip(arg_names + aux_names, arg_shapes + aux_shapes, strict=True)
               if s is None or (s == () and not is_np_shape()) or unknown_dim in s]
    if missing:
        raise MXNetValueError(
            f"simple_bind: cannot infer the shapes of {missing} from the given shapes "
            f"{shapes}; give them as keyword arguments"
        )
    arg_types, _, aux_types = sym.infer_type_partial(**(type_dict or {}))
    arg_types = [t or np.float32 for t in arg_types]
    aux_types = [t or np.float32 for t in aux_types]
    reqs = _grad_reqs(grad_req, arg_names)
    attrs = sym.attr_dict()

    def place(name: str) -> Context:
        grp = attrs.get(name, {}).get("__ctx_group__")
        if group2ctx and grp in group2ctx:
            return group2ctx[grp]
        return ctx

    shared_names = set(shared_arg_names or [])
    shared_args = shared_exec.arg_dict if shared_exec is not None else {}
    shared_grads = shared_exec.grad_dict if shared_exec is not None else {}
    args, grads = [], []
    for n, s, t, r in zip(arg_names, arg_shapes, arg_types, reqs, strict=True):
        c = place(n)
        if n in shared_names and n in shared_args:
            a = shared_args[n]
            if a.shape != s:
                raise MXNetValueError(
                    f"simple_bind: shared argument '{n}' has shape {a.shape}, needed {s}"
                )
            args.append(a)
            g = shared_grads.get(n)
            grads.append(g if g is not None or r == "null" else nd.zeros(s, c, dtype=t))
            continue
        if shared_buffer is not None and n not in shared_names:
            # Inputs that are not shared parameters (data, labels, states) and their
            # gradients reuse the memory of the buffer, as different buckets do.
            args.append(_from_buffer(shared_buffer, n, s, t, c))
            grads.append(_from_buffer(shared_buffer, "grad of " + n, s, t, c)
                         if r != "null" else None)
            continue
        args.append(nd.zeros(s, c, dtype=t))
        grads.append(nd.zeros(s, c, dtype=t) if r != "null" else None)
    aux = [nd.zeros(s, place(n), dtype=t)
           for n, s, t in zip(aux_names, aux_shapes, aux_types, strict=True)]
    return bind(sym, ctx, args, dict(zip(arg_names, grads, strict=True)), reqs, aux, group2ctx,
                shared_exec)


class Executor:
    """A bound symbol: ``forward``, ``backward`` and the arrays they use."""

    def __init__(self, handle, symbol, ctx, arg_arrays, grad_arrays, grad_req, aux_arrays,
                 group2ctx):
        self._handle = handle
        self._symbol = symbol
        self._ctx = ctx
        self._group2ctx = group2ctx
        self.arg_arrays: list[NDArray] = arg_arrays
        self.grad_arrays: list[NDArray | None] = grad_arrays
        self.aux_arrays: list[NDArray] = aux_arrays
        self._grad_req = grad_req
        self.outputs: list[NDArray] = handle.outputs()
        self._arg_dict = None
        self._grad_dict = None
        self._aux_dict = None
        self._output_dict = None
        self._monitor_callback = None
        self._monitor_all = False
        self._bound_symbol = symbol

    # ------------------------------------------------------------------ running
    def forward(self, is_train: bool = False, **kwargs: Any) -> list[NDArray]:
        """Runs the graph; keyword arguments are copied into the argument arrays first."""
        if kwargs:
            arg_dict = self.arg_dict
            for name, array in kwargs.items():
                if not isinstance(array, (NDArray, np.ndarray)):
                    raise MXNetValueError("only accept keyword argument of NDArrays and numpy.ndarray")
                if name not in arg_dict:
                    raise MXNetTypeError(f"Unknown argument {name}")
                if arg_dict[name].shape != array.shape:
                    raise MXNetValueError(
                        f"Shape not match! Argument {name}, need: {arg_dict[name].shape}, "
                        f"received: {array.shape}"
                    )
                arg_dict[name][:] = array
        self._handle.forward(bool(is_train))
        if self._monitor_callback is not None:
            self._run_monitor(forward=True)
        return self.outputs

    def backward(self, out_grads: Any = None, is_train: bool = True) -> None:
        """Computes the gradients into the gradient arrays. ``out_grads`` (an NDArray, a
        list, or a dict by output name) are the head gradients; outputs of loss
        operators need none."""
        n = len(self.outputs)
        if out_grads is None:
            grads: list = [None] * n
        elif isinstance(out_grads, NDArray):
            grads = [out_grads]
        elif isinstance(out_grads, dict):
            names = self._symbol.list_outputs()
            grads = [out_grads.get(k) for k in names]
        elif isinstance(out_grads, (list, tuple)):
            grads = list(out_grads)
        else:
            raise MXNetTypeError("out_grads must be an NDArray, a list or a dict of NDArrays")
        for g in grads:
            if g is not None and not isinstance(g, NDArray):
                raise MXNetTypeError("inputs must be NDArray")
        grads += [None] * (n - len(grads))
        fixed = []
        for g, o in zip(grads, self.outputs, strict=False):
            if g is not None and g.context != o.context:
                g = g.as_in_context(o.context)
            if g is not None and g.dtype != o.dtype:
                g = g.astype(o.dtype)
            fixed.append(g)
        self._handle.backward(fixed, bool(is_train))
        if self._monitor_callback is not None:
            self._run_monitor(forward=False)

    def set_monitor_callback(self, callback, monitor_all: bool = False) -> None:
        """Calls ``callback(name, array)`` with the outputs of every op, forward and
        backward (``<node>_<output>``); with ``monitor_all`` also with its inputs first:
        a variable by its name, then each input as ``<node>_<input>``."""
        self._monitor_callback = callback
        self._monitor_all = monitor_all

    def _run_monitor(self, forward: bool) -> None:
        cb = self._monitor_callback
        for name, is_fwd, out_names, outs, ins in self._handle.op_steps():
            if is_fwd != forward:
                continue
            if self._monitor_all:
                if ins:
                    self._monitor_inputs(cb, name, ins)
                else:
                    self._monitor_variable_inputs(cb, name)
            for on, a in zip(out_names, outs, strict=False):
                cb(f"{name}_{on}", a)

    def _monitor_inputs(self, cb, node: str, arrays: list[NDArray]) -> None:
        variables, labels = self._node_inputs().get(node, ([], []))
        for k, a in enumerate(arrays):
            if k < len(variables) and variables[k] is not None:
                cb(variables[k], a)
            cb(f"{node}_{labels[k] if k < len(labels) else f'input{k}'}", a)

    def _monitor_variable_inputs(self, cb, node: str) -> None:
        """The inputs of a node the core runs as parts (a composite operator) that are
        variables, named as ``_monitor_inputs`` names them."""
        variables, labels = self._node_inputs().get(node, ([], []))
        for k, v in enumerate(variables):
            a = None if v is None else self.arg_dict.get(v, self.aux_dict.get(v))
            if a is not None:
                cb(v, a)
                cb(f"{node}_{labels[k] if k < len(labels) else f'input{k}'}", a)

    def _node_inputs(self) -> dict[str, tuple[list[str | None], list[str]]]:
        """For each op node of the bound graph: the variable feeding each input (None
        where an op does) and the names of its inputs."""
        if getattr(self, "_node_input_names", None) is None:
            self._node_input_names = _graph_inputs(self._bound_symbol)
        return self._node_input_names

    def get_optimized_symbol(self):
        """The symbol the executor runs: the bound one after common-expression
        elimination (see ``MXNET_ELIMINATE_COMMON_EXPR``)."""
        from .symbol import Symbol

        return Symbol(self._bound_symbol.handle)

    # ------------------------------------------------------------------ dictionaries
    @staticmethod
    def _get_dict(names: list[str], arrays: list) -> dict:
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise MXNetValueError(f"Duplicate names detected, {dup}")
        return dict(zip(names, arrays, strict=True))

    @property
    def arg_dict(self) -> dict[str, NDArray]:
        """Argument arrays by name."""
        if self._arg_dict is None:
            self._arg_dict = self._get_dict(self._symbol.list_arguments(), self.arg_arrays)
        return self._arg_dict

    @property
    def grad_dict(self) -> dict[str, NDArray | None]:
        """Gradient arrays by argument name."""
        if self._grad_dict is None:
            self._grad_dict = self._get_dict(self._symbol.list_arguments(), self.grad_arrays)
        return self._grad_dict

    @property
    def aux_dict(self) -> dict[str, NDArray]:
        """Auxiliary state arrays by name."""
        if self._aux_dict is None:
            self._aux_dict = self._get_dict(self._symbol.list_auxiliary_states(), self.aux_arrays)
        return self._aux_dict

    @property
    def output_dict(self) -> dict[str, NDArray]:
        """Output arrays by name."""
        if self._output_dict is None:
            self._output_dict = self._get_dict(self._symbol.list_outputs(), self.outputs)
        return self._output_dict

    # ------------------------------------------------------------------ parameters
    def copy_params_from(self, arg_params: dict, aux_params: dict | None = None,
                         allow_extra_params: bool = False) -> None:
        """Copies parameter values into the argument and auxiliary arrays by name."""
        for name, array in arg_params.items():
            if name in self.arg_dict:
                dst = self.arg_dict[name]
                array.astype(dst.dtype).copyto(dst)
            elif not allow_extra_params:
                raise MXNetValueError(f"Find name \"{name}\" that is not in the arguments")
        if aux_params is None:
            return
        for name, array in aux_params.items():
            if name in self.aux_dict:
                dst = self.aux_dict[name]
                array.astype(dst.dtype).copyto(dst)
            elif not allow_extra_params:
                raise MXNetValueError(f"Find name {name} that is not in the auxiliary states")

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False,
                **kwargs: Any) -> Executor:
        """A new executor for new input shapes, sharing arrays and memory with this one."""
        arg_shapes, _, aux_shapes = self._symbol.infer_shape(**kwargs)
        if arg_shapes is None:
            raise MXNetValueError("Insufficient argument shapes provided.")
        new_args, new_grads, new_aux = {}, {}, []

        def resize(name: str, old: NDArray, shape: tuple, what: str) -> NDArray:
            if old.shape == shape:
                return old
            if not partial_shaping and name not in kwargs:
                raise MXNetValueError(
                    f"Shape of unspecified array {what} {name} changed. This can cause the "
                    "new executor to not share parameters with the old one. Please check for "
                    "error in network. If this is intended, set partial_shaping=True to "
                    "suppress this warning."
                )
            if int(np.prod(shape)) > old.size:
                if not allow_up_sizing:
                    raise MXNetValueError(
                        f"New shape of {what} {name} {shape} larger than original {old.shape}. "
                        "First making a big executor and then down sizing it is more efficient "
                        "than the reverse. If you really want to up size, set "
                        "allow_up_sizing=True to enable allocation of new arrays."
                    )
                return nd.empty(shape, old.context, dtype=old.dtype)
            return _view_of(old, shape)

        names = self._symbol.list_arguments()
        for name, old, grad, shape in zip(names, self.arg_arrays, self.grad_arrays, arg_shapes,
                                          strict=True):
            new_args[name] = resize(name, old, shape, "arg")
            if grad is not None:
                new_grads[name] = resize(name, grad, shape, "arg")
        for name, old, shape in zip(self._symbol.list_auxiliary_states(), self.aux_arrays,
                                    aux_shapes, strict=True):
            new_aux.append(resize(name, old, shape, "aux"))
        exe = bind(self._symbol, self._ctx, new_args, new_grads, self._grad_req, new_aux,
                   self._group2ctx, shared_exec=self)
        if self._monitor_callback is not None:
            exe.set_monitor_callback(self._monitor_callback, self._monitor_all)
        return exe

    def debug_str(self) -> str:
        """The plan: every node, its inputs, where each output's memory comes from, and
        the total memory allocated."""
        return self._handle.debug_str()

    @property
    def _planned_bytes(self) -> int:
        return self._handle.planned_bytes()

"""How the control-flow operators (``_foreach``, ``_while_loop``, ``_cond``) run: their
shape and type inference through their subgraphs, and their computation, which runs the
subgraphs operator by operator through the custom-operator seam.

The core holds each node's subgraphs as MXNet's JSON; it asks ``PROPS[op](**attrs)`` for
the properties. A forward pass in training records the loop with autograd, and the
backward pass runs that record's backward, so gradients reach every input however many
steps ran and whichever branch was taken.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _core, autograd
from .base import MXNetError
from .ndarray import op as nd_op
from .ndarray import zeros as nd_zeros
from .ndarray.cached_op import CachedOp
from .ndarray.ndarray import NDArray
from .operator import CustomOp, CustomOpProp

__all__ = ["PROPS"]


def _locs(text: str) -> list[int]:
    value = ast.literal_eval(text) if text.strip() else []
    return [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


def _subgraphs(text: str) -> list[Any]:
    from .symbol import load_json

    return [load_json(json.dumps(g)) for g in json.loads(text)]


def _output_names(n: int) -> list[str]:
    return ["output"] if n == 1 else [f"output{i}" for i in range(n)]


def _known_shape(s: Any) -> tuple[int, ...] | None:
    if s is None or len(s) == 0 or any(int(d) <= 0 for d in s):
        return None
    return tuple(int(d) for d in s)


class _Graph:
    """A subgraph with its inputs in MXNet's order (``list_inputs``): infers what its
    inputs and outputs are from what is known, and runs on NDArrays."""

    def __init__(self, sym: Any) -> None:
        self.sym = sym
        self.inputs: list[str] = sym.list_inputs()
        self.num_outputs = len(sym.list_outputs())
        self._run: CachedOp | None = None

    def infer(self, known: dict[str, Any], kind: str) -> tuple[dict[str, Any], list[Any]]:
        """``(input name -> shape or type, output shapes or types)`` given some inputs';
        ``None`` where not known."""
        names = self.sym.list_arguments() + self.sym.list_auxiliary_states()
        if kind == "shape":
            arg, out, aux = self.sym._infer_shape((), {k: v for k, v in known.items() if v is not None})
            conv: Callable[[Any], Any] = _known_shape
        else:
            given = {k: v for k, v in known.items() if v is not None}
            arg, out, aux = self.sym.infer_type_partial(**given)
            conv = lambda t: None if t is None else np.dtype(t)  # noqa: E731
        by_name = {n: conv(v) for n, v in zip(names, list(arg) + list(aux), strict=True)}
        return by_name, [conv(v) for v in out]

    def __call__(self, arrays: list[NDArray]) -> list[NDArray]:
        if self._run is None:
            self._run = CachedOp(self.sym)
        outs = self._run(*arrays)
        return list(outs) if isinstance(outs, (list, tuple)) else [outs]


class _ControlFlowOp(CustomOp):
    """Runs a control-flow node's computation (``prop.run``); in training, records it so
    that the backward pass can run the record's backward."""

    def __init__(self, prop: _ControlFlowProp) -> None:
        super().__init__()
        self.prop = prop
        self._saved: tuple[list[NDArray], list[NDArray]] | None = None
        # The shape, type and context of each output, for outputs no step computed.
        self._meta: list[tuple[tuple[int, ...], Any, Any]] = []

    def _record(self, in_data: list[NDArray]) -> tuple[list[NDArray], list[NDArray]]:
        leaves = [x.copy() for x in in_data]
        for x in leaves:
            x.attach_grad()
        with autograd.record(train_mode=True):
            # A copy makes an output that is an input a node of its own.
            outs = [o.copy() for o in self.prop.run(leaves, self._meta)]
        return leaves, outs

    def forward(self, is_train: bool, req: list[str], in_data: list[NDArray], out_data: list[NDArray],  # noqa: FBT001
                aux: list[NDArray]) -> None:
        self._meta = [(o.shape, o.dtype, o.context) for o in out_data]
        if is_train:
            self._saved = self._record(list(in_data))
            outs = self._saved[1]
        else:
            self._saved = None
            outs = self.prop.run(list(in_data), self._meta)
        for dst, r, src in zip(out_data, req, outs, strict=True):
            self.assign(dst, r, src)

    def backward(self, req: list[str], out_grad: list[NDArray], in_data: list[NDArray],
                 out_data: list[NDArray], in_grad: list[NDArray], aux: list[NDArray]) -> None:
        saved, self._saved = self._saved, None
        leaves, outs = saved if saved is not None else self._record(list(in_data))
        # An output that no input reaches (zero padding of a loop that never stepped)
        # passes no gradient back.
        heads = [(o, g) for o, g in zip(outs, out_grad, strict=True) if _core.autograd_in_graph(o)]
        if heads:
            autograd.backward([o for o, _ in heads], head_grads=[g for _, g in heads])
        for dst, r, leaf in zip(in_grad, req, leaves, strict=True):
            self.assign(dst, r, leaf.grad)


class _ControlFlowProp(CustomOpProp):
    """What the three operators share: their inputs, outputs and backward needs."""

    op_name = ""

    def __init__(self, num_args: str, num_outputs: str, subgraphs: str) -> None:
        super().__init__(need_top_grad=True)
        self.graphs = [_Graph(g) for g in _subgraphs(subgraphs)]
        self.num_inputs = int(num_args) - len(self.graphs)
        self.num_outputs = int(num_outputs)

    def list_arguments(self) -> list[str]:
        return [f"data{i}" for i in range(self.num_inputs)]

    def list_outputs(self) -> list[str]:
        return _output_names(self.num_outputs)

    def declare_backward_dependency(self, out_grad: list[int], in_data: list[int], out_data: list[int]) -> list[int]:
        # The backward runs what the forward recorded, so it reads no forward array.
        return list(out_grad)

    def create_operator(self, ctx: Any, in_shapes: list[list[int]], in_dtypes: list[int]) -> CustomOp:
        return _ControlFlowOp(self)

    def infer_shape(self, in_shape: list[list[int]]) -> tuple[list[Any], list[Any], list[Any]]:
        ins, outs = self._infer([_known_shape(s) for s in in_shape], "shape")
        show = lambda s: [] if s is None else list(s)  # noqa: E731
        return [show(s) for s in ins], [show(s) for s in outs], []

    def infer_type(self, in_type: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        ins, outs = self._infer([None if t is None else np.dtype(t) for t in in_type], "type")
        return ins, outs, []

    def _infer(self, ins: list[Any], kind: str) -> tuple[list[Any], list[Any]]:
        raise NotImplementedError

    def run(self, inputs: list[NDArray], meta: list[tuple[tuple[int, ...], Any, Any]]) -> list[NDArray]:
        """The outputs for ``inputs`` (in the node's input order); ``meta`` holds each
        output's shape, type and context."""
        raise NotImplementedError

    def _error(self, msg: str) -> MXNetError:
        return MXNetError(f"{self.op_name}: {msg}")


def _fill(ins: list[Any], locs: list[int], names: list[str], found: dict[str, Any]) -> None:
    """Sets the node inputs at ``locs`` (feeding subgraph inputs ``names``) that are not
    known to what the subgraph inferred for them."""
    for loc, name in zip(locs, names, strict=True):
        if ins[loc] is None and found.get(name) is not None:
            ins[loc] = found[name]


class _ForeachProp(_ControlFlowProp):
    """``_foreach``: the body runs once per row of the data (axis 0); the outputs are
    the body's data outputs stacked over the rows, then the last states."""

    op_name = "_foreach"

    def __init__(self, num_args: str, num_outputs: str, num_out_data: str, in_state_locs: str,
                 in_data_locs: str, remain_locs: str, subgraphs: str) -> None:
        super().__init__(num_args, num_outputs, subgraphs)
        self.num_out_data = int(num_out_data)
        self.state_locs = _locs(in_state_locs)
        self.data_locs = _locs(in_data_locs)
        self.remain_locs = _locs(remain_locs)
        self.body = self.graphs[0]
        # The node's inputs are the data, the states, then the others; each feeds the body
        # input at its location.
        self.feeds = self.data_locs + self.state_locs + self.remain_locs
        if sorted(self.feeds) != list(range(len(self.body.inputs))) or len(self.feeds) != self.num_inputs:
            raise self._error(
                f"the locations {self.feeds} do not cover the body's {len(self.body.inputs)} inputs "
                f"({', '.join(self.body.inputs)}) once each with the node's {self.num_inputs} inputs")
        if self.num_outputs != self.num_out_data + len(self.state_locs) or self.body.num_outputs != self.num_outputs:
            raise self._error(
                f"num_outputs={self.num_outputs} must be num_out_data={self.num_out_data} plus the "
                f"{len(self.state_locs)} states, and the body has {self.body.num_outputs} outputs")

    def _infer(self, ins: list[Any], kind: str) -> tuple[list[Any], list[Any]]:
        nd, ns = len(self.data_locs), len(self.state_locs)
        names = [self.body.inputs[loc] for loc in self.feeds]
        steps = None
        if kind == "shape":
            for s in ins[:nd]:
                if s is not None:
                    steps = s[0]
            row = lambda s: None if s is None else (s[1:] or (1,))  # noqa: E731
            known = [row(s) for s in ins[:nd]] + ins[nd:]
        else:
            known = list(ins)
        found: dict[str, Any] = {}
        outs: list[Any] = [None] * self.num_outputs
        for _ in range(2):
            found, outs = self.body.infer(dict(zip(names, known, strict=True)), kind)
            # A state not given takes the shape (type) the body gives it.
            missing = [j for j in range(ns) if known[nd + j] is None and outs[self.num_out_data + j] is not None]
            if not missing:
                break
            for j in missing:
                known[nd + j] = outs[self.num_out_data + j]
        result = list(ins)
        for i in range(nd, len(ins)):
            if result[i] is None:
                result[i] = found.get(names[i], known[i])
        data_outs = outs[:self.num_out_data]
        if kind == "shape":
            data_outs = [None if o is None or steps is None else (steps, *o) for o in data_outs]
        return result, data_outs + outs[self.num_out_data:]

    def run(self, inputs: list[NDArray], meta: list[tuple[tuple[int, ...], Any, Any]]) -> list[NDArray]:
        nd, ns = len(self.data_locs), len(self.state_locs)
        data, states, remain = inputs[:nd], inputs[nd:nd + ns], inputs[nd + ns:]
        steps = data[0].shape[0]
        for d in data:
            if d.shape[0] != steps:
                raise self._error(f"the data arrays have different lengths on axis 0: "
                                  f"{[x.shape for x in data]}")
        if steps == 0:
            raise self._error("the data have no rows to iterate over (axis 0 has length 0)")
        feed: list[Any] = [None] * len(self.body.inputs)
        for loc, x in zip(self.remain_locs, remain, strict=True):
            feed[loc] = x
        per_step: list[list[NDArray]] = []
        for t in range(steps):
            for loc, d in zip(self.data_locs, data, strict=True):
                feed[loc] = _row(d, t)
            for loc, s in zip(self.state_locs, states, strict=True):
                feed[loc] = s
            outs = self.body(feed)
            per_step.append(outs[:self.num_out_data])
            states = outs[self.num_out_data:]
        stacked = [nd_op.stack(*column, axis=0) for column in zip(*per_step, strict=True)]
        return stacked + list(states)


def _row(x: NDArray, t: int) -> NDArray:
    """Row ``t`` of ``x`` along axis 0 (a one-element vector for a vector), recorded."""
    row = nd_op.slice_axis(x, axis=0, begin=t, end=t + 1)
    return nd_op.reshape(row, shape=x.shape[1:] or (1,))


def _scalar_true(x: NDArray, what: str, op_name: str) -> bool:
    if x.size != 1:
        raise MXNetError(f"{op_name}: {what} must give one value (a shape (1,) array), got shape {x.shape}")
    return bool(x.asnumpy().reshape(-1)[0] != 0)


class _WhileLoopProp(_ControlFlowProp):
    """``_while_loop``: the body runs while the condition holds, at most
    ``max_iterations`` times; the outputs are the body's step outputs stacked (padded
    with zeros to ``max_iterations`` rows), then the final loop variables."""

    op_name = "_while_loop"

    def __init__(self, num_args: str, num_outputs: str, num_out_data: str, max_iterations: str,
                 cond_input_locs: str, func_input_locs: str, func_var_locs: str, subgraphs: str) -> None:
        super().__init__(num_args, num_outputs, subgraphs)
        self.num_out_data = int(num_out_data)
        self.max_iterations = int(max_iterations)
        self.cond, self.func = self.graphs
        self.cond_locs = _locs(cond_input_locs)
        self.func_locs = _locs(func_input_locs)
        self.var_locs = _locs(func_var_locs)
        if self.max_iterations < 0:
            raise self._error(f"max_iterations must be at least 0, got {self.max_iterations}")
        for what, locs, g in (("cond_input_locs", self.cond_locs, self.cond),
                              ("func_input_locs", self.func_locs, self.func)):
            if len(locs) != len(g.inputs) or any(not 0 <= v < self.num_inputs for v in locs):
                raise self._error(f"{what}={locs} must name one of the {self.num_inputs} inputs for each "
                                  f"of the subgraph's inputs ({', '.join(g.inputs)})")
        if any(not 0 <= v < len(self.func.inputs) for v in self.var_locs):
            raise self._error(f"func_var_locs={self.var_locs} must be positions among the body's inputs")
        if self.num_outputs != self.num_out_data + len(self.var_locs) or self.func.num_outputs != self.num_outputs:
            raise self._error(
                f"num_outputs={self.num_outputs} must be num_out_data={self.num_out_data} plus the "
                f"{len(self.var_locs)} loop variables, and the body has {self.func.num_outputs} outputs")
        if self.cond.num_outputs != 1:
            raise self._error(f"the condition must have one output, it has {self.cond.num_outputs}")
        # The node input holding each loop variable.
        self.var_inputs = [self.func_locs[v] for v in self.var_locs]

    def _infer(self, ins: list[Any], kind: str) -> tuple[list[Any], list[Any]]:
        result = list(ins)
        func_names = self.func.inputs
        found, outs = self.func.infer({n: ins[loc] for n, loc in zip(func_names, self.func_locs, strict=True)}, kind)
        _fill(result, self.func_locs, func_names, found)
        for j, loc in enumerate(self.var_inputs):
            if result[loc] is None:
                result[loc] = outs[self.num_out_data + j]
        cond_found, _ = self.cond.infer(
            {n: result[loc] for n, loc in zip(self.cond.inputs, self.cond_locs, strict=True)}, kind)
        _fill(result, self.cond_locs, self.cond.inputs, cond_found)
        data_outs = outs[:self.num_out_data]
        if kind == "shape":
            data_outs = [None if o is None else (self.max_iterations, *o) for o in data_outs]
        var_outs = [result[loc] for loc in self.var_inputs]
        return result, data_outs + var_outs

    def run(self, inputs: list[NDArray], meta: list[tuple[tuple[int, ...], Any, Any]]) -> list[NDArray]:
        current = list(inputs)
        per_step: list[list[NDArray]] = []
        while len(per_step) < self.max_iterations:
            pred = self.cond([current[loc] for loc in self.cond_locs])[0]
            if not _scalar_true(pred, "the condition", self.op_name):
                break
            outs = self.func([current[loc] for loc in self.func_locs])
            per_step.append(outs[:self.num_out_data])
            for loc, value in zip(self.var_inputs, outs[self.num_out_data:], strict=True):
                current[loc] = value
        stacked = [self._stack_padded([o[j] for o in per_step], meta[j]) for j in range(self.num_out_data)]
        return stacked + [current[loc] for loc in self.var_inputs]

    def _stack_padded(self, rows: list[NDArray], meta: tuple[tuple[int, ...], Any, Any]) -> NDArray:
        """``rows`` stacked on a new axis 0 and padded with zeros to ``max_iterations``."""
        shape, dtype, ctx = meta
        if not rows:
            return nd_zeros(shape, ctx=ctx, dtype=dtype)
        pad = self.max_iterations - len(rows)
        zeros = None if pad == 0 else nd_zeros((pad, *shape[1:]), ctx=ctx, dtype=dtype)
        stacked = nd_op.stack(*rows, axis=0)
        return stacked if zeros is None else nd_op.concat(stacked, zeros, dim=0)


class _CondProp(_ControlFlowProp):
    """``_cond``: the then-branch's outputs if the predicate is true, else the
    else-branch's; only the branch taken runs."""

    op_name = "_cond"

    def __init__(self, num_args: str, num_outputs: str, cond_input_locs: str, then_input_locs: str,
                 else_input_locs: str, subgraphs: str) -> None:
        super().__init__(num_args, num_outputs, subgraphs)
        self.pred, self.then_g, self.else_g = self.graphs
        self.locs = [_locs(cond_input_locs), _locs(then_input_locs), _locs(else_input_locs)]
        for what, locs, g in zip(("cond_input_locs", "then_input_locs", "else_input_locs"), self.locs,
                                 self.graphs, strict=True):
            if len(locs) != len(g.inputs) or any(not 0 <= v < self.num_inputs for v in locs):
                raise self._error(f"{what}={locs} must name one of the {self.num_inputs} inputs for each "
                                  f"of the subgraph's inputs ({', '.join(g.inputs)})")
        for what, g in (("then", self.then_g), ("else", self.else_g)):
            if g.num_outputs != self.num_outputs:
                raise self._error(f"the {what}-branch has {g.num_outputs} outputs, num_outputs is {self.num_outputs}")

    def _infer(self, ins: list[Any], kind: str) -> tuple[list[Any], list[Any]]:
        result = list(ins)
        branch_outs = []
        for g, locs in zip(self.graphs, self.locs, strict=True):
            found, outs = g.infer({n: result[loc] for n, loc in zip(g.inputs, locs, strict=True)}, kind)
            _fill(result, locs, g.inputs, found)
            branch_outs.append(outs)
        then_outs, else_outs = branch_outs[1], branch_outs[2]
        outs = []
        for i, (a, b) in enumerate(zip(then_outs, else_outs, strict=True)):
            if a is not None and b is not None and a != b:
                raise self._error(f"output {i} has {kind} {a} in the then-branch and {b} in the else-branch")
            outs.append(a if a is not None else b)
        return result, outs

    def run(self, inputs: list[NDArray], meta: list[tuple[tuple[int, ...], Any, Any]]) -> list[NDArray]:
        pred = self.pred([inputs[loc] for loc in self.locs[0]])[0]
        which = 1 if _scalar_true(pred, "the predicate", self.op_name) else 2
        return self.graphs[which]([inputs[loc] for loc in self.locs[which]])


PROPS: dict[str, type] = {"_foreach": _ForeachProp, "_while_loop": _WhileLoopProp, "_cond": _CondProp}

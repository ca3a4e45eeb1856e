"""``mx.sym.contrib.foreach``, ``while_loop`` and ``cond``: control flow in a symbol, as
nodes (``_foreach``, ``_while_loop``, ``_cond``) holding the graphs the user's functions
build, with MXNet's attributes and JSON."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from .. import _core
from .._nesting import flatten, regroup
from ..attribute import AttrScope
from ..base import MXNetValueError
from ..name import NameManager
from .symbol import Symbol, _stored_attrs

__all__ = ["foreach", "while_loop", "cond"]


class _LoopBodyError(MXNetValueError, AssertionError):
    """A loop body MXNet refuses with an assertion: caught as either."""


_SUBGRAPH_NAME = "__subgraph_name__"
# How many subgraphs of each name were made (MXNet's AttrScope._subgraph_names).
_subgraph_counts: defaultdict[str, int] = defaultdict(int)


def _flatten(args: Any, what: str) -> tuple[list[Symbol], Any]:
    """The symbols of a nested list, and its layout; a symbol of n > 1 outputs is a list."""
    return flatten(args, Symbol, what, lambda s: len(s.list_outputs()) if len(s.list_outputs()) > 1 else 0)


_regroup = regroup


def _unique_name(sym: Symbol) -> str:
    """The name of the variable standing for ``sym`` inside a subgraph."""
    return f"{sym.name}-{sym.attr('_value_index')}"


def _subgraph_name(name: str) -> str:
    outer = AttrScope.current._attr.get(_SUBGRAPH_NAME, "")
    if outer:
        name = f"{outer}${name}"
    _subgraph_counts[name] += 1
    return f"{name}{_subgraph_counts[name] - 1}"


def _group(symbols: list[Symbol]) -> Symbol:
    from .symbol import Group

    return Group(symbols)


def _outputs_of(outputs: list[Symbol], states: list[Symbol], name: str) -> Symbol:
    """The subgraph's outputs, then its states, as one group. As MXNet's graph cut needs
    outputs distinct from inputs, an output that is an input or was made outside the
    subgraph goes through ``identity``, and so does a state that is also an output."""
    from . import op

    everything = outputs + states
    inputs = set(_group(everything).list_inputs()) if everything else set()
    out_names = {o.name for o in outputs}

    def own(s: Symbol, avoid: set[str]) -> Symbol:
        if s.name in inputs or s.name in avoid or s.list_attr().get(_SUBGRAPH_NAME, "") != name:
            return op.identity(s)
        return s

    return _group([own(o, set()) for o in outputs] + [own(s, out_names) for s in states])


def _cut(graph: Symbol) -> tuple[Symbol, dict[str, Symbol], dict[str, Symbol]]:
    """The subgraph with outside entries cut; the outside symbols by the names of the
    variables standing for them; the subgraph's input variables by name."""
    sub, cut = graph.handle.cut_subgraph()
    sub = Symbol(sub)
    outside = {Symbol(c).list_outputs()[0]: Symbol(c) for c in cut}
    internals = sub.get_internals()
    inputs = {n: internals[n] for n in sub.list_inputs()}
    return sub, outside, inputs


def _node(op_name: str, subgraphs: list[Symbol], inputs: list[Symbol], attrs: dict[str, Any],
          name: str | None = None) -> Symbol:
    """A control-flow node over ``inputs`` holding ``subgraphs``."""
    text = {k: str(list(v)) if isinstance(v, (list, tuple)) else str(v) for k, v in attrs.items()}
    text["num_args"] = str(len(inputs) + len(subgraphs))
    text["__subgraphs__"] = json.dumps([json.loads(g.tojson()) for g in subgraphs])
    text.update(_stored_attrs(AttrScope.current.get(None)))
    node_name = NameManager.current.get(name, op_name.lower())
    handle = _core.SymbolHandle.create(op_name, text, [s.handle for s in inputs], [], node_name)
    return Symbol(handle)


def _outputs(node: Symbol, first: int, count: int) -> list[Symbol]:
    return [node[i] for i in range(first, first + count)]


def foreach(body: Callable[[Any, Any], tuple[Any, Any]], data: Any, init_states: Any,
            name: str = "foreach") -> tuple[Any, Any]:
    """Runs ``out, states = body(data[i], states)`` for each row ``i`` of ``data``
    (a Symbol or a nested list of them, sliced on axis 0 together), starting from
    ``init_states``; returns the outputs of every step stacked on a new axis 0 (with
    ``body``'s nesting) and the last states."""
    flat_data, data_layout = _flatten(data, "foreach input")
    flat_states, state_layout = _flatten(init_states, "foreach states")
    name = _subgraph_name(name)
    with AttrScope(**{_SUBGRAPH_NAME: name}):
        from . import var

        in_eles, _ = _regroup([var(_unique_name(s)) for s in flat_data], data_layout)
        states, _ = _regroup([var(_unique_name(s)) for s in flat_states], copy.deepcopy(state_layout))
        sym_out, sym_states = body(in_eles, states)
        sym_out, out_layout = _flatten(sym_out, "foreach output")
        sym_states, body_state_layout = _flatten(sym_states, "foreach loop_vars")
        if body_state_layout != state_layout:
            raise _LoopBodyError("foreach: the input and output loop_vars have different format")
        num_out_data = len(sym_out)
        num_states = len(sym_states)
        graph = _outputs_of(sym_out, sym_states, name)
    sub, outside, sub_inputs = _cut(graph)
    names = sub.list_inputs()
    if len(set(names)) != len(names):
        raise _LoopBodyError(f"foreach: the inputs of the body don't have unique names: {names}")
    data_names = [_unique_name(s) for s in flat_data]
    state_names = [_unique_name(s) for s in flat_states]
    for what, wanted in (("data arrays", data_names), ("state arrays", state_names)):
        if any(n not in names for n in wanted):
            raise _LoopBodyError(f"foreach: the {what} have to be used in the loop body")
    ordered = list(flat_data) + list(flat_states)
    remain_locs = []
    for i, n in enumerate(names):
        if n in outside:
            ordered.append(outside[n])
            remain_locs.append(i)
        elif n not in data_names and n not in state_names:
            # A variable made inside the body: the node reads a copy of it.
            ordered.append(copy.deepcopy(sub_inputs[n]))
            remain_locs.append(i)
    node = _node("_foreach", [sub], ordered, {
        "num_outputs": num_out_data + num_states, "num_out_data": num_out_data,
        "in_state_locs": [names.index(n) for n in state_names],
        "in_data_locs": [names.index(n) for n in data_names], "remain_locs": remain_locs,
    })
    outs, _ = _regroup(_outputs(node, 0, num_out_data), out_layout)
    final, _ = _regroup(_outputs(node, num_out_data, num_states), state_layout)
    return outs, final


def _union_inputs(graphs: list[Symbol], loop_vars: dict[str, Symbol] | None
                  ) -> tuple[list[Symbol], list[list[int]], list[Symbol]]:
    """Cuts each graph; returns the node's inputs, for each graph the node input feeding
    each of its inputs, and the cut graphs. A subgraph input named after a loop variable
    reads it (``while_loop``); without loop variables, one named as an input found so
    far reads that (``cond``); else it reads what was cut, or a copy of the variable
    made inside."""
    inputs: list[Symbol] = []
    seen: dict[int, int] = {}
    all_locs = []
    cut_graphs = []
    for g in graphs:
        known = loop_vars if loop_vars is not None else {s.name: s for s in inputs}
        sub, outside, sub_inputs = _cut(g)
        cut_graphs.append(sub)
        names = sub.list_inputs()
        if len(set(names)) != len(names):
            raise _LoopBodyError(f"The inputs of the subgraph don't have unique names: {names}")
        locs = []
        for n in names:
            if n in known:
                sym = known[n]
            elif n in outside:
                sym = outside[n]
            else:
                sym = copy.deepcopy(sub_inputs[n])
            if id(sym) not in seen:
                seen[id(sym)] = len(inputs)
                inputs.append(sym)
            locs.append(seen[id(sym)])
        all_locs.append(locs)
    return inputs, all_locs, cut_graphs


def while_loop(cond: Callable[..., Any], func: Callable[..., Any], loop_vars: Any,
               max_iterations: Any = None, name: str = "while_loop") -> tuple[Any, Any]:
    """Runs ``step_output, loop_vars = func(*loop_vars)`` while ``cond(*loop_vars)`` is
    true, at most ``max_iterations`` times; returns each step output stacked on axis 0
    (``max_iterations`` rows; the rows of steps that did not run are zeros) and the final
    loop variables."""
    if max_iterations is None:
        raise MXNetValueError("max_iterations should be specified")
    if hasattr(max_iterations, "asscalar"):
        max_iterations = max_iterations.asscalar()
    try:
        max_iterations = int(max_iterations)
    except (TypeError, ValueError) as e:
        raise MXNetValueError("Cannot convert max_iteration to python int") from e
    flat_vars, var_layout = _flatten(loop_vars, "while loop_vars")
    if not flat_vars:
        raise MXNetValueError("loop_vars should contain at least one element")

    def subgraph(make: Callable[[list[Symbol]], tuple[list[Symbol], list[Symbol], Any]],
                 graph_name: str) -> tuple[Symbol, int, int, Any]:
        graph_name = _subgraph_name(graph_name)
        with AttrScope(**{_SUBGRAPH_NAME: graph_name}):
            from . import var

            new_vars, _ = _regroup([var(_unique_name(s)) for s in flat_vars], var_layout)
            outputs, states, out_layout = make(new_vars)
            graph = _outputs_of(outputs + states, [], graph_name)
        return graph, len(outputs), len(outputs) + len(states), out_layout

    def cond_graph(vars_: Any) -> tuple[list[Symbol], list[Symbol], Any]:
        result = cond(*vars_)
        if not isinstance(result, Symbol):
            raise MXNetValueError("Return of cond must be a Symbol")
        return [], [result], None

    def func_graph(vars_: Any) -> tuple[list[Symbol], list[Symbol], Any]:
        step_output, new_vars = func(*vars_)
        step_output = [] if step_output is None else step_output
        new_vars = [] if new_vars is None else new_vars
        step_output = list(step_output) if isinstance(step_output, tuple) else step_output
        new_vars = list(new_vars) if isinstance(new_vars, tuple) else new_vars
        flat_out, out_layout = _flatten(step_output, "while output")
        flat_new, _ = _flatten(new_vars, "while loop_vars")
        if len(flat_new) != len(flat_vars):
            raise MXNetValueError("The number of loop_vars should be consistent during the loop")
        return flat_out, flat_new, out_layout

    cond_g, _, _, _ = subgraph(cond_graph, name + "_cond")
    func_g, num_out_data, num_outputs, out_layout = subgraph(func_graph, name + "_func")
    by_name = {_unique_name(s): s for s in flat_vars}
    inputs, (cond_locs, func_locs), (cond_sub, func_sub) = _union_inputs([cond_g, func_g], by_name)
    func_names = func_sub.list_inputs()
    var_locs = []
    for i, s in enumerate(flat_vars, 1):
        n = _unique_name(s)
        if n not in func_names:
            raise MXNetValueError(f"The {i}-th loop_var doesn't involve into the computation")
        var_locs.append(func_names.index(n))
    node = _node("_while_loop", [cond_sub, func_sub], inputs, {
        "max_iterations": max_iterations, "cond_input_locs": cond_locs, "func_input_locs": func_locs,
        "func_var_locs": var_locs, "num_out_data": num_out_data, "num_outputs": num_outputs,
    })
    outputs, _ = _regroup(_outputs(node, 0, num_out_data), out_layout) if num_out_data else ([], [])
    final, _ = _regroup(_outputs(node, num_out_data, num_outputs - num_out_data), var_layout)
    return outputs, final


def cond(pred: Symbol, then_func: Callable[[], Any], else_func: Callable[[], Any], name: str = "cond") -> Any:
    """``then_func()``'s outputs if the scalar ``pred`` is true, else ``else_func()``'s;
    only the branch taken runs."""

    def subgraph(make: Callable[[], Any], graph_name: str) -> tuple[Symbol, int, Any]:
        graph_name = _subgraph_name(graph_name)
        with AttrScope(**{_SUBGRAPH_NAME: graph_name}):
            outputs, layout = _flatten(make(), "cond outputs")
            graph = _outputs_of(outputs, [], graph_name)
        return graph, len(outputs), layout

    pred_g, pred_outputs, _ = subgraph(lambda: pred, name + "_pred")
    if pred_outputs != 1:
        raise MXNetValueError("pred should always be a single output")
    then_g, then_outputs, then_layout = subgraph(then_func, name + "_then")
    else_g, else_outputs, _ = subgraph(else_func, name + "_else")
    if then_outputs != else_outputs:
        raise MXNetValueError("Number of outputs differs between then-branch and else-branch")
    inputs, locs, subs = _union_inputs([pred_g, then_g, else_g], None)
    node = _node("_cond", subs, inputs, {
        "cond_input_locs": locs[0], "then_input_locs": locs[1], "else_input_locs": locs[2],
        "num_outputs": then_outputs,
    })
    outputs, _ = _regroup(_outputs(node, 0, then_outputs), then_layout)
    return outputs

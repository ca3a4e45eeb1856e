"""Visualize symbolic graphs: ``mx.viz``.

``print_summary`` prints a table of a symbol's layers (output shapes, parameter counts and
the layers they read from), line for line as MXNet 1.x prints it. ``plot_network`` draws the
graph as a Graphviz digraph; without the ``graphviz`` package it returns the DOT source text.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from .symbol import Symbol

__all__ = ["print_summary", "plot_network"]

_Node = dict[str, Any]

# Fill colours of plotted nodes, by kind of operator.
_COLORS = (
    "#8dd3c7",
    "#fb8072",
    "#ffffb3",
    "#bebada",
    "#80b1d3",
    "#fdb462",
    "#b3de69",
    "#fccde5",
)

_DEFAULT_NODE_ATTRS = {
    "shape": "box",
    "fixedsize": "true",
    "width": "1.3",
    "height": "0.8034",
    "style": "filled",
}

_WEIGHT_SUFFIXES = (
    "_weight",
    "_bias",
    "_beta",
    "_gamma",
    "_moving_var",
    "_moving_mean",
    "_running_var",
    "_running_mean",
)

_SUMMARY_HEADER = ("Layer (type)", "Output Shape", "Param #", "Previous Layer")


def _str2tuple(text: str) -> list[str]:
    """The integers written in a shape attribute such as ``"(3, 3)"``, as strings."""
    return re.findall(r"\d+", text)


def _output_key(node: _Node) -> str:
    """The name under which ``get_internals().list_outputs()`` lists a node's (first) output."""
    return node["name"] if node["op"] == "null" else node["name"] + "_output"


def _shape_text(shape: Sequence[int]) -> str:
    """A shape written as ``"3x28x28"``."""
    return "x".join(str(dim) for dim in shape)


def _shape_without_batch(shape_dict: Mapping[str, Sequence[int]], key: str) -> Sequence[int]:
    """The shape listed under ``key`` without its first (batch) dimension; empty if unlisted."""
    shape = shape_dict.get(key)
    return shape[1:] if shape is not None else ()


def _check_symbol(symbol: Any) -> None:
    """Raise ``TypeError`` unless ``symbol`` is a ``Symbol``."""
    if not isinstance(symbol, Symbol):
        raise TypeError("symbol must be a Symbol")


def _infer_output_shapes(symbol: Symbol, shape: Mapping[str, Any]) -> dict[str, tuple]:
    """Every internal output's shape, by output name, from the given input shapes."""
    internals = symbol.get_internals()
    _, out_shapes, _ = internals.infer_shape(**shape)
    if out_shapes is None:
        raise ValueError("Input shape is incomplete")
    return dict(zip(internals.list_outputs(), out_shapes, strict=False))


def _infer_output_types(symbol: Symbol, dtype: Mapping[str, Any]) -> dict[str, type]:
    """Every internal output's numpy type, by output name, from the given input types."""
    internals = symbol.get_internals()
    _, out_types, _ = internals.infer_type(**dtype)
    if out_types is None:
        raise ValueError("Input type is incomplete")
    return dict(zip(internals.list_outputs(), out_types, strict=False))


# --------------------------------------------------------------------------------------------
# print_summary
# --------------------------------------------------------------------------------------------


def _column_ends(line_length: int, positions: Sequence[float]) -> list[int]:
    """Column end positions: fractions of ``line_length`` when the last one is at most 1."""
    if positions[-1] <= 1:
        return [int(line_length * p) for p in positions]
    return [int(p) for p in positions]


def _format_row(fields: Sequence[Any], ends: Sequence[int]) -> str:
    """One table row: each field cut or padded with spaces to end at its column end."""
    line = ""
    for field, end in zip(fields, ends, strict=False):
        line = (line + str(field))[:end]
        line += " " * (end - len(line))
    return line


def _has_bias(node: _Node) -> bool:
    """Whether a FullyConnected or Convolution node has a bias (``no_bias`` is not ``True``)."""
    return node.get("attrs", {}).get("no_bias") != "True"


def _layer_params(node: _Node, in_channels: int, shape_dict: dict[str, tuple] | None) -> int:
    """The number of learned parameters of one layer, by MXNet's per-operator rules.

    ``in_channels`` is the sum of the first non-batch dimension of the layer's listed inputs
    (zero without shapes).
    """
    op = node["op"]
    attrs = node.get("attrs", {})
    if op == "Convolution":
        count = in_channels * int(attrs["num_filter"]) // int(attrs.get("num_group", "1"))
        for k in _str2tuple(attrs["kernel"]):
            count *= int(k)
        return count + (int(attrs["num_filter"]) if _has_bias(node) else 0)
    if op == "FullyConnected":
        inputs = in_channels + 1 if _has_bias(node) else in_channels
        return inputs * int(attrs["num_hidden"])
    if op == "BatchNorm":
        if shape_dict is None:
            return 0
        return int(shape_dict[_output_key(node)][1]) * 2
    if op == "Embedding":
        return int(attrs["input_dim"]) * int(attrs["output_dim"])
    return 0


def _previous_layers(
    node: _Node, nodes: list[_Node], listed_inputs: set[int], shape_dict: dict[str, tuple] | None
) -> tuple[list[str], int]:
    """The names of the inputs a layer lists, and the sum of their first non-batch dimensions.

    Inputs that are operators are listed; variables only when their id is in
    ``listed_inputs``.
    """
    names: list[str] = []
    channels = 0
    for entry in node.get("inputs", []):
        source = nodes[entry[0]]
        if source["op"] == "null" and entry[0] not in listed_inputs:
            continue
        names.append(source["name"])
        if shape_dict is not None:
            shape = _shape_without_batch(shape_dict, _output_key(source))
            if shape:
                channels += int(shape[0])
    return names, channels


def _layer_rows(
    node: _Node, out_shape: Sequence[int], params: int, previous: list[str]
) -> list[list[Any]]:
    """The table rows of one layer: its own, then one for each further previous layer."""
    first = previous[0] if previous else ""
    rows: list[list[Any]] = [
        [node["name"] + "(" + node["op"] + ")", _shape_text(out_shape), params, first]
    ]
    rows.extend(["", "", "", name] for name in previous[1:])
    return rows


def print_summary(
    symbol: Symbol,
    shape: Mapping[str, Any] | None = None,
    line_length: int = 120,
    positions: Sequence[float] = (0.44, 0.64, 0.74, 1.0),
) -> None:
    """Print a table of a symbol's layers, with output shapes and parameter counts.

    Parameters
    ----------
    symbol : Symbol
        The symbol to summarize.
    shape : dict of str to tuple, optional
        Shapes of the inputs, by name. With them, output shapes are shown and the
        parameters of layers whose count depends on their input are counted.
    line_length : int, optional
        Total length of the printed lines.
    positions : sequence of float, optional
        Where the four columns end: fractions of ``line_length`` when the last one is at
        most 1, otherwise absolute positions.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        If ``symbol`` is not a ``Symbol``.
    ValueError
        If ``shape`` is not enough to infer every shape.

    Examples
    --------
    >>> net = mx.sym.FullyConnected(mx.sym.Variable("data"), name="fc", num_hidden=10)
    >>> mx.viz.print_summary(net, shape={"data": (1, 20)})  # doctest: +SKIP
    """
    _check_symbol(symbol)
    shape_dict = _infer_output_shapes(symbol, shape) if shape is not None else None
    conf = json.loads(symbol.tojson())
    nodes: list[_Node] = conf["nodes"]
    # As in MXNet, the members of the first head entry (node id, output index, version) are
    # taken as node ids: variables with those ids are listed as previous layers.
    listed_inputs = set(conf["heads"][0])
    ends = _column_ends(line_length, positions)

    print("_" * line_length)
    print(_format_row(_SUMMARY_HEADER, ends))
    print("=" * line_length)
    total = 0
    for i, node in enumerate(nodes):
        if node["op"] == "null" and i > 0:
            continue
        out_shape: Sequence[int] = ()
        if shape_dict is not None and (node["op"] != "null" or i in listed_inputs):
            out_shape = _shape_without_batch(shape_dict, _output_key(node))
        previous: list[str] = []
        channels = 0
        if node["op"] != "null":
            previous, channels = _previous_layers(node, nodes, listed_inputs, shape_dict)
        params = _layer_params(node, channels, shape_dict)
        total += params
        for row in _layer_rows(node, out_shape, params, previous):
            print(_format_row(row, ends))
        print(("=" if i == len(nodes) - 1 else "_") * line_length)
    print(f"Total params: {total}")
    print("_" * line_length)


# --------------------------------------------------------------------------------------------
# plot_network
# --------------------------------------------------------------------------------------------

_DOT_ID = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*|-?(\.[0-9]+|[0-9]+(\.[0-9]*)?))$")
_DOT_HTML = re.compile(r"<.*>$", re.DOTALL)
_DOT_KEYWORDS = {"node", "edge", "graph", "digraph", "subgraph", "strict"}
_DOT_QUOTE = re.compile(r'(?P<slashes>(?:\\{2})*)\\?"')


def _dot_quote(text: Any) -> str:
    """A DOT identifier for ``text``: as it is when valid, otherwise double-quoted."""
    text = str(text)
    if _DOT_HTML.match(text):
        return text
    if _DOT_ID.match(text) and text.lower() not in _DOT_KEYWORDS:
        return text
    return '"' + _DOT_QUOTE.sub(r'\g<slashes>\\"', text) + '"'


def _dot_attr_list(label: str | None, attrs: Mapping[str, Any]) -> str:
    """A DOT attribute list: the label first, then the other attributes sorted by name."""
    items = [f"label={_dot_quote(label)}"] if label is not None else []
    items += [f"{_dot_quote(k)}={_dot_quote(v)}" for k, v in sorted(attrs.items()) if v is not None]
    return f" [{' '.join(items)}]" if items else ""


class _DotSource:
    """A directed graph written as DOT text, with the ``node``/``edge`` calls of a Digraph."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.body: list[str] = []

    def node(self, name: str, label: str | None = None, **attrs: Any) -> None:
        """Add a node statement."""
        self.body.append(f"\t{_dot_quote(name)}{_dot_attr_list(label, attrs)}\n")

    def edge(self, tail_name: str, head_name: str, label: str | None = None, **attrs: Any) -> None:
        """Add an edge statement from ``tail_name`` to ``head_name``."""
        ends = f"{_dot_quote(tail_name)} -> {_dot_quote(head_name)}"
        self.body.append(f"\t{ends}{_dot_attr_list(label, attrs)}\n")

    @property
    def source(self) -> str:
        """The whole graph as DOT text."""
        return f"digraph {_dot_quote(self.name)} {{\n" + "".join(self.body) + "}\n"


def _new_digraph(title: str, save_format: str) -> Any:
    """A ``graphviz.Digraph`` when graphviz is importable, otherwise a ``_DotSource``."""
    try:
        from graphviz import Digraph
    except ImportError:
        return _DotSource(title)
    return Digraph(name=title, format=save_format)


def _looks_like_weight(name: str) -> bool:
    """Whether a variable's name marks it as a weight, bias or running statistic."""
    return name.endswith(_WEIGHT_SUFFIXES)


def _warn_repeated_names(nodes: list[_Node]) -> None:
    """Warn when several nodes share a name (the plot would merge them)."""
    seen: set[str] = set()
    repeated: set[str] = set()
    for node in nodes:
        (repeated if node["name"] in seen else seen).add(node["name"])
    if repeated:
        warnings.warn(
            "There are multiple variables with the same name in your graph, this may result in "
            "cyclic graph. Repeated names: " + ",".join(repeated),
            RuntimeWarning,
            stacklevel=3,
        )


def _kernel_text(attrs: Mapping[str, str], key: str, default: str) -> str:
    """A kernel-like attribute written as ``"3x3"``, or ``default`` when it is absent."""
    return "x".join(_str2tuple(attrs[key])) if key in attrs else default


def _node_style(node: _Node) -> tuple[str, int]:
    """The label of an operator node and the index of its colour."""
    op = node["op"]
    attrs = node.get("attrs", {})
    if op == "Convolution":
        kernel = "x".join(_str2tuple(attrs["kernel"]))
        stride = _kernel_text(attrs, "stride", "1")
        return f"Convolution\n{kernel}/{stride}, {attrs['num_filter']}", 1
    if op == "FullyConnected":
        return f"FullyConnected\n{attrs['num_hidden']}", 1
    if op == "BatchNorm":
        return node["name"], 3
    if op == "Activation":
        return f"Activation\n{attrs['act_type']}", 2
    if op == "LeakyReLU":
        return f"LeakyReLU\n{attrs.get('act_type', 'Leaky')}", 2
    if op == "Pooling":
        kernel = _kernel_text(attrs, "kernel", "[]")
        stride = _kernel_text(attrs, "stride", "1")
        return f"Pooling\n{attrs['pool_type']}, {kernel}/{stride}", 4
    if op in ("Concat", "Flatten", "Reshape"):
        return node["name"], 5
    if op == "Softmax":
        return node["name"], 6
    if op == "Custom":
        return attrs["op_type"], 7
    return node["name"], 7


def _edge_key(node: _Node) -> str:
    """The output name of a node as an edge's source: the last output of multi-output ops."""
    key = _output_key(node)
    if node["op"] != "null" and "num_outputs" in node.get("attrs", {}):
        key += str(int(node["attrs"]["num_outputs"]) - 1)
    return key


def _edge_label(
    source: _Node, shape_dict: dict[str, tuple] | None, type_dict: dict[str, type] | None
) -> str:
    """An edge's label: the shape (without batch dimension) and/or type of its data."""
    label = ""
    if shape_dict is not None:
        label = _shape_text(shape_dict[_edge_key(source)][1:])
    if type_dict is not None:
        label += "(" + type_dict[_edge_key(source)].__name__ + ")"
    return label


def _add_nodes(
    dot: Any, nodes: list[_Node], node_attr: Mapping[str, str], hide_weights: bool
) -> set[str]:
    """Add every drawn node to ``dot``; return the names of the hidden weight variables."""
    hidden: set[str] = set()
    for node in nodes:
        attr = dict(node_attr)
        if node["op"] == "null":
            if _looks_like_weight(node["name"]):
                # Shown weights get no node of their own: their edges draw them as plain ovals.
                if hide_weights:
                    hidden.add(node["name"])
                continue
            label, color = node["name"], 0
            attr["shape"] = "oval"
        else:
            label, color = _node_style(node)
        attr["fillcolor"] = _COLORS[color]
        dot.node(name=node["name"], label=label, **attr)
    return hidden


def _add_edges(
    dot: Any,
    nodes: list[_Node],
    hidden: set[str],
    shape_dict: dict[str, tuple] | None,
    type_dict: dict[str, type] | None,
) -> None:
    """Add an edge from every operator to each of its inputs that is not hidden."""
    for node in nodes:
        if node["op"] == "null":
            continue
        inputs = node["inputs"]
        if node["op"] == "_contrib_BilinearResize2D":
            inputs = inputs[:1]
        for entry in inputs:
            source = nodes[entry[0]]
            if source["name"] in hidden:
                continue
            label = _edge_label(source, shape_dict, type_dict)
            dot.edge(
                tail_name=node["name"],
                head_name=source["name"],
                label=label,
                dir="back",
                arrowtail="open",
            )


def plot_network(
    symbol: Symbol,
    title: str = "plot",
    save_format: str = "pdf",
    shape: Mapping[str, Any] | None = None,
    dtype: Mapping[str, Any] | None = None,
    node_attrs: Mapping[str, str] | None = None,
    hide_weights: bool = True,
) -> Any:
    """Draw the computation graph of a symbol.

    Parameters
    ----------
    symbol : Symbol
        The symbol whose graph is drawn.
    title : str, optional
        Name of the graph.
    save_format : str, optional
        Output format used when the digraph is rendered (``"pdf"``, ``"png"``, ...).
    shape : dict of str to tuple, optional
        Shapes of the inputs, by name; with them every edge is labelled with the shape
        (without batch dimension) of the data it carries.
    dtype : dict of str to type, optional
        Types of the inputs, by name; with them every edge label ends with the type name of
        its data, e.g. ``"(float32)"``.
    node_attrs : dict of str to str, optional
        Graphviz node attributes that replace or extend the defaults, for example
        ``{"shape": "oval", "fixedsize": "false"}``.
    hide_weights : bool, optional
        Leave out variables named like weights, biases and running statistics
        (``*_weight``, ``*_bias``, ``*_gamma``, ``*_moving_mean``, ...).

    Returns
    -------
    graphviz.Digraph or str
        The digraph when the ``graphviz`` package is importable, otherwise its DOT source.

    Raises
    ------
    TypeError
        If ``symbol`` is not a ``Symbol``.
    ValueError
        If ``shape`` or ``dtype`` is not enough to infer every shape or type.

    Examples
    --------
    >>> net = mx.sym.FullyConnected(mx.sym.Variable("data"), name="fc", num_hidden=10)
    >>> dot = mx.viz.plot_network(net, shape={"data": (1, 20)})  # doctest: +SKIP
    """
    _check_symbol(symbol)
    shape_dict = _infer_output_shapes(symbol, shape) if shape is not None else None
    type_dict = _infer_output_types(symbol, dtype) if dtype is not None else None
    nodes: list[_Node] = json.loads(symbol.tojson())["nodes"]
    _warn_repeated_names(nodes)
    node_attr = {**_DEFAULT_NODE_ATTRS, **(node_attrs or {})}

    dot = _new_digraph(title, save_format)
    hidden = _add_nodes(dot, nodes, node_attr, hide_weights)
    _add_edges(dot, nodes, hidden, shape_dict, type_dict)
    return dot.source if isinstance(dot, _DotSource) else dot

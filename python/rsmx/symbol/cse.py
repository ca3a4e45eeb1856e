"""Common-expression elimination: merges the operator nodes of a graph that compute the same thing."""

from __future__ import annotations

import json
import os
from typing import Any

from .. import _core
from .symbol import Symbol

__all__ = ["cse_enabled", "eliminate_common_expr"]

# Operators whose nodes are never merged: they draw random numbers, keep state or write
# to their inputs (BatchNorm's moving statistics, the optimizer updates).
_UNMERGEABLE = frozenset(("BatchNorm", "RNN", "Custom", "Dropout", "_shuffle", "_foreach",
                          "_while_loop", "_cond", "_CachedOp"))
_UNMERGEABLE_PARTS = ("random", "sample", "dropout", "batchnorm", "_update")


def cse_enabled() -> bool:
    """Whether binding eliminates common expressions: ``MXNET_ELIMINATE_COMMON_EXPR``
    (on unless set to 0)."""
    value = os.environ.get("MXNET_ELIMINATE_COMMON_EXPR", "1").strip().lower()
    return value not in ("0", "false", "no", "off")


def _mergeable(node: dict[str, Any]) -> bool:
    """Whether two nodes like ``node``, with the same inputs and attributes, give the same
    outputs."""
    op = node["op"]
    lowered = op.lower()
    if op in _UNMERGEABLE or any(p in lowered for p in _UNMERGEABLE_PARTS):
        return False
    return not (op == "LeakyReLU" and node.get("attrs", {}).get("act_type") == "rrelu")


def _merge_targets(nodes: list[dict[str, Any]]) -> list[int]:
    """For each node, the node that replaces it (itself when kept). One pass in
    topological order merges whole chains, the inputs being resolved first."""
    target = list(range(len(nodes)))
    seen: dict[tuple, int] = {}
    for nid, node in enumerate(nodes):
        if node["op"] == "null" or not node["inputs"] or not _mergeable(node):
            continue
        inputs = tuple((target[i], idx) for i, idx, *_ in node["inputs"])
        key = (node["op"], json.dumps(node.get("attrs", {}), sort_keys=True), inputs)
        target[nid] = seen.setdefault(key, nid)
    return target


def _output_counts(graph: dict[str, Any]) -> list[int]:
    ptr = graph.get("node_row_ptr")
    if ptr and len(ptr) == len(graph["nodes"]) + 1:
        return [ptr[i + 1] - ptr[i] for i in range(len(graph["nodes"]))]
    counts = [1] * len(graph["nodes"])
    for node in graph["nodes"]:
        for i, idx, *_ in node["inputs"]:
            counts[i] = max(counts[i], idx + 1)
    for i, idx, *_ in graph["heads"]:
        counts[i] = max(counts[i], idx + 1)
    return counts


def _rebuilt(graph: dict[str, Any], target: list[int]) -> dict[str, Any]:
    """``graph`` with every node replaced by its target, a ``_copy`` node for each head
    that repeats an earlier one (so that every output has its own array)."""
    nodes, counts = graph["nodes"], _output_counts(graph)
    kept = [nid for nid in range(len(nodes)) if target[nid] == nid]
    new_id = {nid: k for k, nid in enumerate(kept)}
    out_nodes, out_counts = [], []
    for nid in kept:
        node = dict(nodes[nid])
        node["inputs"] = [[new_id[target[i]], idx, *rest] for i, idx, *rest in node["inputs"]]
        out_nodes.append(node)
        out_counts.append(counts[nid])
    heads, copies = [], {}
    for i, idx, *rest in graph["heads"]:
        entry = (new_id[target[i]], idx)
        if entry not in copies:
            copies[entry] = 0
            heads.append([entry[0], idx, *rest])
            continue
        name = f"{out_nodes[entry[0]]['name']}_{copies[entry]}_copy"
        copies[entry] += 1
        out_nodes.append({"op": "_copy", "name": name, "inputs": [[entry[0], idx, 0]]})
        out_counts.append(1)
        heads.append([len(out_nodes) - 1, 0, 0])
    row_ptr = [0]
    for c in out_counts:
        row_ptr.append(row_ptr[-1] + c)
    result = dict(graph)
    result.update(nodes=out_nodes, heads=heads, node_row_ptr=row_ptr,
                  arg_nodes=[k for k, n in enumerate(out_nodes) if n["op"] == "null"])
    return result


def eliminate_common_expr(sym: Symbol) -> Symbol:
    """``sym`` with the nodes that apply the same operator, with the same attributes, to
    the same inputs merged into one; ``sym`` itself when there are none. Nodes that draw
    random numbers, keep state or write to their inputs are kept apart."""
    graph = json.loads(sym.handle.to_json())
    target = _merge_targets(graph["nodes"])
    if all(t == nid for nid, t in enumerate(target)):
        return sym
    merged = Symbol(_core.SymbolHandle.from_json(json.dumps(_rebuilt(graph, target))))
    same_inputs = (merged.list_arguments() == sym.list_arguments()
                   and merged.list_auxiliary_states() == sym.list_auxiliary_states())
    return merged if same_inputs else sym

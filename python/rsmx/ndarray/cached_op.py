"""``mx.nd.CachedOp``: a symbol called like an operator on NDArrays.

The graph is read once; each call runs its nodes in order through the imperative
operators, so autograd records every step and gradients reach the inputs.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import MXNetTypeError, MXNetValueError
from .ndarray import NDArray, _op

__all__ = ["CachedOp"]


def _op_attrs(node: dict) -> dict[str, str]:
    """The operator parameters of a node (hidden ``__key__`` attributes left out), with
    a control-flow node's subgraphs."""
    attrs = node.get("attrs") or node.get("attr") or node.get("param") or {}
    params = {k: v for k, v in attrs.items() if not k.startswith("__")}
    if "subgraphs" in node:
        params["__subgraphs__"] = json.dumps(node["subgraphs"])
    return params


class CachedOp:
    """Runs ``sym`` on NDArrays: ``op(*inputs, out=None)`` with one array per entry of
    ``sym.list_inputs()``, in that order; returns the output (a list for several).

    Parameters
    ----------
    sym : Symbol
        The graph.
    flags : sequence of (str, value), optional
        MXNet's executor flags; accepted for compatibility and ignored.
    """

    def __init__(self, sym: Any, flags: Any = ()) -> None:
        graph = json.loads(sym.tojson())
        self._nodes = graph["nodes"]
        self._heads = [(nid, idx) for nid, idx, *_ in graph["heads"]]
        self._input_names = sym.list_inputs()
        self._flags = tuple(flags)

    def _run(self, inputs: dict[str, NDArray]) -> list[NDArray]:
        values: list[list[NDArray]] = []
        for node in self._nodes:
            if node["op"] == "null":
                values.append([inputs[node["name"]]])
                continue
            args = [values[nid][idx] for nid, idx, *_ in node["inputs"]]
            res = _op(node["op"])(*args, **_op_attrs(node))
            values.append(list(res) if isinstance(res, (list, tuple)) else [res])
        return [values[nid][idx] for nid, idx in self._heads]

    def __call__(self, *args: NDArray, out: Any = None, **kwargs: Any) -> Any:
        if kwargs:
            raise MXNetTypeError(f"CachedOp got unexpected keyword arguments {sorted(kwargs)}")
        if len(args) != len(self._input_names):
            raise MXNetValueError(
                f"CachedOp expects {len(self._input_names)} inputs "
                f"({', '.join(self._input_names)}), got {len(args)}"
            )
        for a in args:
            if not isinstance(a, NDArray):
                raise MXNetTypeError("CachedOp inputs must be NDArrays")
        outs = self._run(dict(zip(self._input_names, args, strict=True)))
        if out is not None:
            targets = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(targets) != len(outs):
                raise MXNetValueError(f"CachedOp has {len(outs)} outputs, out has {len(targets)}")
            for src, dst in zip(outs, targets, strict=True):
                src.copyto(dst)
            return out
        return outs[0] if len(outs) == 1 else outs

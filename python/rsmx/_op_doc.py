"""Docstrings of the generated operator functions, from the core's declarations."""

from __future__ import annotations

from . import _core


def op_docstring(name: str, doc: str, inputs: list[str], variadic: bool, params: list[str],
                 input_type: str, extra: str = "") -> str:
    """A numpy-style docstring for operator ``name``: its inputs, then each attribute with
    the type, default and description the core declares (names alone where it declares
    none)."""
    declared = {p[0]: p for p in _core.op_param_docs(name)}
    lines = [doc, "", "Parameters", "----------"]
    for i in inputs:
        lines.append(f"{i} : {input_type}" + (" (any number)" if variadic else ""))
    for p in params:
        if p in declared:
            _, ty, default, pdoc = declared[p]
            kind = "required" if default is None else f"optional, default={default}"
            lines.append(f"{p} : {ty}, {kind}")
            if pdoc:
                lines.append(f"    {pdoc}")
        else:
            lines.append(p)
    if extra:
        lines += ["", extra]
    return "\n".join(lines)

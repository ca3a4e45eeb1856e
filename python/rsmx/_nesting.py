"""Nested lists of arrays or symbols, as the control-flow functions take and return them:
flattened into one list with a layout, and rebuilt from a flat list by that layout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def flatten(args: Any, leaf: type, what: str, leaf_layout: Callable[[Any], int] = lambda _: 0
            ) -> tuple[list[Any], Any]:
    """The leaves (instances of ``leaf``) of a nested list, in order, and its layout: for a
    leaf, ``leaf_layout(leaf)`` (0: one item; n > 0: a list of n), else a list of the
    items' layouts."""
    if isinstance(args, leaf):
        return [args], leaf_layout(args)
    if not isinstance(args, (list, tuple)):
        from .base import MXNetValueError

        raise MXNetValueError(
            f"{what} must be a {leaf.__name__} or a (nested) list of them, but got {args!r} of type "
            f"{type(args).__name__}")
    flat: list[Any] = []
    layout = []
    for item in args:
        items, sub = flatten(item, leaf, what, leaf_layout)
        flat.extend(items)
        layout.append(sub)
    return flat, layout


def regroup(flat: list[Any], layout: Any) -> tuple[Any, list[Any]]:
    """The nesting ``layout`` rebuilt from the front of ``flat``, and what is left."""
    if isinstance(layout, int):
        if layout == 0:
            return flat[0], flat[1:]
        return flat[:layout], flat[layout:]
    out = []
    for sub in layout:
        item, flat = regroup(flat, sub)
        out.append(item)
    return out, flat

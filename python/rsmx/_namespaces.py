"""Operators registered under a prefix, by namespace (``_contrib_quadratic`` is ``contrib.quadratic``)."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

from . import _core

__all__ = ["NAMESPACES", "namespaced_ops", "fill_namespace"]

# The prefixes whose operators get a namespace of their own, as in MXNet.
NAMESPACES = ("contrib", "linalg", "image")

OpEntry = tuple[str, list[str], list[str], bool, list[str], str]


def namespaced_ops(namespace: str) -> Iterator[tuple[str, OpEntry]]:
    """``(short name, registry entry)`` for every name (alias included) of the core's
    operators that starts with ``_<namespace>_``."""
    prefix = f"_{namespace}_"
    for entry in _core.list_ops():
        for n in (entry[0], *entry[1]):
            if n.startswith(prefix) and len(n) > len(prefix):
                yield n[len(prefix):], entry


def fill_namespace(
    module: types.ModuleType, namespace: str, make: Callable[[str, OpEntry], Any]
) -> None:
    """Adds ``make(short_name, entry)`` to ``module`` for each operator of ``namespace``;
    names the module already defines (its Python functions) are kept."""
    public = module.__dict__.setdefault("__all__", [])
    for short, entry in namespaced_ops(namespace):
        if short in module.__dict__:
            continue
        f = make(short, entry)
        f.__module__ = module.__name__
        setattr(module, short, f)
        public.append(short)

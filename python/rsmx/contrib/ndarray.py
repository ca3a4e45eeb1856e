"""``mx.contrib.ndarray``: the ``_contrib_`` operators of NDArrays, under their short names."""

from __future__ import annotations

import sys

from ..ndarray.register import register_namespace

__all__: list[str] = []

register_namespace(sys.modules[__name__], "contrib")

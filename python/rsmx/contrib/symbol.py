"""``mx.contrib.symbol``: the ``_contrib_`` operators of symbols, under their short names."""

from __future__ import annotations

import sys

from ..symbol.register import register_namespace

__all__: list[str] = []

register_namespace(sys.modules[__name__], "contrib")

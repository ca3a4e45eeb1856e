"""``mx.contrib``: the contrib operators as ``mx.contrib.ndarray`` and ``mx.contrib.symbol``."""

from __future__ import annotations

from . import ndarray, symbol
from . import ndarray as nd
from . import symbol as sym

__all__ = ["ndarray", "nd", "symbol", "sym"]

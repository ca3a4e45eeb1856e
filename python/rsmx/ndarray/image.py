"""``mx.nd.image``: the operators registered as ``_image_X``, under the name ``X``."""

from __future__ import annotations

import sys

from .register import register_namespace

__all__: list[str] = []

register_namespace(sys.modules[__name__], "image")

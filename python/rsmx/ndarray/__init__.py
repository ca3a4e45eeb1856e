"""``mx.nd``: NDArray, array creation, operators generated from the core's registry,
random samplers and MXNet-format save/load."""

from __future__ import annotations

import sys
import types

from . import ndarray as _ndarray_module
from .ndarray import *  # noqa: F403
from .ndarray import NDArray
from .register import register_all as _register_all

_internal = types.ModuleType(__name__ + "._internal", "Operators whose names start with '_'.")
op = types.ModuleType(__name__ + ".op", "Every registered operator.")
sys.modules[_internal.__name__] = _internal
sys.modules[op.__name__] = op
_register_all(sys.modules[__name__], _internal, op)

# Python functions with the same names as operators take precedence, as in MXNet.
for _name in _ndarray_module.__all__:
    globals()[_name] = getattr(_ndarray_module, _name)

from . import composed as _composed  # noqa: E402
from . import contrib, image, linalg, random  # noqa: E402
from .cached_op import CachedOp  # noqa: E402
from .dlpack import from_dlpack, from_numpy, to_dlpack_for_read, to_dlpack_for_write  # noqa: E402
from .utils import load, load_frombuffer, save  # noqa: E402

_composed.install(sys.modules[__name__], _internal, op)

__all__ = [
    "NDArray",
    "CachedOp",
    "random",
    "contrib",
    "linalg",
    "image",
    "save",
    "load",
    "load_frombuffer",
    "op",
    "from_dlpack",
    "from_numpy",
    "to_dlpack_for_read",
    "to_dlpack_for_write",
]

"""MXNet's ``mx.util``: the NumPy-shape switch and small helpers.

Under NumPy shape semantics, ``()`` is a scalar's shape and a dimension of 0 is an empty
axis; shape inference then writes an unknown size as -1 and an unknown shape as
``None``. Without them (the default, as in MXNet 1.x), 0 is an unknown size and ``()``
an unknown shape. The switch is per thread, as in MXNet.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from typing import Any

__all__ = [
    "get_gpu_count",
    "getenv",
    "is_np_array",
    "is_np_shape",
    "makedirs",
    "np_shape",
    "set_np_shape",
    "setenv",
    "use_np_shape",
]

_state = threading.local()


def is_np_shape() -> bool:
    """Whether NumPy shape semantics are on in this thread."""
    return getattr(_state, "np_shape", False)


def set_np_shape(active: bool) -> bool:
    """Turns NumPy shape semantics on or off in this thread; returns the previous state."""
    prev = is_np_shape()
    _state.np_shape = bool(active)
    return prev


def is_np_array() -> bool:
    """Whether NumPy array semantics (``mx.np``) are on: never, as rsmx has no ``mx.np``."""
    return False


class _NumpyShapeScope:
    """A ``with`` scope that sets NumPy shape semantics and restores them on exit."""

    def __init__(self, is_np_shape: bool | None) -> None:  # noqa: FBT001
        self._enter_is_np_shape = is_np_shape
        self._prev_is_np_shape: bool | None = None

    def __enter__(self) -> _NumpyShapeScope:
        if self._enter_is_np_shape is not None:
            self._prev_is_np_shape = set_np_shape(self._enter_is_np_shape)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._enter_is_np_shape is not None and self._prev_is_np_shape is not None:
            set_np_shape(self._prev_is_np_shape)


def np_shape(active: bool = True) -> _NumpyShapeScope:  # noqa: FBT001, FBT002
    """A ``with`` scope turning NumPy shape semantics on (or off, with ``active=False``)."""
    return _NumpyShapeScope(active)


def use_np_shape(func: Any) -> Any:
    """Decorates a function, or every method and property of a class, to run under NumPy
    shape semantics."""
    if inspect.isclass(func):
        for name, method in list(vars(func).items()):
            if name.startswith("__") and name not in ("__init__", "__call__"):
                continue
            if isinstance(method, property):
                setattr(func, name, property(use_np_shape(method.fget),
                                             method.fset and use_np_shape(method.fset),
                                             method.fdel, method.__doc__))
            elif isinstance(method, (staticmethod, classmethod)):
                setattr(func, name, type(method)(use_np_shape(method.__func__)))
            elif callable(method):
                setattr(func, name, use_np_shape(method))
        return func
    if not callable(func):
        raise TypeError(f"use_np_shape can only decorate classes and callable objects, "
                        f"got {type(func).__name__}")

    @functools.wraps(func)
    def _with_np_shape(*args: Any, **kwargs: Any) -> Any:
        with np_shape(active=True):
            return func(*args, **kwargs)

    return _with_np_shape


def get_gpu_count() -> int:
    """The number of GPUs visible to rsmx."""
    from .context import num_gpus

    return num_gpus()


def getenv(name: str) -> str | None:
    """The value of environment variable ``name``, or ``None``."""
    return os.environ.get(name)


def setenv(name: str, value: str | None) -> None:
    """Sets (or with ``None`` removes) environment variable ``name``."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def makedirs(d: str) -> None:
    """Creates directory ``d`` and its parents; an existing one is fine."""
    os.makedirs(os.path.expanduser(d), exist_ok=True)

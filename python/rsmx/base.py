"""Exception classes and small helpers shared by the whole package."""

from __future__ import annotations

import numbers
import os
from typing import Any

import numpy as np

__all__ = [
    "MXNetError",
    "MXNetValueError",
    "MXNetTypeError",
    "MXNetIndexError",
    "MXNetNotImplementedError",
    "MXNetMemoryError",
    "NotImplementedForSymbol",
    "numeric_types",
    "integer_types",
    "string_types",
    "mx_real_t",
    "data_dir",
    "data_dir_default",
]


class MXNetError(RuntimeError):
    """The error rsmx raises for anything that went wrong in the core.

    Besides the message it says where the failure happened, where that is known:
    ``op`` and ``node`` (the operator and, inside a bound graph, its node),
    ``cuda_call`` and ``cuda_code`` (a CUDA call that failed), ``peer`` (the process
    a distributed KVStore failed to reach). The others are ``None``.
    """

    op: str | None = None
    node: str | None = None
    cuda_call: str | None = None
    cuda_code: int | None = None
    peer: str | None = None


class MXNetValueError(MXNetError, ValueError):
    """A bad value: wrong shape, malformed attribute, corrupt file."""


class MXNetTypeError(MXNetError, TypeError):
    """A wrong type: unsupported dtype, wrong kind of argument."""


class MXNetIndexError(MXNetError, IndexError):
    """An index or axis out of range."""


class MXNetNotImplementedError(MXNetError, NotImplementedError):
    """A feature that is not available, such as a GPU in a build without GPU support."""


class MXNetMemoryError(MXNetError, MemoryError):
    """An allocation that could not be satisfied."""


class NotImplementedForSymbol(MXNetError, NotImplementedError):
    """A function of NDArrays that a Symbol does not have, such as a truth value."""

    def __init__(self, function: Any, alias: str | None, *args: Any) -> None:
        super().__init__()
        self.function = getattr(function, "__name__", str(function))
        self.alias = alias
        self.args = [str(type(a)) for a in args]

    def __str__(self) -> str:
        msg = f"Function {self.function}"
        if self.alias:
            msg += f' (namely operator "{self.alias}")'
        if self.args:
            msg += f" with arguments ({', '.join(self.args)})"
        return msg + " is not implemented for Symbol and only available in NDArray."


numeric_types = (float, int, np.generic, numbers.Number)
integer_types = (int, np.integer)
string_types = (str,)


class _NullType:
    """Marks an argument that was not given (MXNet's ``_Null``)."""

    def __repr__(self) -> str:
        return "_Null"

    def __bool__(self) -> bool:
        return False


_Null = _NullType()


def py_str(x: bytes | str) -> str:
    """Decodes bytes to str."""
    return x.decode("utf-8") if isinstance(x, bytes) else x


# The default element type of arrays.
mx_real_t = np.float32


def data_dir_default() -> str:
    """Where downloaded data and models go unless ``MXNET_HOME`` says otherwise."""
    return os.path.join(os.path.expanduser("~"), ".mxnet")


def data_dir() -> str:
    """Where downloaded data and models go: ``MXNET_HOME``, or ``~/.mxnet``."""
    return os.getenv("MXNET_HOME", data_dir_default())


def _as_list(obj: Any) -> Any:
    """``obj`` itself if it is a list or tuple, else ``[obj]``."""
    if isinstance(obj, (list, tuple)):
        return obj
    return [obj]

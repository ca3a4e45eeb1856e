"""Saving arrays to and loading them from MXNet's binary files."""

from __future__ import annotations

import os
import struct
import tempfile
from typing import Any

from .. import _core
from ..base import MXNetTypeError, MXNetValueError
from .ndarray import NDArray

__all__ = ["save", "load", "load_frombuffer"]


def save(fname: str | os.PathLike, data: Any) -> None:
    """Saves an NDArray, a list of NDArrays or a dict of str to NDArray to ``fname``, in
    MXNet's format (the files MXNet 1.x reads with ``mx.nd.load``)."""
    if isinstance(data, NDArray):
        arrays, names = [data], []
    elif isinstance(data, dict):
        names, arrays = [], []
        for k, v in data.items():
            if not isinstance(k, str):
                raise MXNetTypeError(f"save: dict keys must be str, got {type(k).__name__}")
            if not isinstance(v, NDArray):
                raise MXNetTypeError(f"save: value of '{k}' is a {type(v).__name__}, not an NDArray")
            names.append(k)
            arrays.append(v)
    elif isinstance(data, (list, tuple)) and not isinstance(data, str):
        arrays, names = list(data), []
        for i, v in enumerate(arrays):
            if not isinstance(v, NDArray):
                raise MXNetTypeError(f"save: item {i} is a {type(v).__name__}, not an NDArray")
    else:
        raise MXNetTypeError(
            f"save: data must be an NDArray, a list of NDArrays or a dict of str to NDArray, "
            f"got {type(data).__name__}"
        )
    _core.save(os.fspath(fname), arrays, names)


def _result(arrays: list, names: list, gpus: list) -> Any:
    """Arrays saved from a GPU go back to it where this machine has that GPU (as MXNet
    does); the rest stay on cpu(0)."""
    if any(g is not None for g in gpus):
        from ..context import gpu, num_gpus

        n = num_gpus()
        arrays = [
            a if g is None or g >= n else a.as_in_context(gpu(g))
            for a, g in zip(arrays, gpus, strict=True)
        ]
    if names:
        return dict(zip(names, arrays, strict=True))
    return arrays


def load(fname: str | os.PathLike) -> Any:
    """Loads what ``save`` (or MXNet's ``mx.nd.save``) wrote: a list, or a dict if the file
    has names."""
    if not isinstance(fname, (str, os.PathLike)):
        raise MXNetTypeError(f"load: fname must be a path, got {type(fname).__name__}")
    return _result(*_core.load(os.fspath(fname)))


def load_frombuffer(buf: bytes) -> Any:
    """Loads arrays from the bytes of a file in MXNet's format."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise MXNetTypeError(f"load_frombuffer: buf must be bytes, got {type(buf).__name__}")
    return _result(*_core.load_from_bytes(bytes(buf)))


# A file of arrays: magic 0x112, a reserved word and the count (uint64s) before the
# arrays; the count of names (uint64) after them.
_LIST_HEAD = struct.Struct("<QQQ")
_NAME_COUNT = struct.Struct("<Q")


def to_raw_bytes(a: NDArray) -> bytes:
    """One array in MXNet's single-array format (``MXNDArraySaveRawBytes``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "array.nd")
        _core.save(path, [a], [])
        with open(path, "rb") as f:
            data = f.read()
    return data[_LIST_HEAD.size : len(data) - _NAME_COUNT.size]


def from_raw_bytes(raw: bytes) -> NDArray:
    """The array ``to_raw_bytes`` (or MXNet's ``MXNDArraySaveRawBytes``) wrote; one
    saved from a GPU this machine lacks comes back on the CPU."""
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise MXNetTypeError(f"raw array bytes must be bytes, got {type(raw).__name__}")
    buf = _LIST_HEAD.pack(0x112, 0, 1) + bytes(raw) + _NAME_COUNT.pack(0)
    arrays = load_frombuffer(buf)
    if len(arrays) != 1:
        raise MXNetValueError("raw array bytes hold no single array")
    return arrays[0]

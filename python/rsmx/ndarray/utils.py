"""Saving arrays to and loading them from MXNet's binary files."""

from __future__ import annotations

import io
import math
import os
import struct
import tempfile
from collections.abc import Iterator
from typing import Any, BinaryIO

from .. import _core
from ..base import MXNetError, MXNetTypeError, MXNetValueError
from ..util import is_np_shape
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
    if is_np_shape():
        _mark_np_shape(os.fspath(fname))


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
    has names. Arrays saved under NumPy shape semantics load only under them, and the
    others only without them, as in MXNet."""
    if not isinstance(fname, (str, os.PathLike)):
        raise MXNetTypeError(f"load: fname must be a path, got {type(fname).__name__}")
    path = os.fspath(fname)
    if os.path.isfile(path):  # else the core says what is wrong with the path
        with open(path, "rb") as f:
            _check_shape_semantics(f)
    return _result(*_core.load(path))


def load_frombuffer(buf: bytes) -> Any:
    """Loads arrays from the bytes of a file in MXNet's format (see ``load``)."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise MXNetTypeError(f"load_frombuffer: buf must be bytes, got {type(buf).__name__}")
    _check_shape_semantics(io.BytesIO(bytes(buf)))
    return _load_bytes(bytes(buf))


def _load_bytes(buf: bytes) -> Any:
    return _result(*_core.load_from_bytes(buf))


# Each array of a file starts with one of these: saved without or with NumPy shape
# semantics. Other values mark MXNet's older formats.
_V2_MAGIC = 0xF993FAC9
_V3_MAGIC = 0xF993FACA
_ITEM_SIZES = {0: 4, 1: 8, 2: 2, 3: 1, 4: 4, 5: 1, 6: 8, 7: 1, 12: 2}


def _array_magics(f: BinaryIO) -> Iterator[tuple[int, int]]:
    """``(offset, magic)`` of each dense array of a file of arrays, read from ``f``
    (positioned at its start); stops at the first array it cannot step over, leaving
    damaged files to the core's reader."""
    try:
        yield from _walk_arrays(f)
    except (struct.error, OSError, ValueError, OverflowError, MemoryError):
        return


def _walk_arrays(f: BinaryIO) -> Iterator[tuple[int, int]]:
    head = f.read(_LIST_HEAD.size)
    if len(head) < _LIST_HEAD.size:
        return
    magic, _, count = _LIST_HEAD.unpack(head)
    if magic != 0x112:
        return
    for _ in range(count):
        offset = f.tell()
        word = f.read(8)
        if len(word) < 8:
            return
        magic, stype = struct.unpack("<Ii", word)
        yield offset, magic
        if magic not in (_V2_MAGIC, _V3_MAGIC) or stype != 0 or not _skip_dense(f):
            return


def _skip_dense(f: BinaryIO) -> bool:
    """Steps ``f`` over the rest of a dense array (after magic and storage type), the
    data of a 0-d one included, as rsmx writes it."""
    raw = f.read(4)
    if len(raw) < 4:
        return False
    (ndim,) = struct.unpack("<i", raw)
    if ndim > 32:
        return False
    dims = struct.unpack(f"<{max(ndim, 0)}q", f.read(8 * max(ndim, 0)))
    if ndim < 0 or any(d < 0 for d in dims):
        return True
    raw = f.read(12)
    if len(raw) < 12:
        return False
    _, _, flag = struct.unpack("<iii", raw)
    if flag not in _ITEM_SIZES:
        return False
    f.seek(_ITEM_SIZES[flag] * math.prod(dims), io.SEEK_CUR)
    return True


def _check_shape_semantics(f: BinaryIO) -> None:
    """``MXNetError`` unless every array of the file in ``f`` was saved under the shape
    semantics now in force."""
    np_shape = is_np_shape()
    for _, magic in _array_magics(f):
        if magic == _V3_MAGIC and not np_shape:
            raise MXNetError(
                "ndarray was saved in np shape semantics, must be loaded in the same "
                "semantics. Please turn on np shape semantics in Python using "
                "`with np_shape(True)` or decorator `use_np_shape` to scope the code of "
                "loading the ndarray."
            )
        if magic == _V2_MAGIC and np_shape:
            raise MXNetError(
                "ndarray was not saved in np shape semantics, but being loaded in np shape "
                "semantics. Please turn off np shape semantics in Python using "
                "`with np_shape(False)` to scope the code of loading the ndarray."
            )


def _mark_np_shape(path: str) -> None:
    """Marks each array of the file at ``path`` as saved under NumPy shape semantics."""
    with open(path, "r+b") as f:
        offsets = [offset for offset, magic in _array_magics(f) if magic == _V2_MAGIC]
        for offset in offsets:
            f.seek(offset)
            f.write(struct.pack("<I", _V3_MAGIC))


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
    arrays = _load_bytes(buf)
    if len(arrays) != 1:
        raise MXNetValueError("raw array bytes hold no single array")
    return arrays[0]

"""``mx.recordio``: MXNet's RecordIO files (the dmlc format its ``.rec`` datasets use),
read and written sequentially or through an index, and the image-record header.

A record is stored as the magic word ``0xced7230a``, a word holding a 3-bit flag and a
29-bit length, the bytes, and zero padding to a multiple of 4 (all little-endian). Where
the record's own bytes hold the magic word at a 4-byte boundary, the record is split
there into parts (flags 1, 2, 3) and the reader joins them back, magic included."""

from __future__ import annotations

import numbers
import os
import struct
from collections import namedtuple
from multiprocessing import current_process
from typing import Any

import numpy as np

from .base import MXNetError

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img", "unpack_img"]

_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_MAX_LEN = 1 << 29
# Flags of a record's parts: whole, first, middle, last.
_WHOLE, _FIRST, _MIDDLE, _LAST = 0, 1, 2, 3


def _head(flag: int, length: int) -> bytes:
    return _MAGIC_BYTES + struct.pack("<I", (flag << 29) | length)


def _encode(buf: bytes) -> bytes:
    """A record's bytes on disk."""
    if len(buf) >= _MAX_LEN:
        raise MXNetError(f"MXRecordIO: a record must be under 2^29 bytes, got {len(buf)}")
    out, start = [], 0
    for i in range(0, len(buf) - len(buf) % 4, 4):
        if buf[i : i + 4] == _MAGIC_BYTES:
            out += [_head(_FIRST if start == 0 else _MIDDLE, i - start), buf[start:i]]
            start = i + 4
    out += [_head(_LAST if start else _WHOLE, len(buf) - start), buf[start:], b"\0" * (-len(buf) % 4)]
    return b"".join(out)


class MXRecordIO:
    """Reads (``flag='r'``) or writes (``'w'``) a RecordIO file record by record.

    Parameters
    ----------
    uri : str
        Path of the record file.
    flag : str
        ``'r'`` or ``'w'``.
    """

    def __init__(self, uri: str, flag: str):
        self.uri = str(uri)
        self.flag = flag
        self.pid: int | None = None
        self.is_open = False
        self._file: Any = None
        self.open()

    def open(self) -> None:
        """Opens the file: for writing, truncated to empty."""
        if self.flag not in ("r", "w"):
            raise ValueError(f"Invalid flag {self.flag}")
        try:
            self._file = open(self.uri, "wb" if self.flag == "w" else "rb")
        except OSError as e:
            raise MXNetError(f"MXRecordIO: cannot open '{self.uri}': {e.strerror or e}") from e
        self.writable = self.flag == "w"
        self.pid = current_process().pid
        self.is_open = True

    def __del__(self) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        was_open = self.is_open
        self.close()
        state.update(is_open=was_open, _file=None, pid=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__ = dict(state)
        was_open, self.is_open = self.is_open, False
        if was_open:
            self.open()

    def _check_pid(self, allow_reset: bool = False) -> None:
        if self.pid != current_process().pid:
            if not allow_reset:
                raise RuntimeError("Forbidden operation in multiple processes")
            self.reset()

    def close(self) -> None:
        """Closes the file."""
        if not getattr(self, "is_open", False):
            return
        self._file.close()
        self._file = None
        self.is_open = False
        self.pid = None

    def reset(self) -> None:
        """Goes back to the first record (for writing: truncates the file)."""
        self.close()
        self.open()

    def write(self, buf: bytes) -> None:
        """Appends ``buf`` as a record."""
        if not self.writable:
            raise MXNetError(f"MXRecordIO: '{self.uri}' is open for reading")
        self._check_pid()
        self._file.write(_encode(bytes(buf)))

    def read(self) -> bytes | None:
        """The next record, or None at the end of the file."""
        if self.writable:
            raise MXNetError(f"MXRecordIO: '{self.uri}' is open for writing")
        self._check_pid()
        parts: list[bytes] = []
        while True:
            where = self._file.tell()
            head = self._file.read(8)
            if not head and not parts:
                return None
            if len(head) != 8:
                raise MXNetError(f"MXRecordIO: '{self.uri}' ends inside a record at byte {where}")
            magic, lrec = struct.unpack("<II", head)
            if magic != _MAGIC:
                raise MXNetError(f"MXRecordIO: '{self.uri}' is not a RecordIO file (bad magic at byte {where})")
            flag, length = lrec >> 29, lrec & (_MAX_LEN - 1)
            body = self._file.read(length + (-length % 4))
            if len(body) < length:
                raise MXNetError(f"MXRecordIO: '{self.uri}' ends inside a record at byte {where}")
            parts.append(body[:length])
            if flag in (_WHOLE, _LAST):
                return _MAGIC_BYTES.join(parts)


class MXIndexedRecordIO(MXRecordIO):
    """A RecordIO file with an index file of ``key\\tposition`` lines, for random access.

    Parameters
    ----------
    idx_path : str
        Path of the index file.
    uri : str
        Path of the record file.
    flag : str
        ``'r'`` or ``'w'``.
    key_type : type
        The type of the keys (``int`` by default).
    """

    def __init__(self, idx_path: str, uri: str, flag: str, key_type: type = int):
        self.idx_path = idx_path
        self.idx: dict = {}
        self.keys: list = []
        self.key_type = key_type
        self.fidx: Any = None
        super().__init__(uri, flag)

    def open(self) -> None:
        super().open()
        self.idx, self.keys = {}, []
        self.fidx = open(self.idx_path, self.flag)
        if not self.writable:
            for n, line in enumerate(self.fidx, 1):
                fields = line.strip().split("\t")
                if len(fields) < 2:
                    raise MXNetError(f"MXIndexedRecordIO: line {n} of '{self.idx_path}' is not 'key<TAB>position'")
                key = self.key_type(fields[0])
                self.idx[key] = int(fields[1])
                self.keys.append(key)

    def close(self) -> None:
        if not getattr(self, "is_open", False):
            return
        super().close()
        self.fidx.close()

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["fidx"] = None
        return state

    def seek(self, idx: Any) -> None:
        """Moves the reader to the record of key ``idx``."""
        if self.writable:
            raise MXNetError(f"MXIndexedRecordIO: '{self.uri}' is open for writing")
        self._check_pid(allow_reset=True)
        if idx not in self.idx:
            raise KeyError(idx)
        self._file.seek(self.idx[idx], os.SEEK_SET)

    def tell(self) -> int:
        """Where the next record will be written."""
        if not self.writable:
            raise MXNetError(f"MXIndexedRecordIO: '{self.uri}' is open for reading")
        return self._file.tell()

    def read_idx(self, idx: Any) -> bytes | None:
        """The record of key ``idx``."""
        self.seek(idx)
        return self.read()

    def write_idx(self, idx: Any, buf: bytes) -> None:
        """Appends ``buf`` as the record of key ``idx``."""
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        self.fidx.write(f"{key}\t{pos}\n")
        self.idx[key] = pos
        self.keys.append(key)


IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
"""The header of an image record: ``flag`` (the label count when the label is an
array), ``label`` (a number or an array of float32), ``id`` and ``id2``."""

_IR_FORMAT = "IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def pack(header: Any, s: bytes) -> bytes:
    """An image record: the header, then (for an array label) the labels as float32,
    then ``s``."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + s
    return struct.pack(_IR_FORMAT, *header) + s


def unpack(s: bytes) -> tuple[Any, bytes]:
    """The header and the payload of an image record (an array label when ``flag`` > 0)."""
    if len(s) < _IR_SIZE:
        raise MXNetError(f"unpack: a record of {len(s)} bytes is shorter than the {_IR_SIZE}-byte header")
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[header.flag * 4 :]
    return header, s


def _cv2() -> Any:
    try:
        import cv2  # noqa: PLC0415 - optional, as in MXNet
    except ImportError as e:
        raise MXNetError("pack_img and unpack_img need OpenCV (pip install opencv-python)") from e
    return cv2


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[Any, np.ndarray]:
    """The header and the decoded image of an image record (needs OpenCV)."""
    header, s = unpack(s)
    return header, _cv2().imdecode(np.frombuffer(s, dtype=np.uint8), iscolor)


def pack_img(header: Any, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """An image record of ``img`` encoded as JPEG or PNG (needs OpenCV)."""
    cv2 = _cv2()
    fmt = img_fmt.upper()
    if fmt in (".JPG", ".JPEG"):
        params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    elif fmt == ".PNG":
        params = [cv2.IMWRITE_PNG_COMPRESSION, quality]
    else:
        raise MXNetError(f"pack_img: img_fmt must be .jpg, .jpeg or .png, got {img_fmt!r}")
    ok, buf = cv2.imencode(img_fmt, img, params)
    if not ok:
        raise MXNetError(f"pack_img: OpenCV could not encode the image as {img_fmt}")
    return pack(header, buf.tobytes())

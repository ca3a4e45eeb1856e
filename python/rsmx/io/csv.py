"""``mx.io.CSVIter``: batches of rows of CSV files, with MXNet's handling of the last,
partial batch."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .. import ndarray as nd
from ..base import MXNetError
from .io import DataBatch, DataDesc, DataIter

_DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64}


def _read_rows(path: str, width: int, dtype: Any, what: str) -> np.ndarray:
    """Every row of a CSV file, or of each file of a directory in name order, as
    ``(rows, width)``."""
    if os.path.isdir(path):
        files = [os.path.join(path, f) for f in sorted(os.listdir(path)) if not f.startswith(".")]
    elif os.path.exists(path):
        files = [path]
    else:
        raise MXNetError(f"CSVIter: {what} '{path}' does not exist")
    parts = []
    for f in files:
        try:
            rows = np.loadtxt(f, delimiter=",", dtype=np.float64, ndmin=2)
        except ValueError as e:
            raise MXNetError(f"CSVIter: {what} '{f}' is not a CSV file of numbers: {e}") from e
        if rows.size and rows.shape[1] != width:
            raise MXNetError(f"CSVIter: rows of {what} '{f}' have {rows.shape[1]} values; the shape asks for {width}")
        parts.append(rows.reshape(-1, width))
    return np.concatenate(parts).astype(dtype) if parts else np.zeros((0, width), dtype)


class CSVIter(DataIter):
    """Batches of CSV rows, each row reshaped to ``data_shape`` (and ``label_shape``).

    With ``round_batch`` (the default) the last batch of an epoch is completed from the
    first rows, counted in ``pad``, and the next epoch starts after the rows so used; a
    ``reset`` in between does not go back to the first row. Without it, every epoch
    starts at the first row and the unfilled end of the last batch keeps the previous
    batch's rows (also counted in ``pad``). Without ``label_csv`` the labels are zeros.

    Parameters
    ----------
    data_csv : str
        A CSV file, or a directory whose files are read in name order.
    data_shape : tuple
        The shape of one example.
    label_csv : str, optional
    label_shape : tuple, optional
        ``(1,)`` by default, giving labels of shape ``(batch_size,)``.
    batch_size : int
    round_batch : bool
    dtype : str
        ``float32`` (default), ``int32`` or ``int64``.
    """

    def __init__(
        self,
        data_csv: str,
        data_shape: Any,
        label_csv: str | None = None,
        label_shape: Any = (1,),
        batch_size: int = 1,
        round_batch: bool = True,
        dtype: str | None = None,
        data_name: str = "data",
        label_name: str = "softmax_label",
        **prefetch: Any,
    ) -> None:
        batch_size = int(batch_size)
        if batch_size < 1:
            raise MXNetError(f"CSVIter: batch_size must be at least 1, got {batch_size}")
        name = "float32" if dtype is None else str(np.dtype(dtype))
        if name not in _DTYPES:
            raise MXNetError(f"CSVIter: dtype must be float32, int32 or int64, got {dtype!r}")
        super().__init__(batch_size)
        self._dtype = _DTYPES[name]
        self._data_shape = tuple(int(d) for d in data_shape)
        self._label_shape = tuple(int(d) for d in label_shape)
        self._data = _read_rows(data_csv, int(np.prod(self._data_shape)), self._dtype, "data_csv")
        if label_csv is None or label_csv == "NULL":
            self._label = np.zeros((len(self._data), int(np.prod(self._label_shape))), self._dtype)
        else:
            self._label = _read_rows(label_csv, int(np.prod(self._label_shape)), self._dtype, "label_csv")
            if len(self._label) != len(self._data):
                raise MXNetError(f"CSVIter: {len(self._data)} rows in '{data_csv}' but {len(self._label)} in '{label_csv}'")
        self._round = bool(round_batch)
        self._names = (data_name, label_name)
        self._data_buf = np.zeros((batch_size, self._data.shape[1]), self._dtype)
        self._label_buf = np.zeros((batch_size, self._label.shape[1]), self._dtype)
        self._cursor = 0
        self._carry = 0
        self._pad = 0

    def _batch_shapes(self) -> tuple[tuple, tuple]:
        label = (self.batch_size,) if self._label_shape == (1,) else (self.batch_size, *self._label_shape)
        return (self.batch_size, *self._data_shape), label

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(self._names[0], self._batch_shapes()[0], self._dtype)]

    @property
    def provide_label(self) -> list[DataDesc]:
        return [DataDesc(self._names[1], self._batch_shapes()[1], self._dtype)]

    def reset(self) -> None:
        self._cursor = self._carry if self._round else 0
        self._carry = 0

    def iter_next(self) -> bool:
        n = len(self._data)
        if self._cursor >= n:
            return False
        take = min(self.batch_size, n - self._cursor)
        rows = slice(self._cursor, self._cursor + take)
        self._data_buf[:take], self._label_buf[:take] = self._data[rows], self._label[rows]
        self._pad = self.batch_size - take
        self._cursor += take
        if self._pad and self._round:
            fill = np.arange(self._pad) % n
            self._data_buf[take:], self._label_buf[take:] = self._data[fill], self._label[fill]
            self._carry = self._pad % n
        return True

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self._pad, index=None)

    def getdata(self) -> Any:
        """The current batch's data (one NDArray, as MXNet's native iterators give)."""
        return nd.array(self._data_buf.reshape(self._batch_shapes()[0]), dtype=self._dtype)

    def getlabel(self) -> Any:
        """The current batch's labels (one NDArray)."""
        return nd.array(self._label_buf.reshape(self._batch_shapes()[1]), dtype=self._dtype)

    def getpad(self) -> int:
        return self._pad

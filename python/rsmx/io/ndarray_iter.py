"""``NDArrayIter``: batches from in-memory NDArrays or numpy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetValueError
from ..ndarray import NDArray, concat, tile
from .io import DataBatch, DataDesc, DataIter
from .utils import _getdata_by_idx, _init_data, _slice_along_batch_axis

__all__ = ["NDArrayIter"]

_LAST_BATCH_HANDLES = ("pad", "discard", "roll_over")


class NDArrayIter(DataIter):
    """Iterates over arrays held in memory, ``batch_size`` examples at a time.

    Parameters
    ----------
    data : array, list of arrays or dict of str to array
        The inputs (NDArrays or numpy arrays; numpy arrays are copied into float32
        NDArrays). Examples run along axis 0. A single array is named ``data_name``, a list
        of several ``_0_<data_name>``, ``_1_<data_name>``, ...; the inputs are ordered by name.
    label : array, list of arrays or dict of str to array, optional
        The labels, named like ``data`` after ``label_name``.
    batch_size : int, optional
        Examples per batch.
    shuffle : bool, optional
        Whether to reorder the examples (with ``numpy.random``) at every reset.
    last_batch_handle : {'pad', 'discard', 'roll_over'}, optional
        What to do with the examples left over when ``batch_size`` does not divide their
        number: ``'pad'`` fills the last batch with examples from the start and reports
        how many in ``DataBatch.pad``; ``'discard'`` drops them; ``'roll_over'`` keeps them
        for the first batch of the next epoch.
    data_name : str, optional
        The name of a single data array.
    label_name : str, optional
        The name of a single label array.
    layout : str, optional
        The layout reported in ``provide_data``; its ``'N'`` is the batch axis.
    """

    def __init__(
        self,
        data: Any,
        label: Any = None,
        batch_size: int = 1,
        shuffle: bool = False,
        last_batch_handle: str = "pad",
        data_name: str = "data",
        label_name: str = "softmax_label",
        layout: str = "NCHW",
    ) -> None:
        super().__init__(batch_size)
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise MXNetValueError(f"NDArrayIter: batch_size must be a positive int, got {batch_size!r}")
        if last_batch_handle not in _LAST_BATCH_HANDLES:
            raise MXNetValueError(
                f"NDArrayIter: last_batch_handle must be one of {_LAST_BATCH_HANDLES}, "
                f"got {last_batch_handle!r}"
            )
        self.data = _init_data(data, allow_empty=False, default_name=data_name)
        self.label = _init_data(label, allow_empty=True, default_name=label_name)
        self._check_lengths()
        self.idx = np.arange(self.data[0][1].shape[0])
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = int(batch_size)
        self.cursor = -self.batch_size
        self.num_data = self.idx.shape[0]
        self.layout = layout
        self.reset()
        self.data_list = [x[1] for x in self.data] + [x[1] for x in self.label]
        self.num_source = len(self.data_list)
        # The short last batch of an epoch, kept for the next one under 'roll_over'.
        self._cache_data: list[NDArray] | None = None
        self._cache_label: list[NDArray] | None = None

    def _check_lengths(self) -> None:
        arrays = self.data + self.label
        for name, arr in arrays:
            if len(arr.shape) == 0:
                raise MXNetValueError(f"NDArrayIter: '{name}' is a scalar; it needs an example axis")
        first_name, first = arrays[0]
        for name, arr in arrays[1:]:
            if arr.shape[0] != first.shape[0]:
                raise MXNetValueError(
                    f"NDArrayIter: '{name}' has {arr.shape[0]} examples but '{first_name}' has "
                    f"{first.shape[0]}; all data and labels need the same number (axis 0)"
                )

    @property
    def _batch_axis(self) -> int:
        return self.layout.find("N")

    def _descs(self, arrays: list[tuple[str, NDArray]]) -> list[DataDesc]:
        axis = self._batch_axis
        return [
            DataDesc(
                k,
                tuple(list(v.shape[:axis]) + [self.batch_size] + list(v.shape[axis + 1 :])),
                v.dtype,
                layout=self.layout,
            )
            for k, v in arrays
        ]

    @property
    def provide_data(self) -> list[DataDesc]:
        """Names, batch shapes and dtypes of the data."""
        return self._descs(self.data)

    @property
    def provide_label(self) -> list[DataDesc]:
        """Names, batch shapes and dtypes of the labels."""
        return self._descs(self.label)

    def hard_reset(self) -> None:
        """Goes back to the beginning, dropping examples kept for ``'roll_over'``."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self) -> None:
        """Goes back to the beginning (reshuffling when ``shuffle``). Under ``'roll_over'``,
        the next epoch starts with the examples left over from this one."""
        if self.shuffle:
            self._shuffle_data()
        leftover = self.num_data - self.batch_size < self.cursor < self.num_data
        if self.last_batch_handle == "roll_over" and leftover:
            # A negative cursor: -cursor - batch_size examples are cached from the last epoch.
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self) -> bool:
        """Moves the cursor to the next batch; whether it starts inside the data."""
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        """The next full batch; a short last batch ends the epoch (and is kept for the next
        one under ``'roll_over'``)."""
        if not self.iter_next():
            raise StopIteration
        data = self.getdata()
        label = self.getlabel()
        if data[0].shape[self._batch_axis] != self.batch_size:
            self._cache_data = data
            self._cache_label = label
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _getdata(self, data_source: list, start: int | None = None, end: int | None = None) -> list[NDArray]:
        if start is None and end is None:
            raise MXNetValueError("NDArrayIter: a slice needs a start or an end")
        start = 0 if start is None else start
        if end is None:
            end = data_source[0][1].shape[0] if data_source else 0
        s = slice(start, end)
        return [_slice_along_batch_axis(arr, s, self._batch_axis) for _, arr in data_source]

    def _concat(self, first: list[NDArray], second: list[NDArray]) -> list[NDArray]:
        if not first or not second:
            return first if first else second
        return [concat(a, b, dim=self._batch_axis) for a, b in zip(first, second, strict=True)]

    @staticmethod
    def _tile(data: list[NDArray], repeats: int) -> list[NDArray]:
        out = []
        for arr in data:
            reps = [1] * len(arr.shape)
            reps[0] = repeats
            out.append(tile(arr, reps=tuple(reps)))
        return out

    def _batchify(self, data_source: list) -> list[NDArray]:
        if self.cursor >= self.num_data:
            raise MXNetValueError("NDArrayIter: the epoch has ended; call reset()")
        bs, n = self.batch_size, self.num_data
        if self.last_batch_handle == "roll_over" and -bs < self.cursor < 0:
            # First batch of an epoch: the cached leftovers, then the first new examples.
            cache = self._cache_data if self._cache_data is not None else self._cache_label
            if cache is None:
                raise MXNetValueError("NDArrayIter: no examples were kept from the last epoch")
            second = self._getdata(data_source, end=self.cursor + bs)
            if self._cache_data is not None:
                self._cache_data = None
            else:
                self._cache_label = None
            return self._concat(cache, second)
        if self.last_batch_handle == "pad" and self.cursor + bs > n:
            pad = bs - n + self.cursor
            first = self._getdata(data_source, start=self.cursor)
            if pad > n:
                second = self._tile(self._getdata(data_source, end=n), pad // n)
                if pad % n != 0:
                    second = self._concat(second, self._getdata(data_source, end=pad % n))
            else:
                second = self._getdata(data_source, end=pad)
            return self._concat(first, second)
        end = min(self.cursor + bs, n)
        return self._getdata(data_source, self.cursor, end)

    def getdata(self) -> list[NDArray]:
        """The data arrays of the current batch."""
        return self._batchify(self.data)

    def getlabel(self) -> list[NDArray]:
        """The label arrays of the current batch."""
        return self._batchify(self.label)

    def getpad(self) -> int:
        """How many examples of the current batch are padding (or, for the first batch
        under ``'roll_over'``, how many came from the previous epoch)."""
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0

    def _shuffle_data(self) -> None:
        # The permutation composes with the previous epochs' ones, as in MXNet 1.x.
        np.random.shuffle(self.idx)
        self.data = _getdata_by_idx(self.data, self.idx)
        self.label = _getdata_by_idx(self.label, self.idx)

"""Data descriptions, batches and the base data iterators: ``DataDesc``, ``DataBatch``,
``DataIter``, ``ResizeIter`` and ``PrefetchingIter``."""

from __future__ import annotations

import threading
from collections import namedtuple
from typing import Any

import numpy as np

from ..base import MXNetTypeError, MXNetValueError

__all__ = ["DataDesc", "DataBatch", "DataIter", "ResizeIter", "PrefetchingIter"]


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """The name, shape, dtype and layout of one data or label input.

    It is a ``(name, shape)`` tuple with ``dtype`` and ``layout`` as extra attributes, so it
    can be used wherever a ``(name, shape)`` pair is expected.

    Parameters
    ----------
    name : str
        The input's name.
    shape : tuple of int
        The input's shape, batch axis included.
    dtype : numpy dtype, optional
        The element type, float32 by default.
    layout : str, optional
        What each axis means, one letter per axis; ``'N'`` marks the batch axis.
    """

    def __new__(cls, name: str, shape: Any, dtype: Any = np.float32, layout: str = "NCHW") -> DataDesc:
        ret = super().__new__(cls, name, shape)
        ret.dtype = dtype
        ret.layout = layout
        return ret

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        """The batch axis of a layout.

        Parameters
        ----------
        layout : str or None
            A layout such as ``'NCHW'``; ``None`` means axis 0.

        Returns
        -------
        int
            The position of ``'N'`` in ``layout``, or -1 when there is none (the whole
            array goes to every device).
        """
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes: Any, types: Any) -> list[DataDesc]:
        """``DataDesc`` objects from ``(name, shape)`` pairs and optional ``(name, dtype)`` pairs.

        Parameters
        ----------
        shapes : iterable of (str, tuple)
            Names and shapes.
        types : iterable of (str, dtype), or None
            Names and dtypes; every name in ``shapes`` must appear here when given.

        Returns
        -------
        list of DataDesc
        """
        if types is None:
            return [DataDesc(x[0], x[1]) for x in shapes]
        type_dict = dict(types)
        missing = [x[0] for x in shapes if x[0] not in type_dict]
        if missing:
            raise MXNetValueError(f"DataDesc.get_list: no dtype given for {missing}")
        return [DataDesc(x[0], x[1], type_dict[x[0]]) for x in shapes]


class DataBatch:
    """One batch from a data iterator.

    Parameters
    ----------
    data : list of NDArray
        The data arrays, each holding ``batch_size`` examples.
    label : list of NDArray, optional
        The label arrays.
    pad : int, optional
        How many examples at the end of the batch are padding (repeats of earlier examples
        that fill the last batch of an epoch).
    index : numpy.ndarray, optional
        The indices of the examples in the batch.
    bucket_key : int, optional
        The bucket this batch belongs to, for bucketing modules.
    provide_data : list of DataDesc, optional
        Descriptions of ``data``.
    provide_label : list of DataDesc, optional
        Descriptions of ``label``.
    """

    def __init__(
        self,
        data: list | tuple | None,
        label: list | tuple | None = None,
        pad: int | None = None,
        index: Any = None,
        bucket_key: Any = None,
        provide_data: list | None = None,
        provide_label: list | None = None,
    ) -> None:
        if data is not None and not isinstance(data, (list, tuple)):
            raise MXNetTypeError(f"DataBatch: data must be a list of NDArrays, got {type(data).__name__}")
        if label is not None and not isinstance(label, (list, tuple)):
            raise MXNetTypeError(
                f"DataBatch: label must be a list of NDArrays, got {type(label).__name__}"
            )
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self) -> str:
        data_shapes = [d.shape for d in self.data]
        label_shapes = [lab.shape for lab in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data_shapes} label shapes: {label_shapes}"


class DataIter:
    """The base of all data iterators.

    ``next()`` (and Python iteration) returns a ``DataBatch`` until the epoch ends, then
    raises ``StopIteration``; ``reset()`` starts the next epoch. Subclasses implement
    ``iter_next`` and the ``get*`` accessors, or override ``next`` directly.

    Parameters
    ----------
    batch_size : int, optional
        The number of examples in a batch.
    """

    def __init__(self, batch_size: int = 0) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> DataIter:
        return self

    def reset(self) -> None:
        """Goes back to the beginning of the data."""

    def next(self) -> DataBatch:
        """The next batch.

        Returns
        -------
        DataBatch

        Raises
        ------
        StopIteration
            When the epoch has no more batches.
        """
        if self.iter_next():
            return DataBatch(
                data=self.getdata(), label=self.getlabel(), pad=self.getpad(), index=self.getindex()
            )
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        """Moves to the next batch; whether there was one."""
        return False

    def getdata(self) -> Any:
        """The data arrays of the current batch."""
        return None

    def getlabel(self) -> Any:
        """The label arrays of the current batch."""
        return None

    def getindex(self) -> Any:
        """The indices of the current batch's examples, or ``None``."""
        return None

    def getpad(self) -> Any:
        """How many examples of the current batch are padding."""
        return None


class ResizeIter(DataIter):
    """Makes an epoch of another iterator exactly ``size`` batches long, restarting the
    inner iterator when it runs out and stopping early when it has more.

    Parameters
    ----------
    data_iter : DataIter
        The inner iterator.
    size : int
        Batches per epoch.
    reset_internal : bool, optional
        Whether ``reset`` also resets the inner iterator.
    """

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True) -> None:
        super().__init__()
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch: DataBatch | None = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True

    def getdata(self) -> Any:
        return self.current_batch.data

    def getlabel(self) -> Any:
        return self.current_batch.label

    def getindex(self) -> Any:
        return self.current_batch.index

    def getpad(self) -> Any:
        return self.current_batch.pad


class _PrefetchState:
    """What the prefetching threads share with their iterator. The threads hold only
    this, not the iterator, so an unused ``PrefetchingIter`` can be collected and its
    threads told to finish."""

    def __init__(self, iters: list[DataIter]) -> None:
        n = len(iters)
        self.iters = iters
        self.running = True
        self.data_ready = [threading.Event() for _ in range(n)]
        self.data_taken = [threading.Event() for _ in range(n)]
        self.next_batch: list[DataBatch | None] = [None] * n
        self.errors: list[BaseException | None] = [None] * n
        for ev in self.data_taken:
            ev.set()

    def fetch(self, i: int) -> None:
        """Thread body: fetch a batch of iterator ``i`` each time the last one was taken."""
        while True:
            self.data_taken[i].wait()
            if not self.running:
                break
            try:
                self.next_batch[i] = self.iters[i].next()
            except StopIteration:
                self.next_batch[i] = None
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                self.next_batch[i] = None
                self.errors[i] = e
            self.data_taken[i].clear()
            self.data_ready[i].set()


class PrefetchingIter(DataIter):
    """Reads the next batch of one or several iterators in background threads while the
    current one is used. With several iterators, a batch joins their data and labels in
    order.

    Parameters
    ----------
    iters : DataIter or list of DataIter
        The iterators to read ahead; they must give the same number of batches.
    rename_data : list of dict, optional
        One ``{old_name: new_name}`` map per iterator, for the names in its ``provide_data``.
    rename_label : list of dict, optional
        The same for ``provide_label``.
    """

    def __init__(
        self,
        iters: DataIter | list[DataIter],
        rename_data: list[dict] | None = None,
        rename_label: list[dict] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(iters, list):
            iters = [iters]
        if not iters:
            raise MXNetValueError("PrefetchingIter: no iterators given")
        for name, rename in (("rename_data", rename_data), ("rename_label", rename_label)):
            if rename is not None and len(rename) != len(iters):
                raise MXNetValueError(
                    f"PrefetchingIter: {name} has {len(rename)} maps for {len(iters)} iterators"
                )
        self.n_iter = len(iters)
        self.iters = iters
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch: DataBatch | None = None
        self._state = _PrefetchState(iters)
        self.prefetch_threads = [
            threading.Thread(target=self._state.fetch, args=(i,), daemon=True)
            for i in range(self.n_iter)
        ]
        for thread in self.prefetch_threads:
            thread.start()

    @property
    def data_ready(self) -> list[threading.Event]:
        """One event per iterator, set when its next batch is ready."""
        return self._state.data_ready

    @property
    def data_taken(self) -> list[threading.Event]:
        """One event per iterator, set when its thread may fetch the next batch."""
        return self._state.data_taken

    @property
    def next_batch(self) -> list[DataBatch | None]:
        """The batches read ahead, ``None`` where an iterator has ended."""
        return self._state.next_batch

    def close(self) -> None:
        """Stops the prefetching threads (they also stop when the iterator is collected)."""
        state = getattr(self, "_state", None)
        if state is None or not state.running:
            return
        state.running = False
        for ev in state.data_taken:
            ev.set()
        for thread in self.prefetch_threads:
            if thread is not threading.current_thread():
                thread.join()

    def __del__(self) -> None:
        self.close()

    @staticmethod
    def _renamed(descs: list, renames: list[dict] | None, what: str) -> list:
        if renames is None:
            return sum((list(descs_i) for descs_i in descs), [])
        out = []
        for rename, descs_i in zip(renames, descs, strict=True):
            for x in descs_i:
                x = x if isinstance(x, DataDesc) else DataDesc(*x)
                if x.name not in rename:
                    raise MXNetValueError(
                        f"PrefetchingIter: rename_{what} has no new name for '{x.name}'"
                    )
                out.append(DataDesc(rename[x.name], x.shape, x.dtype))
        return out

    @property
    def provide_data(self) -> list:
        """The data descriptions of all iterators, in order, renamed."""
        return self._renamed([i.provide_data for i in self.iters], self.rename_data, "data")

    @property
    def provide_label(self) -> list:
        """The label descriptions of all iterators, in order, renamed."""
        return self._renamed(
            [i.provide_label for i in self.iters], self.rename_label, "label"
        )

    def reset(self) -> None:
        state = self._state
        for ev in state.data_ready:
            ev.wait()
        for it in self.iters:
            it.reset()
        for ev in state.data_ready:
            ev.clear()
        for ev in state.data_taken:
            ev.set()

    def iter_next(self) -> bool:
        state = self._state
        for ev in state.data_ready:
            ev.wait()
        for i, err in enumerate(state.errors):
            if err is not None:
                state.errors[i] = None
                state.data_ready[i].clear()
                state.data_taken[i].set()
                raise err
        batches = state.next_batch
        if batches[0] is None:
            if any(b is not None for b in batches):
                raise MXNetValueError("PrefetchingIter: the iterators give different numbers of batches")
            return False
        if any(b is None for b in batches):
            raise MXNetValueError("PrefetchingIter: the iterators give different numbers of batches")
        if any(b.pad != batches[0].pad for b in batches):
            raise MXNetValueError("PrefetchingIter: the iterators' batches have different padding")
        self.current_batch = DataBatch(
            sum((list(b.data) for b in batches), []),
            sum((list(b.label or []) for b in batches), []),
            batches[0].pad,
            batches[0].index,
            provide_data=self.provide_data,
            provide_label=self.provide_label,
        )
        for ev in state.data_ready:
            ev.clear()
        for ev in state.data_taken:
            ev.set()
        return True

    def next(self) -> DataBatch:
        if self.iter_next():
            return self.current_batch
        raise StopIteration

    def getdata(self) -> Any:
        return self.current_batch.data

    def getlabel(self) -> Any:
        return self.current_batch.label

    def getindex(self) -> Any:
        return self.current_batch.index

    def getpad(self) -> Any:
        return self.current_batch.pad

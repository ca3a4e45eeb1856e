"""``mx.io``: data descriptions, batches, and data iterators over in-memory arrays, CSV files
and the MNIST files."""

from __future__ import annotations

from . import io, utils
from .csv import CSVIter
from .io import DataBatch, DataDesc, DataIter, PrefetchingIter, ResizeIter
from .mnist import MNISTIter
from .ndarray_iter import NDArrayIter
from .utils import _getdata_by_idx, _has_instance, _init_data

__all__ = [
    "io",
    "utils",
    "DataDesc",
    "DataBatch",
    "DataIter",
    "NDArrayIter",
    "MNISTIter",
    "CSVIter",
    "ResizeIter",
    "PrefetchingIter",
    "_init_data",
    "_has_instance",
    "_getdata_by_idx",
]

"""``mx.io.MNISTIter``: batches of the MNIST idx files (plain or gzip), as MXNet's
iterator gives them, and the readers of those files."""

from __future__ import annotations

import gzip
import logging
import struct
from typing import Any

import numpy as np

from .. import ndarray as nd
from ..base import MXNetError
from .io import DataBatch, DataDesc, DataIter

_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049


def _open(path: str) -> Any:
    try:
        return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except OSError as e:
        raise MXNetError(f"MNISTIter: cannot open '{path}': {e.strerror or e}") from e


def _header(f: Any, path: str, words: int, magic: int, kind: str) -> tuple[int, ...]:
    head = f.read(4 * words)
    if len(head) != 4 * words:
        raise MXNetError(f"MNISTIter: '{path}' is too short for an MNIST {kind} file")
    values = struct.unpack(">" + "I" * words, head)
    if values[0] != magic:
        raise MXNetError(f"MNISTIter: '{path}' is not an MNIST {kind} file (magic {values[0]}, expected {magic})")
    return values[1:]


def read_mnist_images(path: str) -> np.ndarray:
    """The images of an idx3 file as uint8 ``(count, rows, cols)``."""
    with _open(path) as f:
        count, rows, cols = _header(f, path, 4, _IMAGES_MAGIC, "image")
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if data.size < count * rows * cols:
        raise MXNetError(f"MNISTIter: '{path}' holds {data.size} pixels, fewer than {count} images of {rows}x{cols}")
    return data[: count * rows * cols].reshape(count, rows, cols)


def read_mnist_labels(path: str) -> np.ndarray:
    """The labels of an idx1 file as uint8."""
    with _open(path) as f:
        (count,) = _header(f, path, 2, _LABELS_MAGIC, "label")
        labels = np.frombuffer(f.read(), dtype=np.uint8)
    if labels.size < count:
        raise MXNetError(f"MNISTIter: '{path}' holds {labels.size} labels, fewer than its header's {count}")
    return labels[:count]


class MNISTIter(DataIter):
    """Batches of MNIST from its idx files.

    Images are scaled by 1/256 into ``(batch, 1, rows, cols)``, or ``(batch, rows *
    cols)`` with ``flat``; labels are float32 ``(batch,)``. The examples are shuffled once
    (with ``seed``) when ``shuffle``; only whole batches are given. ``num_parts`` and
    ``part_index`` read one contiguous part of the files, for data-parallel workers.

    Parameters
    ----------
    image, label : str
        Paths of the idx3 image file and the idx1 label file (``.gz`` read as gzip).
    batch_size : int
    shuffle : bool
    flat : bool
    seed : int
    silent : bool
        Unless set, logs how many images were loaded.
    num_parts, part_index : int
    """

    def __init__(
        self,
        image: str = "./train-images-idx3-ubyte",
        label: str = "./train-labels-idx1-ubyte",
        batch_size: int = 128,
        shuffle: bool = True,
        flat: bool = False,
        seed: int = 0,
        silent: bool = False,
        num_parts: int = 1,
        part_index: int = 0,
        data_name: str = "data",
        label_name: str = "softmax_label",
        **prefetch: Any,
    ) -> None:
        batch_size, num_parts, part_index = int(batch_size), int(num_parts), int(part_index)
        if batch_size < 1:
            raise MXNetError(f"MNISTIter: batch_size must be at least 1, got {batch_size}")
        if num_parts < 1 or not 0 <= part_index < num_parts:
            raise MXNetError(f"MNISTIter: part_index {part_index} is not within num_parts {num_parts}")
        super().__init__(batch_size)
        images, labels = read_mnist_images(image), read_mnist_labels(label)

        def part(n: int) -> slice:
            return slice(int(n / num_parts * part_index), int(n / num_parts * (part_index + 1)))

        images, labels = images[part(len(images))], labels[part(len(labels))]
        if len(images) != len(labels):
            raise MXNetError(f"MNISTIter: {len(images)} images in '{image}' but {len(labels)} labels in '{label}'")
        if shuffle:
            order = np.random.RandomState(seed).permutation(len(images))
            images, labels = images[order], labels[order]
        rows, cols = images.shape[1:]
        self._images = images.astype(np.float32) * np.float32(1.0 / 256.0)
        self._images = self._images.reshape(len(images), rows * cols) if flat else self._images.reshape(len(images), 1, rows, cols)
        self._labels = labels.astype(np.float32)
        self._cursor = 0
        self._data_name, self._label_name = data_name, label_name
        if not silent:
            logging.info("MNISTIter: load %d images, shuffle=%d, shape=%s", len(images), int(bool(shuffle)), (batch_size, *self._images.shape[1:]))

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(self._data_name, (self.batch_size, *self._images.shape[1:]), np.float32)]

    @property
    def provide_label(self) -> list[DataDesc]:
        return [DataDesc(self._label_name, (self.batch_size,), np.float32)]

    def reset(self) -> None:
        self._cursor = 0

    def iter_next(self) -> bool:
        if self._cursor + self.batch_size > len(self._labels):
            return False
        self._cursor += self.batch_size
        return True

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=0, index=self.getindex())

    def _window(self) -> slice:
        return slice(self._cursor - self.batch_size, self._cursor)

    def getdata(self) -> Any:
        """The current batch's images (one NDArray, as MXNet's native iterators give)."""
        return nd.array(self._images[self._window()])

    def getlabel(self) -> Any:
        """The current batch's labels (one NDArray)."""
        return nd.array(self._labels[self._window()])

    def getindex(self) -> np.ndarray:
        return np.zeros(self.batch_size, dtype=np.uint64)

    def getpad(self) -> int:
        return 0

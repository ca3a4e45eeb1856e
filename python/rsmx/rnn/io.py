"""Data for recurrent language models: ``encode_sentences`` turns token lists into
integer ids, and ``BucketSentenceIter`` serves them in batches of equal length (buckets),
each label sequence being the data shifted by one step.

Both behave as MXNet 1.9.1's: the same vocabulary ids, the same buckets, and, given the
same seeds of Python's ``random`` and NumPy's global generator, the same batches.
"""

from __future__ import annotations

import bisect
import random
from typing import Any

import numpy as np

from .. import ndarray
from ..base import MXNetValueError
from ..io import DataBatch, DataDesc, DataIter
from .rnn_cell import RNNUsageError

__all__ = ["encode_sentences", "BucketSentenceIter"]


def encode_sentences(
    sentences: list,
    vocab: dict | None = None,
    invalid_label: int = -1,
    invalid_key: str = "\n",
    start_label: int = 0,
    unknown_token: str | None = None,
) -> tuple[list, dict]:
    """Encodes sentences of tokens as lists of ids, growing the vocabulary as needed.

    Parameters
    ----------
    sentences : list of list of str
        The sentences, each a list of tokens.
    vocab : dict of str to int, optional
        The vocabulary to start from. When None, a new one is built, holding
        ``invalid_key`` as ``invalid_label``; when given, a token not in it is an error
        unless ``unknown_token`` is set.
    invalid_label : int, optional
        The id of ``invalid_key``; never given to another token.
    invalid_key : str, optional
        The token that marks the end of a sentence in a new vocabulary.
    start_label : int, optional
        The first id given to a new token.
    unknown_token : str, optional
        When set, each token not in the vocabulary is encoded as this token, which is
        (re)assigned the next free id, as in MXNet.

    Returns
    -------
    result : list of list of int
        The encoded sentences.
    vocab : dict of str to int
        The vocabulary (``vocab`` itself when given, grown in place).
    """
    new_vocab = vocab is None
    if new_vocab:
        vocab = {invalid_key: invalid_label}
    next_id = start_label
    encoded = []
    for sentence in sentences:
        ids = []
        for word in sentence:
            if word not in vocab:
                if not (new_vocab or unknown_token):
                    raise RNNUsageError(f"Unknown token {word!r}: it is not in the vocabulary and no unknown_token is set")
                if next_id == invalid_label:
                    next_id += 1
                if unknown_token:
                    word = unknown_token
                vocab[word] = next_id
                next_id += 1
            ids.append(vocab[word])
        encoded.append(ids)
    return encoded, vocab


class BucketSentenceIter(DataIter):
    """Batches of encoded sentences, padded to the length of their bucket.

    A sentence goes to the smallest bucket at least as long as itself and is padded
    with ``invalid_label``; longer sentences than the largest bucket are dropped. The
    label of each batch is its data shifted one step to the left, ending with
    ``invalid_label``. Each ``reset()`` shuffles the batches and the sentences in each
    bucket (Python's ``random`` and NumPy's global generator). ``default_bucket_key``
    is the largest bucket, which ``provide_data``/``provide_label`` describe.

    Parameters
    ----------
    sentences : list of list of int
        The encoded sentences.
    batch_size : int
        Sentences per batch. A bucket's sentences that do not fill a batch are unused.
    buckets : list of int, optional
        The bucket lengths (sorted in place). By default every sentence length that at
        least ``batch_size`` sentences have.
    invalid_label : int, optional
        The padding id, also the label after a sentence's last token.
    data_name, label_name : str, optional
        The names of the data and label inputs.
    dtype : str, optional
        The element type of the batches, ``'float32'`` by default.
    layout : str, optional
        ``'NT'`` for ``(batch_size, length)`` batches, ``'TN'`` for ``(length, batch_size)``.
    """

    def __init__(
        self,
        sentences: list,
        batch_size: int,
        buckets: list | None = None,
        invalid_label: int = -1,
        data_name: str = "data",
        label_name: str = "softmax_label",
        dtype: Any = "float32",
        layout: str = "NT",
    ) -> None:
        super().__init__()
        if not buckets:
            counts = np.bincount([len(s) for s in sentences])
            buckets = [length for length, n in enumerate(counts) if n >= batch_size]
        buckets.sort()

        per_bucket: list[list] = [[] for _ in buckets]
        ndiscard = 0
        for sentence in sentences:
            b = bisect.bisect_left(buckets, len(sentence))
            if b == len(buckets):
                ndiscard += 1
                continue
            row = np.full((buckets[b],), invalid_label, dtype=dtype)
            row[: len(sentence)] = sentence
            per_bucket[b].append(row)
        # Buckets no sentence went to are dropped.
        self.buckets = [length for length, rows in zip(buckets, per_bucket, strict=True) if rows]
        self.data = [np.asarray(rows, dtype=dtype) for rows in per_bucket if rows]
        print(f"WARNING: discarded {ndiscard} sentences longer than the largest bucket.")
        if not self.buckets:
            raise MXNetValueError("BucketSentenceIter: no sentence fits in any bucket")

        self.batch_size = batch_size
        self.data_name = data_name
        self.label_name = label_name
        self.dtype = dtype
        self.invalid_label = invalid_label
        self.nddata: list = []
        self.ndlabel: list = []
        self.major_axis = layout.find("N")
        self.layout = layout
        self.default_bucket_key = max(self.buckets)

        if self.major_axis not in (0, 1):
            raise MXNetValueError(f"Invalid layout {layout!r}: must be NT (batch major) or TN (time major)")
        shape = (batch_size, self.default_bucket_key)
        if self.major_axis == 1:
            shape = shape[::-1]
        self.provide_data = [DataDesc(name=data_name, shape=shape, layout=layout)]
        self.provide_label = [DataDesc(name=label_name, shape=shape, layout=layout)]

        self.idx = [
            (b, start)
            for b, rows in enumerate(self.data)
            for start in range(0, len(rows) - batch_size + 1, batch_size)
        ]
        self.curr_idx = 0
        self.reset()

    def reset(self) -> None:
        """Starts a new epoch: shuffles the batch order and each bucket's sentences."""
        self.curr_idx = 0
        random.shuffle(self.idx)
        for rows in self.data:
            np.random.shuffle(rows)
        self.nddata = []
        self.ndlabel = []
        for rows in self.data:
            label = np.empty_like(rows)
            label[:, :-1] = rows[:, 1:]
            label[:, -1] = self.invalid_label
            self.nddata.append(ndarray.array(rows, dtype=self.dtype))
            self.ndlabel.append(ndarray.array(label, dtype=self.dtype))

    def next(self) -> DataBatch:
        """The next batch, with its ``bucket_key`` and its own ``provide_data``/``provide_label``."""
        if self.curr_idx == len(self.idx):
            raise StopIteration
        b, start = self.idx[self.curr_idx]
        self.curr_idx += 1
        data = self.nddata[b][start : start + self.batch_size]
        label = self.ndlabel[b][start : start + self.batch_size]
        if self.major_axis == 1:
            data, label = data.T, label.T
        return DataBatch(
            [data],
            [label],
            pad=0,
            bucket_key=self.buckets[b],
            provide_data=[DataDesc(name=self.data_name, shape=data.shape, layout=self.layout)],
            provide_label=[DataDesc(name=self.label_name, shape=label.shape, layout=self.layout)],
        )

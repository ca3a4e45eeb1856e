"""Progress reporting for ``BaseModule.fit``: a tqdm bar with the running metric and the
speed, when tqdm is installed and standard error is a terminal. Otherwise nothing: the
log then holds only what MXNet's ``fit`` and the user's callbacks write, which is what
log parsers expect."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

__all__ = ["Progress"]

def _tqdm():
    """tqdm's bar class, when a bar can be shown: tqdm installed, stderr a terminal."""
    if not getattr(sys.stderr, "isatty", lambda: False)():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def _num_batches(data: Any) -> int | None:
    """How many batches an epoch of ``data`` has, when the iterator tells."""
    for attr in ("num_batches", "num_batch"):
        n = getattr(data, attr, None)
        if isinstance(n, int) and n > 0:
            return n
    num_data = getattr(data, "num_data", None)
    batch_size = getattr(data, "batch_size", None)
    if isinstance(num_data, int) and isinstance(batch_size, int) and batch_size > 0:
        handle = getattr(data, "last_batch_handle", "pad")
        if handle == "discard":
            return num_data // batch_size
        if handle == "pad":
            return math.ceil(num_data / batch_size)
    return None


def _batch_size(batch: Any) -> int:
    if isinstance(batch, list):
        return sum(_batch_size(b) for b in batch)
    data = getattr(batch, "data", None)
    if data:
        shape = getattr(data[0], "shape", ())
        if shape:
            return int(shape[0])
    return 0


def _metric_text(eval_metric: Any) -> dict[str, str]:
    try:
        pairs = eval_metric.get_name_value()
    except Exception:  # noqa: BLE001 - a metric without values yet shows nothing
        return {}
    return {str(name): f"{value:.4g}" if isinstance(value, float) else str(value)
            for name, value in pairs}


class Progress:
    """Reports one training epoch's progress.

    Parameters
    ----------
    logger : Logger
        The module's logger.
    epoch : int
        The epoch number shown.
    data : DataIter
        The training data, asked for its number of batches.
    """

    def __init__(self, logger: Any, epoch: int, data: Any):
        self.logger = logger
        self.epoch = epoch
        self.nbatch = 0
        self.samples = 0
        self.start = time.time()
        tqdm = _tqdm()
        self.bar = None
        if tqdm is not None:
            self.bar = tqdm(total=_num_batches(data), desc=f"Epoch {epoch}", unit="batch",
                            leave=False)

    def update(self, batch: Any, eval_metric: Any) -> None:
        """Counts one more batch and shows the running metric and speed on the bar."""
        if self.bar is None:
            return
        self.nbatch += 1
        self.samples += _batch_size(batch)
        speed = self.samples / max(time.time() - self.start, 1e-9)
        postfix = _metric_text(eval_metric)
        postfix["samples/s"] = f"{speed:.1f}"
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        """Ends the bar, if there is one."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

"""The dependency engine: its type, the global wait and the bulk-execution scope."""

from __future__ import annotations

import threading
from types import TracebackType

from . import _core

__all__ = ["engine_type", "waitall", "set_bulk_size", "bulk"]

_bulk = threading.local()


def engine_type() -> str:
    """The running engine's type: ``ThreadedEnginePerDevice``, ``ThreadedEngine`` or
    ``NaiveEngine`` (chosen by ``RSMX_ENGINE_TYPE`` or ``MXNET_ENGINE_TYPE``)."""
    return _core.engine_type()


def waitall() -> None:
    """Blocks until all pushed work is done; raises the first error an op raised."""
    _core.waitall()


def set_bulk_size(size: int) -> int:
    """Sets this thread's limit on how many operators run as one bulk; returns the
    previous limit (0 at first).

    Bulking only changes how pushed operators are scheduled, never their results; rsmx's
    engine schedules each operator on its own, so the limit is kept for the API alone.
    """
    prev = getattr(_bulk, "size", 0)
    _bulk.size = int(size)
    return prev


class _BulkScope:
    """Sets the bulk size on entry and restores the previous one on exit."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._old_size: int | None = None

    def __enter__(self) -> _BulkScope:
        self._old_size = set_bulk_size(self._size)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        set_bulk_size(self._old_size or 0)


def bulk(size: int) -> _BulkScope:
    """A scope (``with mx.engine.bulk(10): ...``) in which up to ``size`` operators may
    run as one bulk."""
    return _BulkScope(size)

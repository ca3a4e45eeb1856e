"""The dependency engine: its type and the global wait."""

from __future__ import annotations

from . import _core

__all__ = ["engine_type", "waitall"]


def engine_type() -> str:
    """The running engine's type: ``ThreadedEnginePerDevice``, ``ThreadedEngine`` or
    ``NaiveEngine`` (chosen by ``RSMX_ENGINE_TYPE`` or ``MXNET_ENGINE_TYPE``)."""
    return _core.engine_type()


def waitall() -> None:
    """Blocks until all pushed work is done; raises the first error an op raised."""
    _core.waitall()

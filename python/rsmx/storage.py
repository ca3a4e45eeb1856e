"""Counters and control of the per-device memory pools."""

from __future__ import annotations

from . import _core
from .context import Context, current_context

__all__ = ["stats", "release_all"]


def stats(ctx: Context | None = None) -> dict[str, int]:
    """Byte counters of the memory pool of ``ctx`` (default: the current context).

    Returns a dict with ``bytes_in_use``, ``bytes_pooled``, ``peak_bytes_in_use``,
    ``pool_hits`` and ``system_allocs``.
    """
    ctx = ctx or current_context()
    return _core.storage_stats(*ctx._pair)


def release_all(ctx: Context | None = None) -> None:
    """Gives the pooled free memory of ``ctx`` back to the system."""
    ctx = ctx or current_context()
    _core.storage_release_all(*ctx._pair)

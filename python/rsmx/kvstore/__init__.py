"""Key-value stores that synchronise parameters across devices (``mx.kv``)."""

from __future__ import annotations

from .base import KVStoreBase, create
from .kvstore import KVStore

__all__ = ["KVStore", "KVStoreBase", "create"]

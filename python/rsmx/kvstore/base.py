"""The store interface, its registry of Python-defined stores, and ``create``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base import MXNetTypeError

__all__ = ["KVStoreBase", "create"]


class KVStoreBase:
    """The interface every key-value store offers for data-parallel training.

    Subclasses registered with :meth:`register` can be created by name with
    :func:`create`, before the built-in store types are looked up.
    """

    kv_registry: dict[str, Callable[[], KVStoreBase]] = {}

    OPTIMIZER = "optimizer"

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """Stores ``value`` under ``key`` and copies it into ``out``."""
        raise NotImplementedError()

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Pushes ``value`` and pulls the updated value into ``out`` (``value`` if None)."""
        raise NotImplementedError()

    def set_optimizer(self, optimizer: Any) -> None:
        """Makes ``optimizer`` update the stored values on each push."""
        raise NotImplementedError()

    @staticmethod
    def is_capable(capability: str) -> bool:
        """Whether the store can do ``capability`` (such as ``'optimizer'``)."""
        raise NotImplementedError()

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Saves the optimizer's state (and the optimizer, if asked) to ``fname``."""
        raise NotImplementedError()

    def load_optimizer_states(self, fname: str) -> None:
        """Loads the optimizer's state from ``fname``."""
        raise NotImplementedError()

    @property
    def type(self) -> str:
        """The store's type name."""
        raise NotImplementedError()

    @property
    def rank(self) -> int:
        """This worker's rank, in ``[0, num_workers)``."""
        raise NotImplementedError()

    @property
    def num_workers(self) -> int:
        """How many workers share the store."""
        raise NotImplementedError()

    @staticmethod
    def register(klass: type) -> type:
        """Registers a store class under its lower-cased name, for :func:`create`."""
        name = klass.__name__.lower()
        KVStoreBase.kv_registry[name] = klass
        return klass


def create(name: str = "local") -> KVStoreBase:
    """Creates a key-value store.

    Parameters
    ----------
    name : str
        ``'local'`` sums on the host (also ``'local_allreduce_cpu'``,
        ``'local_update_cpu'``); ``'device'`` sums on the devices the values come from,
        spreading keys over them (also ``'local_allreduce_device'``); ``'dist_sync'``,
        ``'dist_device_sync'`` (or ``'dist_sync_device'``) and ``'dist_async'``: a
        worker's store of the cluster the launcher's ``DMLC_*`` variables describe (see
        :mod:`rsmx.launch`); or the name of a registered :class:`KVStoreBase` subclass.

    Returns
    -------
    KVStoreBase
        The new store.
    """
    if not isinstance(name, str):
        raise MXNetTypeError(f"kvstore name must be a string, got {type(name).__name__}")
    name = name.lower()
    if name in KVStoreBase.kv_registry:
        return KVStoreBase.kv_registry[name]()
    from .dist import DistKVStore, is_dist_type
    from .kvstore import KVStore

    if is_dist_type(name):
        return DistKVStore(name)
    return KVStore(name)

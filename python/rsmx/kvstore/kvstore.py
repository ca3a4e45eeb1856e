"""``KVStore``: MXNet's local and device stores, backed by the core's store."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from .. import _core
from ..base import MXNetError, MXNetTypeError, MXNetValueError
from ..ndarray import NDArray
from .base import KVStoreBase
from .fused import FusedUpdater, fused_optimizer

__all__ = ["KVStore"]


def _flatten(key: Any, value: Any, what: str) -> tuple[list[Any], list[list[NDArray]]]:
    """Normalises MXNet's key/value forms to one list of keys and one list of arrays
    per key: a key with an array, a key with a list (one per device), or lists of those."""
    if isinstance(key, (list, tuple)):
        if isinstance(value, NDArray) or not isinstance(value, (list, tuple)):
            raise MXNetValueError(f"KVStore: a list of {len(key)} keys needs a list of {what}s")
        if len(key) != len(value):
            raise MXNetValueError(f"KVStore: {len(key)} key(s) but {len(value)} {what}(s)")
        keys: list[Any] = []
        vals: list[list[NDArray]] = []
        for k, v in zip(key, value, strict=True):
            ks, vs = _flatten(k, v, what)
            keys += ks
            vals += vs
        if len({isinstance(k, str) for k in keys}) > 1:
            raise MXNetTypeError("KVStore: inconsistent types of keys: mix of int and str")
        return keys, vals
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise MXNetTypeError(f"KVStore: a key must be an int or a str, got {type(key).__name__}")
    if isinstance(value, NDArray):
        return [key], [[value]]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, NDArray) for v in value):
        return [key], [list(value)]
    raise MXNetTypeError(
        f"KVStore: the {what} for key {key!r} must be an NDArray or a non-empty list of NDArrays"
    )


def _priorities(priority: Any, n: int) -> list[int]:
    """One priority per key: ``priority`` for every key, or (rsmx's extension) a list of
    one per key, such as ``-index`` for each parameter of a batched update."""
    if isinstance(priority, (list, tuple)):
        if len(priority) != n:
            raise MXNetValueError(f"KVStore: {n} key(s) but {len(priority)} priorities")
        return [int(p) for p in priority]
    return [int(priority)] * n


@KVStoreBase.register
class TestStore(KVStoreBase):
    """A store that only sums and copies, for testing the interface (MXNet's ``teststore``)."""

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        out = out if isinstance(out, (list, tuple)) else [out]
        for o in out:
            o[:] = value

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        ctx = value[0].context if isinstance(value, (list, tuple)) else value.context
        if isinstance(value, (list, tuple)):
            total = value[0].copyto(ctx)
            for v in value[1:]:
                total += v.as_in_context(ctx)
        else:
            total = value
        targets = value if out is None else out
        for o in targets if isinstance(targets, (list, tuple)) else [targets]:
            o[:] = total

    @staticmethod
    def is_capable(capability: str) -> bool:
        if capability.lower() == KVStoreBase.OPTIMIZER:
            return False
        raise MXNetValueError(f"Unknown capability: {capability}")

    @property
    def type(self) -> str:
        return "teststore"

    @property
    def rank(self) -> int:
        return 0

    @property
    def num_workers(self) -> int:
        return 1


class KVStore(KVStoreBase):
    """A key-value store for parameters on one machine.

    Values pushed to a key from several devices are summed, then applied to the stored
    value by the updater: assignment by default, a Python function set with
    :meth:`_set_updater`, or an optimizer set with :meth:`set_optimizer`. Pulls copy the
    stored value to every device. All work is pushed to the engine; calls return at once.
    """

    def __init__(self, name: str = "local") -> None:
        self._handle = _core.KVStoreHandle(name)
        # The Python function applying pushes (None: the core applies them).
        self._push_updater: Callable[[Any, NDArray, NDArray], None] | None = None
        # What saves and loads optimizer states: the Python updater, or the built-in one.
        self._state_keeper: Any = None
        # Whether this store's keys are strs (set by the first call that names keys).
        self._key_is_str: bool | None = None

    # -- values -----------------------------------------------------------------------

    def init(self, key: Any, value: Any) -> None:
        """Stores the initial value of each key; every key must be new.

        Parameters
        ----------
        key : int, str, or list of int or str
            The keys.
        value : NDArray or list of NDArray
            One value per key.
        """
        keys, firsts = self._init_values(key, value)
        self._check_key_type(keys)
        self._handle.init(keys, firsts)

    def _check_key_type(self, keys: list[Any]) -> None:
        """Keys are all ints or all strs over the store's life, as MXNet requires."""
        if not keys:
            return
        kind = isinstance(keys[0], str)
        if self._key_is_str is None:
            self._key_is_str = kind
        if kind != self._key_is_str:
            have = "str" if self._key_is_str else "int"
            raise MXNetTypeError(
                f"KVStore: Mixed key types are not allowed: this store's keys are {have}s; "
                "use int keys or str keys, not both"
            )

    @staticmethod
    def _init_values(key: Any, value: Any) -> tuple[list[Any], list[NDArray]]:
        """The keys and their one initial value each."""
        keys, vals = _flatten(key, value, "value")
        firsts = []
        for k, v in zip(keys, vals, strict=True):
            if len(v) != 1:
                raise MXNetValueError(f"KVStore.init: key {k!r} needs exactly one value, got {len(v)}")
            firsts.append(v[0])
        return keys, firsts

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Pushes values; those pushed to one key (one per device) are summed first.

        Parameters
        ----------
        key : int, str, or list of int or str
            The keys.
        value : NDArray, list of NDArray, or list of list of NDArray
            One value per key, or per key a list with one value per device.
        priority : int or list of int
            Work with higher priority is likely to run first (a list: one per key).
        """
        keys, vals = _flatten(key, value, "value")
        self._check_key_type(keys)
        prios = _priorities(priority, len(keys))
        if self._push_updater is None:
            self._handle.push(keys, vals, prios)
            return
        for k, merged, stored in self._handle.reduce_for_updater(keys, vals, prios):
            self._push_updater(k, merged, stored)

    def pull(self, key: Any, out: Any = None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copies the stored value of each key into the given arrays.

        Parameters
        ----------
        key : int, str, or list of int or str
            The keys.
        out : NDArray, list of NDArray, or list of list of NDArray
            Where to copy: per key an array, or a list of arrays (one per device).
        priority : int
            Work with higher priority is likely to run first.
        """
        if out is None:
            raise MXNetValueError("KVStore.pull: out is required")
        keys, outs = _flatten(key, out, "output")
        self._check_key_type(keys)
        self._handle.pull(keys, outs, _priorities(priority, len(keys)))

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Pushes ``value`` and pulls the updated value into ``out`` (``value`` if None)."""
        if self._push_updater is not None:
            self.push(key, value, priority)
            self.pull(key, value if out is None else out, priority)
            return
        keys, vals = _flatten(key, value, "value")
        self._check_key_type(keys)
        _, outs = _flatten(key, value if out is None else out, "output")
        self._handle.pushpull(keys, vals, outs, _priorities(priority, len(keys)))

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """Stores ``value`` under the new ``key`` and copies it into ``out``."""
        keys, firsts = self._init_values(key, value)
        self._check_key_type(keys)
        _, outs = _flatten(key, out, "output")
        self._handle.broadcast(keys, firsts, outs, _priorities(priority, len(keys)))

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0, row_ids: Any = None) -> None:
        """Pulls whole values: arrays are dense, so every row is copied."""
        self.pull(key, out, priority)

    # -- updaters ---------------------------------------------------------------------

    def _set_updater(self, updater: Callable[[Any, NDArray, NDArray], None]) -> None:
        """Makes ``updater(key, pushed_sum, stored)`` apply each push to the stored value.

        The updater runs in the pushing thread and changes ``stored`` in place.
        """
        if not callable(updater):
            raise MXNetTypeError("KVStore._set_updater: the updater must be callable")
        self._handle.reset_updater()
        self._push_updater = updater
        self._state_keeper = updater if hasattr(updater, "get_states") else None

    set_updater = _set_updater

    @property
    def _updater(self) -> Any:
        """The updater in use, as MXNet's stores expose it: the Python function set with
        :meth:`_set_updater`, or the optimizer's updater (whose ``states`` hold each key's
        optimizer state); None before either is set."""
        return self._push_updater if self._push_updater is not None else self._state_keeper

    def set_optimizer(self, optimizer: Any) -> None:
        """Makes ``optimizer`` update the stored values on each push.

        Parameters
        ----------
        optimizer : Optimizer
            The optimizer (see :mod:`rsmx.optimizer`).
        """
        from .. import optimizer as opt

        fused = fused_optimizer(optimizer)
        if fused is None:
            self._set_updater(opt.get_updater(optimizer))
            return
        self._push_updater = None
        self._state_keeper = FusedUpdater(self._handle, optimizer, fused)

    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        """Turns on MXNet's 2-bit gradient compression (distributed stores only): each
        float32 push sends, per value, ``+threshold``, ``-threshold`` or nothing, and keeps
        the rest for the key's next push. Call it before the first ``init``.

        Parameters
        ----------
        compression_params : dict
            ``{'type': '2bit', 'threshold': 0.5}``; the threshold defaults to 0.5.
        """
        if not isinstance(compression_params, dict):
            raise MXNetTypeError("set_gradient_compression: compression_params must be a dict")
        kind = compression_params.get("type")
        if kind is None:
            raise MXNetValueError("set_gradient_compression: 'type' is required (only '2bit')")
        if kind != "2bit":
            raise MXNetValueError(f"set_gradient_compression: unknown type {kind!r} (only '2bit')")
        try:
            threshold = float(compression_params.get("threshold", 0.5))
        except (TypeError, ValueError):
            raise MXNetValueError(
                f"set_gradient_compression: threshold {compression_params['threshold']!r} is not a number"
            ) from None
        self._handle.set_gradient_compression(threshold)

    @staticmethod
    def is_capable(capability: str) -> bool:
        """Whether the store can run ``capability``: local stores run optimizers."""
        if capability.lower() == KVStoreBase.OPTIMIZER:
            return True
        raise MXNetValueError(f"Unknown capability: {capability}")

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Saves the optimizer's state (and the optimizer, if asked) to ``fname``."""
        with open(fname, "wb") as f:
            f.write(self._updater_states(dump_optimizer))

    def load_optimizer_states(self, fname: str) -> None:
        """Loads the optimizer's state saved by :meth:`save_optimizer_states`."""
        with open(fname, "rb") as f:
            self._set_updater_states(f.read())

    def _updater_states(self, dump_optimizer: bool) -> bytes:
        if self._state_keeper is None:
            raise MXNetError("KVStore: no optimizer is set, so there are no states to save")
        return self._state_keeper.get_states(dump_optimizer)

    def _set_updater_states(self, data: bytes) -> None:
        if self._state_keeper is None:
            raise MXNetError("KVStore: no optimizer is set, so states cannot be loaded")
        self._state_keeper.set_states(data)

    # -- cluster ------------------------------------------------------------------------

    @property
    def type(self) -> str:
        """The store's type name, as given to :func:`create`."""
        return self._handle.type_name

    @property
    def rank(self) -> int:
        """This worker's rank: always 0 on one machine."""
        return self._handle.rank

    @property
    def num_workers(self) -> int:
        """How many workers share the store: 1 on one machine."""
        return self._handle.num_workers

    def _barrier(self) -> None:
        """Waits for every worker: nothing to wait for on one machine."""
        self._handle.barrier()

    def _send_command_to_servers(self, head: int, body: str) -> None:
        """Sends a command to the servers: a local store has none."""

    def __getstate__(self) -> Any:
        raise pickle.PicklingError("a KVStore cannot be pickled")

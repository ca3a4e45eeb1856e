"""``Updater``: the callable a KVStore (or a training loop) applies to each
``(key, gradient, weight)``, keeping every weight's optimizer state.
"""

from __future__ import annotations

import pickle
from typing import Any

from ..base import py_str
from ..context import Context
from ..ndarray import NDArray
from .optimizer import Optimizer

__all__ = ["Updater", "get_updater"]


class Updater:
    """Applies an optimizer to weights by key, creating each key's state on first use.

    Parameters
    ----------
    optimizer : Optimizer
        The optimizer to apply.

    Attributes
    ----------
    states : dict
        Each key's optimizer state.
    states_synced : dict of key to bool
        Whether a key's state is known to be on its weight's device (False after
        :meth:`set_states`, until the next update moves it there).
    """

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        self.states_synced: dict[Any, bool] = {}
        self.aggregate_updates = optimizer.aggregate_num > 0

    def __call__(self, index: Any, grad: Any, weight: Any) -> None:
        """Updates ``weight`` (or a list of weights) in place from ``grad``.

        Parameters
        ----------
        index : int, str, bytes or list of them
            The key(s); bytes are decoded to str.
        grad : NDArray or list of NDArray
            The gradient(s).
        weight : NDArray or list of NDArray
            The weight(s), updated in place.
        """
        if not isinstance(index, (list, tuple)):
            indices, grads, weights = [index], [grad], [weight]
        else:
            indices, grads, weights = list(index), list(grad), list(weight)
        if weights:
            self.optimizer._set_current_context(weights[0].context.device_id)
        for i, idx in enumerate(indices):
            if isinstance(idx, bytes):
                idx = indices[i] = py_str(idx)
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, weights[i])
                self.states_synced[idx] = True
            elif not self.states_synced[idx]:
                self.states[idx] = self.sync_state_context(self.states[idx], weights[i].context)
                self.states_synced[idx] = True
        if not self.aggregate_updates:
            for i, w, g in zip(indices, weights, grads, strict=True):
                self.optimizer.update_multi_precision(i, w, g, self.states[i])
            return
        # Batches of up to aggregate_num weights of one dtype, in first-seen dtype order.
        by_dtype: dict[Any, list[tuple[Any, NDArray, NDArray]]] = {}
        for i, w, g in zip(indices, weights, grads, strict=True):
            by_dtype.setdefault(w.dtype, []).append((i, w, g))
        n = self.optimizer.aggregate_num
        for group in by_dtype.values():
            for start in range(0, len(group), n):
                chunk = group[start : start + n]
                keys = tuple(c[0] for c in chunk)
                self.optimizer.update_multi_precision(
                    keys,
                    tuple(c[1] for c in chunk),
                    tuple(c[2] for c in chunk),
                    [self.states[k] for k in keys],
                )

    def sync_state_context(self, state: Any, context: Context) -> Any:
        """``state`` with every NDArray in it moved to ``context`` (tuples and lists
        keep their type)."""
        if isinstance(state, NDArray):
            return state.as_in_context(context)
        if isinstance(state, (tuple, list)):
            synced = [self.sync_state_context(s, context) for s in state]
            return tuple(synced) if isinstance(state, tuple) else synced
        return state

    def set_states(self, states: bytes) -> None:
        """Restores states (and the optimizer, if it was saved) from :meth:`get_states`.

        Parameters
        ----------
        states : bytes
            A pickle of the states dict, or of ``(states, optimizer)``.
        """
        loaded = pickle.loads(states)
        if isinstance(loaded, tuple) and len(loaded) == 2:
            self.states, self.optimizer = loaded
        else:
            self.states = loaded
        self.states_synced = dict.fromkeys(self.states.keys(), False)

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """The states as a pickle, for :meth:`set_states`.

        Parameters
        ----------
        dump_optimizer : bool, optional
            Also save the optimizer (its learning rate, schedule and update counts).

        Returns
        -------
        bytes
            A pickle of the states dict, or of ``(states, optimizer)``.
        """
        return pickle.dumps((self.states, self.optimizer) if dump_optimizer else self.states)


def get_updater(optimizer: Optimizer) -> Updater:
    """An :class:`Updater` for ``optimizer``."""
    return Updater(optimizer)

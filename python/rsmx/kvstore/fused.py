"""Built-in optimizers run by the store's core: the updater's Python face (states to
save and load in :class:`rsmx.optimizer.Updater`'s format) over the core's fused updates."""

from __future__ import annotations

import pickle
from typing import Any

from ..ndarray import NDArray


def _leaves(state: Any) -> list[NDArray]:
    """The arrays of an optimizer state (an array, None, or nested tuples), in order."""
    if state is None:
        return []
    if isinstance(state, NDArray):
        return [state]
    return [a for s in state for a in _leaves(s)]


def _refill(template: Any, arrays: list[NDArray]) -> Any:
    """``template``'s structure with its arrays taken from ``arrays`` in order."""
    if template is None:
        return None
    if isinstance(template, NDArray):
        return arrays.pop(0)
    filled = [_refill(t, arrays) for t in template]
    return tuple(filled) if isinstance(template, tuple) else filled


def fused_optimizer(optimizer: Any) -> Any:
    """The core's optimizer that runs ``optimizer`` (which is bound to it and reads its
    counts, rate and schedule from it), or None when it has none (a subclass, a custom
    schedule)."""
    core = getattr(optimizer, "_core_optimizer", None)
    return None if core is None else core()


class FusedUpdater:
    """A store's built-in optimizer: updates run in the core, whose optimizer owns the
    counts and schedule; this object saves and restores the states in
    :class:`rsmx.optimizer.Updater`'s format."""

    def __init__(self, handle: Any, optimizer: Any, fused: Any) -> None:
        self._handle = handle
        self.optimizer = optimizer
        handle.set_optimizer(fused)

    @property
    def states(self) -> dict:
        """Each key's optimizer state, shaped as :class:`rsmx.optimizer.Updater` keeps it
        (an array, None, or a tuple of them)."""
        opt = self.optimizer
        states = {}
        for key, arrays in self._handle.states():
            weight = self._handle.stored(key)
            template = opt.create_state_multi_precision(key, weight)
            states[key] = _refill(template, list(arrays))
        return states

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """The states in :meth:`rsmx.optimizer.Updater.get_states`'s format."""
        states = self.states
        return pickle.dumps((states, self.optimizer) if dump_optimizer else states)

    def set_states(self, data: bytes) -> None:
        """Restores what :meth:`get_states` (or an ``Updater``) saved."""
        loaded = pickle.loads(data)
        if isinstance(loaded, tuple) and len(loaded) == 2:
            states, optimizer = loaded
            fused = fused_optimizer(optimizer)
            if fused is not None:
                self.optimizer = optimizer
                self._handle.set_optimizer(fused)
        else:
            states = loaded
        for key, state in states.items():
            self._handle.set_state(key, _leaves(state))

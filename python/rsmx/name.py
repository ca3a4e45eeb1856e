"""Automatic names for symbols: ``fullyconnected0``, ``fullyconnected1``, ..."""

from __future__ import annotations

import threading

from ._classproperty import ClassPropertyMeta, classproperty

__all__ = ["NameManager", "Prefix"]


class NameManager(metaclass=ClassPropertyMeta):
    """Gives each unnamed symbol its operator's name followed by a counter.

    Used as a context manager, it becomes the current manager for the ``with`` block.
    """

    _local = threading.local()

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}
        self._old_manager: NameManager | None = None

    def get(self, name: str | None, hint: str) -> str:
        """``name`` if given, else ``hint`` followed by the next counter value."""
        if name:
            return name
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return f"{hint}{n}"

    def __enter__(self) -> NameManager:
        self._old_manager = NameManager.current
        NameManager._local.value = self
        return self

    def __exit__(self, *exc: object) -> None:
        NameManager._local.value = self._old_manager

    @classproperty
    def current(cls) -> NameManager:
        """The manager in effect on this thread (assignable: ``NameManager.current = m``)."""
        if getattr(NameManager._local, "value", None) is None:
            NameManager._local.value = NameManager()
        return NameManager._local.value

    @current.setter
    def current(cls, manager: NameManager) -> None:
        NameManager._local.value = manager


class Prefix(NameManager):
    """A name manager that puts ``prefix`` before every name it gives or is given."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)

"""Class-level properties (``AttrScope.current``, ``NameManager.current``,
``Context.default_ctx``): read and assigned on the class itself, as MXNet's are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class classproperty:  # noqa: N801 - named like the built-in ``property``
    """A property of the class rather than of its instances; assigning it on the class
    calls the setter when the class's metaclass is :class:`ClassPropertyMeta`."""

    def __init__(self, fget: Callable[[Any], Any], fset: Callable[[Any, Any], None] | None = None):
        self.fget = fget
        self.fset = fset
        self.__doc__ = fget.__doc__

    def __get__(self, obj: Any, owner: type) -> Any:
        return self.fget(owner)

    def setter(self, fset: Callable[[Any, Any], None]) -> classproperty:
        """The property with ``fset`` as its setter."""
        return classproperty(self.fget, fset)


class ClassPropertyMeta(type):
    """Routes an assignment to a class's :class:`classproperty` to its setter."""

    def __setattr__(cls, key: str, value: Any) -> None:
        for klass in cls.__mro__:
            prop = klass.__dict__.get(key)
            if isinstance(prop, classproperty):
                if prop.fset is None:
                    raise AttributeError(f"{cls.__name__}.{key} cannot be set")
                prop.fset(cls, value)
                return
        super().__setattr__(key, value)

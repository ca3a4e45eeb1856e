"""Attribute scopes: attributes given to every symbol made inside a ``with`` block."""

from __future__ import annotations

import threading

from ._classproperty import ClassPropertyMeta, classproperty
from .base import MXNetValueError

__all__ = ["AttrScope"]


class AttrScope(metaclass=ClassPropertyMeta):
    """``with mx.AttrScope(ctx_group='dev1'):`` gives the symbols made inside the block
    these attributes (values must be strings)."""

    _local = threading.local()

    def __init__(self, **kwargs: str) -> None:
        self._old_scope: AttrScope | None = None
        for value in kwargs.values():
            if not isinstance(value, str):
                raise MXNetValueError("Attributes need to be string")
        self._attr = kwargs

    def get(self, attr: dict[str, str] | None) -> dict[str, str]:
        """The scope's attributes updated with ``attr``."""
        if not self._attr:
            return dict(attr) if attr else {}
        ret = self._attr.copy()
        if attr:
            ret.update(attr)
        return ret

    def __enter__(self) -> AttrScope:
        self._old_scope = AttrScope.current
        attr = self._old_scope._attr.copy()
        attr.update(self._attr)
        self._attr = attr
        AttrScope._local.value = self
        return self

    def __exit__(self, *exc: object) -> None:
        AttrScope._local.value = self._old_scope

    @classproperty
    def current(cls) -> AttrScope:
        """The scope in effect on this thread (assignable: ``AttrScope.current = scope``)."""
        if getattr(AttrScope._local, "value", None) is None:
            AttrScope._local.value = AttrScope()
        return AttrScope._local.value

    @current.setter
    def current(cls, scope: AttrScope) -> None:
        AttrScope._local.value = scope

"""Name registries for classes made from configuration: metrics and initializers.

Each base class gets one table from lower-case names to subclasses, with functions to
register a subclass (under its class name or aliases) and to create an instance from a
name, a ``[name, kwargs]`` JSON string, a ``{...}`` JSON string, a dict or an instance.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

from .base import MXNetTypeError, MXNetValueError

__all__ = ["get_registry", "get_register_func", "get_alias_func", "get_create_func"]

_REGISTRY: dict[type, dict[str, type]] = {}


def _table(base_class: type) -> dict[str, type]:
    return _REGISTRY.setdefault(base_class, {})


def get_registry(base_class: type) -> dict[str, type]:
    """A copy of the name table of ``base_class``."""
    return dict(_table(base_class))


def get_register_func(base_class: type, nickname: str) -> Callable[..., type]:
    """A ``register(klass, name=None)`` function for subclasses of ``base_class``.

    Parameters
    ----------
    base_class : type
        The class whose subclasses are registered.
    nickname : str
        What the subclasses are called in messages (``'metric'``, ``'initializer'``).
    """
    registry = _table(base_class)

    def register(klass: type, name: str | None = None) -> type:
        if not (isinstance(klass, type) and issubclass(klass, base_class)):
            raise MXNetTypeError(f"can only register subclasses of {base_class.__name__}, got {klass!r}")
        key = (klass.__name__ if name is None else name).lower()
        old = registry.get(key)
        if old is not None and old is not klass:
            warnings.warn(
                f"new {nickname} {klass.__module__}.{klass.__name__} registered as '{key}' "
                f"replaces {old.__module__}.{old.__name__}",
                UserWarning,
                stacklevel=2,
            )
        registry[key] = klass
        return klass

    register.__doc__ = f"Registers a {nickname} class under its lower-cased class name or ``name``."
    return register


def get_alias_func(base_class: type, nickname: str) -> Callable[..., Callable[[type], type]]:
    """An ``alias(*names)`` class decorator registering a subclass under extra names."""
    register = get_register_func(base_class, nickname)

    def alias(*aliases: str) -> Callable[[type], type]:
        def reg(klass: type) -> type:
            for name in aliases:
                register(klass, name)
            return klass

        return reg

    alias.__doc__ = f"Registers a {nickname} class under more names."
    return alias


def get_create_func(base_class: type, nickname: str) -> Callable[..., Any]:
    """A ``create(name_or_config, *args, **kwargs)`` function for ``base_class``.

    The first argument (or the keyword ``nickname``) may be an instance (returned as it
    is), a registered name (any case), a JSON string ``'["name", {kwargs}]'`` or
    ``'{"nickname": name, ...}'``, or a dict of keyword arguments.
    """
    registry = _table(base_class)

    def create(*args: Any, **kwargs: Any) -> Any:
        if args:
            name, args = args[0], args[1:]
        elif nickname in kwargs:
            name = kwargs.pop(nickname)
        else:
            raise MXNetValueError(f"create: no {nickname} given")
        if isinstance(name, base_class):
            if args or kwargs:
                raise MXNetValueError(
                    f"{nickname} is already an instance; extra arguments are not allowed"
                )
            return name
        if isinstance(name, dict):
            return create(**name)
        if not isinstance(name, str):
            raise MXNetTypeError(f"{nickname} must be a str, got {type(name).__name__}")
        if name.startswith("[") or name.startswith("{"):
            if args or kwargs:
                raise MXNetValueError(f"a JSON {nickname} config takes no extra arguments")
            try:
                config = json.loads(name)
            except json.JSONDecodeError as e:
                raise MXNetValueError(f"malformed {nickname} config {name!r}: {e}") from e
            if isinstance(config, list):
                if len(config) != 2 or not isinstance(config[1], dict):
                    raise MXNetValueError(f"malformed {nickname} config {name!r}")
                return create(config[0], **config[1])
            return create(**config)
        key = name.lower()
        if key not in registry:
            raise MXNetValueError(
                f"unknown {nickname} '{name}'; registered names are {sorted(registry)}"
            )
        return registry[key](*args, **kwargs)

    create.__doc__ = (
        f"Creates a {nickname} from its registered name, a JSON config or a dict; an "
        f"instance is returned as it is."
    )
    return create

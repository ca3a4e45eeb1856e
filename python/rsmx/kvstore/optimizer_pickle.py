"""Optimizers as they travel to a cluster's servers: pickled (protocol 0, as MXNet sends
them) under MXNet's class names, so that MXNet's servers can read them too; and read back
by an unpickler that builds nothing but optimizers, learning-rate schedulers and plain
data, whichever side wrote them (MXNet's servers unpickle anything from the network)."""

from __future__ import annotations

import io
import pickle
from typing import Any

from ..base import MXNetValueError

__all__ = ["dumps", "loads"]

# Where MXNet 1.9.1 defines the classes rsmx mirrors.
_MXNET_OPTIMIZERS = "mxnet.optimizer.optimizer"
_MXNET_SCHEDULERS = "mxnet.lr_scheduler"
_OPTIMIZER_MODULES = ("mxnet.optimizer.optimizer", "mxnet.optimizer", "mxnet.optimizer.contrib")

# Plain objects an optimizer's state may hold.
_SAFE = {
    ("copyreg", "_reconstructor"),
    ("builtins", "object"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
}
_NUMPY = {"scalar", "dtype"}


def _classes() -> tuple[type, type]:
    from ..lr_scheduler import LRScheduler
    from ..optimizer import Optimizer

    return Optimizer, LRScheduler


def _mxnet_name(obj: Any) -> tuple[str, str] | None:
    """MXNet's module and name for an rsmx optimizer or scheduler class."""
    if not isinstance(obj, type) or not obj.__module__.startswith("rsmx."):
        return None
    optimizer, scheduler = _classes()
    if issubclass(obj, optimizer):
        contrib = obj.__module__.endswith(".contrib")
        return ("mxnet.optimizer.contrib" if contrib else _MXNET_OPTIMIZERS, obj.__qualname__)
    if issubclass(obj, scheduler):
        return (_MXNET_SCHEDULERS, obj.__qualname__)
    return None


class _MXNetPickler(pickle._Pickler):  # type: ignore[name-defined]
    """Writes rsmx's optimizer classes under MXNet's names, and numpy 2's module names as
    numpy 1 knows them."""

    def save_global(self, obj: Any, name: str | None = None) -> None:
        alias = _mxnet_name(obj)
        if alias is None:
            module = getattr(obj, "__module__", "") or ""
            if not module.startswith("numpy._core"):
                super().save_global(obj, name)
                return
            alias = ("numpy.core" + module[len("numpy._core"):], name or obj.__qualname__)
        self.write(pickle.GLOBAL + f"{alias[0]}\n{alias[1]}\n".encode())
        self.memoize(obj)


def dumps(optimizer: Any) -> bytes:
    """``optimizer`` pickled as MXNet's workers send it to the servers."""
    optimizer_class, _ = _classes()
    if not isinstance(optimizer, optimizer_class):
        raise MXNetValueError(
            f"set_optimizer: expected an rsmx.optimizer.Optimizer, got {type(optimizer).__name__}"
        )
    buf = io.BytesIO()
    _MXNetPickler(buf, protocol=0).dump(optimizer)
    return buf.getvalue()


class _RestrictedUnpickler(pickle.Unpickler):
    """Builds optimizers and schedulers (MXNet's names mapped to rsmx's classes) and plain
    data; refuses every other class or function."""

    def find_class(self, module: str, name: str) -> Any:
        optimizer, scheduler = _classes()
        # Python 2's names, which protocol 0 pickles use.
        module = {"copy_reg": "copyreg", "__builtin__": "builtins"}.get(module, module)
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        if module in ("numpy.core.multiarray", "numpy._core.multiarray", "numpy") and name in _NUMPY:
            import numpy as np

            core = getattr(np, "_core", None) or np.core
            return np.dtype if name == "dtype" else core.multiarray.scalar
        if module in _OPTIMIZER_MODULES:
            klass = optimizer.opt_registry.get(name.lower())
            if klass is not None and klass.__name__ == name:
                return klass
        elif module == _MXNET_SCHEDULERS:
            from .. import lr_scheduler

            klass = getattr(lr_scheduler, name, None)
            if isinstance(klass, type) and issubclass(klass, scheduler):
                return klass
        elif module.startswith("rsmx."):
            klass = super().find_class(module, name)
            if isinstance(klass, type) and issubclass(klass, (optimizer, scheduler)):
                return klass
        raise MXNetValueError(
            f"set_optimizer: the pickled optimizer refers to {module}.{name}, which is not an "
            "optimizer or learning-rate scheduler class of MXNet or rsmx; it was not loaded"
        )


def _fill_defaults(obj: Any) -> None:
    """Gives an object pickled by MXNet the attributes rsmx's class has and MXNet's lacks,
    from a default instance of the class."""
    try:
        fresh = type(obj)()
    except Exception:  # noqa: BLE001 - a class that needs arguments keeps what it has
        return
    for name, value in fresh.__dict__.items():
        if name != "_fused":
            obj.__dict__.setdefault(name, value)


def loads(data: bytes) -> Any:
    """The optimizer in ``data``; an ``MXNetValueError`` for anything else."""
    optimizer_class, scheduler_class = _classes()
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except MXNetValueError:
        raise
    except Exception as e:  # noqa: BLE001 - any malformed pickle is a bad request
        raise MXNetValueError(f"set_optimizer: the optimizer's pickle cannot be read: {e}") from None
    if not isinstance(obj, optimizer_class):
        raise MXNetValueError(
            f"set_optimizer: the pickle holds a {type(obj).__name__}, not an optimizer"
        )
    _fill_defaults(obj)
    scheduler = obj.__dict__.get("lr_scheduler")
    if isinstance(scheduler, scheduler_class):
        _fill_defaults(scheduler)
    return obj

"""Device contexts: ``mx.cpu(i)``, ``mx.gpu(i)`` and the default-context stack."""

from __future__ import annotations

import threading

from ._classproperty import ClassPropertyMeta, classproperty

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus"]


class Context(metaclass=ClassPropertyMeta):
    """A device: its type (``cpu``, ``gpu``, ``cpu_pinned``, ``cpu_shared``) and id.

    Used with ``with``, a context becomes the default for new arrays in that block.
    """

    _default_ctx = threading.local()
    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
    devstr2type = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}

    def __init__(self, device_type: str | Context, device_id: int = 0):
        if isinstance(device_type, Context):
            self.device_typeid = device_type.device_typeid
            self.device_id = device_type.device_id
        else:
            if device_type not in self.devstr2type:
                from .base import MXNetValueError

                raise MXNetValueError(
                    f"unknown device type '{device_type}': expected one of "
                    + ", ".join(self.devstr2type)
                )
            self.device_typeid = self.devstr2type[device_type]
            self.device_id = int(device_id)
            if self.device_typeid == 2:
                _start_gpus()
        self._old_ctx: Context | None = None

    @property
    def device_type(self) -> str:
        """The device type's name."""
        return self.devtype2str[self.device_typeid]

    def __hash__(self) -> int:
        return hash((self.device_typeid, self.device_id))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Context)
            and self.device_typeid == other.device_typeid
            and self.device_id == other.device_id
        )

    def __str__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    __repr__ = __str__

    def __enter__(self) -> Context:
        self._old_ctx = current_context()
        Context._default_ctx.value = self
        return self

    def __exit__(self, *exc: object) -> None:
        Context._default_ctx.value = self._old_ctx

    @classproperty
    def default_ctx(cls) -> Context:
        """This thread's default context (assignable: ``Context.default_ctx = mx.gpu(0)``)."""
        return current_context()

    @default_ctx.setter
    def default_ctx(cls, ctx: Context) -> None:
        Context._default_ctx.value = ctx

    def empty_cache(self) -> None:
        """Gives the pooled free memory of this device back to the system."""
        from . import storage

        storage.release_all(self)

    @property
    def _pair(self) -> tuple[int, int]:
        return (self.device_typeid, self.device_id)


def cpu(device_id: int = 0) -> Context:
    """The CPU context ``cpu(device_id)``; every id is a distinct device."""
    return Context("cpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    """Page-locked host memory (plain host memory in this build)."""
    return Context("cpu_pinned", device_id)


def gpu(device_id: int = 0) -> Context:
    """The GPU context ``gpu(device_id)``. Using it needs GPU support (see ``num_gpus``)."""
    return Context("gpu", device_id)


def _start_gpus() -> int:
    """Starts the GPU backend once (``rsmx.cuda``), when a GPU context is first made or
    GPUs are first counted; without a usable GPU the core keeps the reason for its
    errors."""
    from .cuda.start import ensure_started

    return ensure_started()


def num_gpus() -> int:
    """Number of usable GPUs (0 without a CUDA driver); ``RSMX_FAKE_GPU=N`` gives N fake
    GPUs on host memory, for testing."""
    return _start_gpus()


def current_context() -> Context:
    """The default context: the innermost ``with Context(...)``, else ``cpu(0)``."""
    ctx = getattr(Context._default_ctx, "value", None)
    return ctx if ctx is not None else Context("cpu", 0)

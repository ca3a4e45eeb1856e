"""The profiler (MXNet's ``mx.profiler``): records the operators the engine runs, memory
use, and the user's own tasks, frames, events, counters and markers; ``dump`` writes them
as a Chrome trace (chrome://tracing, Perfetto) and ``dumps`` returns aggregate statistics.

With ``profile_process='server'`` the call goes to the servers of the distributed store
given to :func:`set_kvstore_handle`, as MXNet sends it.
"""

from __future__ import annotations

import warnings
from typing import Any

from . import _core
from .base import MXNetError

__all__ = [
    "set_kvstore_handle",
    "set_config",
    "profiler_set_config",
    "set_state",
    "profiler_set_state",
    "dump",
    "dump_profile",
    "dumps",
    "pause",
    "resume",
    "Domain",
    "Task",
    "Frame",
    "Event",
    "Counter",
    "Marker",
]

# MXNet's KVStoreServerProfilerCommand: the digit that ends a server profiler command.
_SERVER_CONFIG, _SERVER_STATE, _SERVER_PAUSE, _SERVER_DUMP = 0, 1, 2, 3
# MXNet's CommandType::kSetProfilerParams.
_SET_PROFILER_PARAMS = 5

_kvstore: Any = None


def set_kvstore_handle(handle: Any) -> None:
    """Sets the distributed KVStore whose servers ``profile_process='server'`` calls
    reach."""
    global _kvstore
    _kvstore = handle


def _is_server(profile_process: str) -> bool:
    if profile_process not in ("worker", "server"):
        raise MXNetError(f"profiler: profile_process must be 'worker' or 'server', got {profile_process!r}")
    return profile_process == "server"


def _to_servers(params: str, command: int) -> None:
    if _kvstore is None:
        raise MXNetError(
            "profiler: profile_process='server' needs a distributed KVStore; "
            "pass it to profiler.set_kvstore_handle first"
        )
    if getattr(_kvstore, "rank", 0) == 0:
        _kvstore._send_command_to_servers(_SET_PROFILER_PARAMS, params + str(command))


def _text(value: Any) -> str:
    return str(value)


def set_config(**kwargs: Any) -> None:
    """Sets up the profiler (keyword arguments only): ``filename``, ``profile_all``,
    ``profile_symbolic``, ``profile_imperative``, ``profile_memory``, ``profile_api``,
    ``continuous_dump``, ``dump_period``, ``aggregate_stats`` and ``profile_process``
    (``'worker'``, the default, or ``'server'``)."""
    if _is_server(str(kwargs.get("profile_process", "worker"))):
        pairs = [f"{k}:{_text(v)}" for k, v in kwargs.items() if k != "profile_process"]
        _to_servers(",".join(pairs), _SERVER_CONFIG)
        return
    _core.profiler_set_config([(str(k), _text(v)) for k, v in kwargs.items()])


def profiler_set_config(mode: str = "symbolic", filename: str = "profile.json") -> None:
    """Sets up the profiler (deprecated; use :func:`set_config`)."""
    warnings.warn("profiler.profiler_set_config() is deprecated. Please use profiler.set_config() instead", stacklevel=2)
    set_config(**{"profile_" + mode: True, "filename": filename})


def set_state(state: str = "stop", profile_process: str = "worker") -> None:
    """Starts (``'run'``) or stops (``'stop'``) the profiler."""
    states = {"stop": 0, "run": 1}
    if state not in states:
        raise MXNetError(f"profiler set_state: state must be 'run' or 'stop', got {state!r}")
    if _is_server(profile_process):
        _to_servers(str(states[state]), _SERVER_STATE)
        return
    _core.profiler_set_state(state == "run")


def profiler_set_state(state: str = "stop") -> None:
    """Starts or stops the profiler (deprecated; use :func:`set_state`)."""
    warnings.warn("profiler.profiler_set_state() is deprecated. Please use profiler.set_state() instead", stacklevel=2)
    set_state(state)


def dump(finished: bool = True, profile_process: str = "worker") -> None:
    """Writes everything recorded so far to the configured file; with ``finished``, the
    profiler stops."""
    if _is_server(profile_process):
        _to_servers(str(1 if finished is True else 0), _SERVER_DUMP)
        return
    _core.profiler_dump(finished is True)


def dump_profile() -> None:
    """Writes the profile and stops the profiler (deprecated; use :func:`dump`)."""
    warnings.warn("profiler.dump_profile() is deprecated. Please use profiler.dump() instead", stacklevel=2)
    dump(True)


def dumps(reset: bool = False, format: str = "table", sort_by: str = "total", ascending: bool = False) -> str:
    """The aggregate statistics (with ``aggregate_stats=True``) as MXNet's table or JSON
    (``format``), each category sorted by ``sort_by`` (``total``, ``avg``, ``min``,
    ``max`` or ``count``); ``reset`` starts the statistics afresh."""
    for name, value in (("reset", reset), ("ascending", ascending)):
        if value not in (False, True):
            raise MXNetError(f"profiler dumps: {name} must be False or True, got {value!r}")
    return _core.profiler_dumps(bool(reset), str(format), str(sort_by), bool(ascending))


def pause(profile_process: str = "worker") -> None:
    """Pauses recording; :func:`resume` goes on."""
    if _is_server(profile_process):
        _to_servers("1", _SERVER_PAUSE)
        return
    _core.profiler_pause(True)


def resume(profile_process: str = "worker") -> None:
    """Resumes paused recording."""
    if _is_server(profile_process):
        _to_servers("0", _SERVER_PAUSE)
        return
    _core.profiler_pause(False)


class Domain:
    """A category grouping tasks, frames, counters and markers in the profile."""

    def __init__(self, name: str):
        self.name = str(name)

    def __str__(self) -> str:
        return self.name

    def new_task(self, name: str) -> Task:
        return Task(self, name)

    def new_frame(self, name: str) -> Frame:
        return Frame(self, name)

    def new_counter(self, name: str, value: int | None = None) -> Counter:
        return Counter(self, name, value)

    def new_marker(self, name: str) -> Marker:
        return Marker(self, name)


class _Span:
    """Something timed between ``start`` and ``stop``."""

    _async = False

    def __init__(self, category: str, name: str):
        self.name = str(name)
        self._category = category
        self._start: int | None = None

    def start(self) -> None:
        """Starts timing."""
        self._start = _core.profiler_now()

    def stop(self) -> None:
        """Stops timing and records the span (if the profiler runs)."""
        if self._start is None:
            raise MXNetError(f"profiler: {type(self).__name__} '{self.name}' was stopped without being started")
        _core.profiler_span(self._category, self.name, self._start, _core.profiler_now(), self._async)
        self._start = None

    def __enter__(self) -> _Span:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __str__(self) -> str:
        return self.name


class Task(_Span):
    """A unit of work of a domain; all its passes add up in the statistics."""

    _async = True

    def __init__(self, domain: Domain, name: str):
        super().__init__(domain.name, name)


class Frame(_Span):
    """A period of a domain (as a frame of video), each pass shown on its own."""

    _async = True

    def __init__(self, domain: Domain, name: str):
        super().__init__(domain.name, name)


class Event(_Span):
    """A timed region of the calling thread, in the ``event`` category."""

    def __init__(self, name: str):
        super().__init__("event", name)


class Counter:
    """A value of a domain tracked over time."""

    def __init__(self, domain: Domain, name: str, value: int | None = None):
        self.name = str(name)
        self._domain = domain.name
        self._value = 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value: int) -> None:
        """Sets the counter's value."""
        self._value = int(value)
        _core.profiler_counter(self._domain, self.name, self._value)

    def increment(self, delta: int = 1) -> None:
        """Adds ``delta``."""
        self.set_value(self._value + int(delta))

    def decrement(self, delta: int = 1) -> None:
        """Subtracts ``delta``."""
        self.set_value(self._value - int(delta))

    def __iadd__(self, delta: int) -> Counter:
        self.increment(delta)
        return self

    def __isub__(self, delta: int) -> Counter:
        self.decrement(delta)
        return self

    def __str__(self) -> str:
        return self.name


class Marker:
    """An instant of a domain."""

    def __init__(self, domain: Domain, name: str):
        self.name = str(name)
        self.domain = domain

    def mark(self, scope: str = "process") -> None:
        """Records the instant; ``scope`` is ``global``, ``process``, ``thread``, ``task``
        or ``marker``."""
        _core.profiler_marker(self.domain.name, self.name, str(scope))


def _autostart() -> None:
    """``MXNET_PROFILER_AUTOSTART=1`` (or ``RSMX_``) profiles the whole run into
    ``profile.json``; ``MXNET_PROFILER_MODE=1`` records imperative operators as well as
    symbolic ones."""
    import atexit
    import os

    def env(name: str) -> str:
        return os.environ.get("RSMX_" + name, os.environ.get("MXNET_" + name, "0")).strip()

    if env("PROFILER_AUTOSTART") != "1":
        return
    set_config(profile_symbolic=True, profile_imperative=env("PROFILER_MODE") == "1", filename="profile.json")
    set_state("run")

    def finish() -> None:
        from .ndarray import waitall

        waitall()
        dump(True)

    atexit.register(finish)


_autostart()


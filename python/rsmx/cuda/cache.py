"""The on-disk cache of compiled kernels: one file an entry, named by a SHA-256 key over
everything that changes the code, holding a digest of its contents so that a torn or
corrupted entry is found and compiled again. Writes go to a temporary file first and
then replace the entry, so two processes filling the cache at once do not collide."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

#: Changes whenever the entry format or the key's parts change.
SCHEMA = "rsmx-cuda-cache-1"


def default_dir() -> Path:
    """``RSMX_CUDA_CACHE_DIR``, else ``$XDG_CACHE_HOME/rsmx/cuda``, else
    ``~/.cache/rsmx/cuda``."""
    if d := os.environ.get("RSMX_CUDA_CACHE_DIR"):
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rsmx" / "cuda"


def key(*, source: str, headers: dict[str, str], options: tuple[str, ...], arch: str,
        nvrtc: str) -> str:
    """The entry name for one module: covers its source, the headers it may include,
    the compile options, the architecture and NVRTC's version and build."""
    h = hashlib.sha256()
    for part in (SCHEMA, source, *sorted(f"{n}\0{t}" for n, t in headers.items()),
                 "\0".join(options), arch, nvrtc):
        h.update(part.encode())
        h.update(b"\0\1")
    return h.hexdigest()


class KernelCache:
    """Compiled modules on disk, with counters of what happened."""

    def __init__(self, directory: Path | None = None, enabled: bool | None = None):
        self.directory = Path(directory) if directory is not None else default_dir()
        self.enabled = os.environ.get("RSMX_CUDA_CACHE", "1") != "0" if enabled is None else enabled
        self.hits = 0
        self.compiles = 0
        self.corrupt = 0

    def _path(self, k: str) -> Path:
        return self.directory / f"{k}.bin"

    def load(self, k: str) -> bytes | None:
        """The entry's code, or ``None`` if it is missing or damaged (then removed)."""
        path = self._path(k)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        digest, code = data[:32], data[32:]
        if len(data) < 32 or hashlib.sha256(code).digest() != digest:
            self.corrupt += 1
            path.unlink(missing_ok=True)
            return None
        return code

    def store(self, k: str, code: bytes) -> None:
        """Writes the entry atomically; a cache that cannot be written is skipped."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(code).digest() + code)
            os.replace(tmp, self._path(k))
        except OSError:
            pass

    def get_or_compile(self, k: str, compile_fn: Callable[[], bytes]) -> bytes:
        """The cached code under ``k``, or ``compile_fn()`` stored under it."""
        if self.enabled and (code := self.load(k)) is not None:
            self.hits += 1
            return code
        code = compile_fn()
        self.compiles += 1
        if self.enabled:
            self.store(k, code)
        return code

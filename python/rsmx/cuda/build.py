"""Compiling rsmx's embedded kernel modules for one GPU architecture, through the cache."""

from __future__ import annotations

import functools

from . import nvrtc
from .cache import KernelCache, key


def sources() -> tuple[dict[str, str], dict[str, str]]:
    """The headers and the modules this build of rsmx embeds, by name."""
    from .. import _core

    (hname, htext), modules = _core.cuda_sources()
    return {hname: htext}, dict(modules)


@functools.lru_cache(maxsize=1)
def nvrtc_identity() -> str:
    """NVRTC's version and build, from the banner of an empty program's PTX (a patch
    release changes it even where the version number does not)."""
    c = nvrtc.compile_source("", "empty.cu", "compute_75")
    banner = [ln for ln in c.code.decode(errors="replace").splitlines()[:6] if ln.startswith("//")]
    return f"{nvrtc.version()}|" + "|".join(banner)


def compile_module(name: str, arch: str, cache: KernelCache,
                   options: tuple[str, ...] = ()) -> bytes:
    """Module ``name`` built for ``arch`` (CUBIN for ``sm_XY``, PTX for ``compute_XY``)."""
    headers, modules = sources()
    source = modules[name]
    k = key(source=source, headers=headers, options=nvrtc.BASE_OPTIONS + options, arch=arch,
            nvrtc=nvrtc_identity())
    return cache.get_or_compile(
        k, lambda: nvrtc.compile_source(source, f"{name}.cu", arch, headers, options).code
    )


def compile_all(arch: str, cache: KernelCache | None = None) -> dict[str, bytes]:
    """Every embedded module built for ``arch``."""
    cache = cache if cache is not None else KernelCache()
    _, modules = sources()
    return {name: compile_module(name, arch, cache) for name in modules}

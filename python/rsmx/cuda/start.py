"""Starting the core's GPU backend, once per process: on the fake GPU when
``RSMX_FAKE_GPU=N`` asks for it, else on the devices the CUDA driver offers, with rsmx's
kernels compiled for each device's architecture (through the on-disk cache)."""

from __future__ import annotations

import os

from .. import _core

#: The driver ABI the core's function table declares (CUDA 12.0).
_DRIVER_ABI = 12000


def _fake_count() -> int:
    raw = os.environ.get("RSMX_FAKE_GPU", "").strip()
    if not raw:
        return 0
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"RSMX_FAKE_GPU must be a number of devices, got {raw!r}") from None
    if n < 0:
        raise ValueError(f"RSMX_FAKE_GPU must not be negative, got {n}")
    return n


def start_fake(n: int) -> int:
    """Starts ``n`` fake GPUs that run the host build of every kernel module."""
    from . import host

    paths = host.build_all()
    images = {name: str(path).encode() + b"\0" for name, path in paths.items()}
    return _core.cuda_init_fake([images] * n)


def resolve_driver_symbols(driver_mod) -> dict[str, int]:
    """The address of every driver function the core calls, by ``cuGetProcAddress`` for
    the ABI the core declares (names ending in ``_v2`` are asked for by their base name,
    as the driver expects)."""
    flags = driver_mod.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
    out = {}
    for name in _core.cuda_driver_symbols():
        base = name[:-3] if name.endswith("_v2") else name
        res = driver_mod.cuGetProcAddress(base.encode(), _DRIVER_ABI, flags)
        err, pfn = res[0], res[1]
        if int(err) != 0 or not int(pfn):
            raise RuntimeError(f"the CUDA driver does not export {base} ({err!r})")
        out[name] = int(pfn)
    return out


def resolve_blas_symbols() -> dict[str, int] | None:
    """The address of every cuBLAS function the core calls, from the library
    cuda-pathfinder loads; ``None`` when cuBLAS is not installed (products on the GPU
    then raise an error saying so)."""
    import ctypes

    try:
        from cuda import pathfinder

        lib = ctypes.CDLL(pathfinder.load_nvidia_dynamic_lib("cublas").abs_path)
        return {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                for name in _core.cuda_blas_symbols()}
    except Exception:
        return None


def _images_for(report) -> list[dict[str, bytes]]:
    from .build import compile_all

    by_arch: dict[str, dict[str, bytes]] = {}
    images = []
    for d in report.devices:
        plan = d.plan
        if plan.arch not in by_arch:
            compiled = compile_all(plan.arch)
            if plan.kind == "ptx":
                compiled = {k: v if v.endswith(b"\0") else v + b"\0" for k, v in compiled.items()}
            by_arch[plan.arch] = compiled
        images.append(by_arch[plan.arch])
    return images


def start_real() -> tuple[int, str]:
    """Starts every usable GPU; returns their number and, for none, the reason."""
    from .discover import find

    report = find()
    if not report.devices or len(report.usable) != len(report.devices):
        return 0, report.why_unusable() or "no usable GPU"
    from cuda.bindings import driver

    symbols = resolve_driver_symbols(driver)
    return _core.cuda_init(symbols, _images_for(report), resolve_blas_symbols()), ""


_started = False


def ensure_started() -> int:
    """Starts the backend on first call (never raises for a missing GPU: the reason goes
    to the core, which quotes it when a GPU is used); returns the number of GPUs."""
    global _started
    if _started:
        return _core.num_gpus()
    _started = True
    if _core.num_gpus() > 0:
        return _core.num_gpus()
    fake = _fake_count()
    if fake:
        return start_fake(fake)
    try:
        n, reason = start_real()
    except Exception as e:  # a broken installation must not make rsmx unusable on CPU
        n, reason = 0, f"starting CUDA failed ({type(e).__name__}: {e})"
    if n == 0:
        _core._set_no_gpu_reason(reason)
    return n


def stats() -> dict:
    """What the GPU backend has done since the process started: kernel ``launches``,
    ``host_syncs`` (host waits on the device; ``staging_waits`` of them were copies
    waiting for a pinned staging block while the device held all it may pin), device
    ``allocs`` and ``frees``."""
    return dict(_core.cuda_stats())

"""Which code to build for a GPU: CUBIN for the device's exact architecture, PTX only
where NVRTC does not know the device and the driver can read NVRTC's PTX, else a clear
reason and the package to install.

Versions are CUDA version numbers as the driver and NVRTC report them (``13000`` is
CUDA 13.0); a compute capability is ``(major, minor)``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The oldest driver era rsmx builds for: CUDA 12 (drivers 525 and newer).
OLDEST_DRIVER = 12000

#: The extra that brings the NVRTC matching each driver era.
EXTRA = {12: "rsmx[cuda12]", 13: "rsmx[cuda13]"}


@dataclass(frozen=True)
class Plan:
    """What to compile for one device: ``kind`` is ``"cubin"`` or ``"ptx"``; ``arch`` the
    NVRTC ``--gpu-architecture`` value (``sm_90`` or ``compute_90``)."""

    kind: str
    arch: str


class Incompatible(Exception):
    """The GPU cannot be used with this driver and NVRTC; the message says why and what
    to install."""


def version_str(v: int) -> str:
    """``13000`` -> ``"13.0"``."""
    return f"{v // 1000}.{v % 1000 // 10}"


def _extra_for(driver: int) -> str:
    return EXTRA.get(driver // 1000, EXTRA[max(EXTRA)])


def plan(
    driver: int | None,
    nvrtc: int | None,
    nvrtc_archs: tuple[int, ...],
    cc: tuple[int, int],
) -> Plan:
    """The build for a device of compute capability ``cc``, given the driver's CUDA
    version, NVRTC's version and the ``sm`` numbers NVRTC supports.

    Raises
    ------
    Incompatible
        When no build can run: no driver, a driver older than CUDA 12, no NVRTC, an
        NVRTC newer than the driver's CUDA major, or a device NVRTC cannot target.
    """
    if driver is None:
        raise Incompatible("no CUDA driver found (libcuda.so.1 could not be loaded)")
    if driver < OLDEST_DRIVER:
        raise Incompatible(
            f"the driver supports CUDA {version_str(driver)}; rsmx needs CUDA 12 or newer "
            "(driver 525 or newer)"
        )
    if nvrtc is None:
        raise Incompatible(f"NVRTC was not found: pip install {_extra_for(driver)}")
    if nvrtc // 1000 > driver // 1000:
        raise Incompatible(
            f"NVRTC {version_str(nvrtc)} builds for CUDA {nvrtc // 1000} drivers, but this "
            f"driver supports CUDA {version_str(driver)}: pip install {_extra_for(driver)}"
        )
    sm = cc[0] * 10 + cc[1]
    if sm in nvrtc_archs:
        return Plan("cubin", f"sm_{sm}")
    if not nvrtc_archs or sm < min(nvrtc_archs):
        oldest = f"sm_{min(nvrtc_archs)}" if nvrtc_archs else "none"
        raise Incompatible(
            f"compute capability {cc[0]}.{cc[1]} is not supported by NVRTC "
            f"{version_str(nvrtc)} (oldest: {oldest})"
        )
    newest = max(a for a in nvrtc_archs if a < sm)
    if nvrtc > driver:
        raise Incompatible(
            f"compute capability {cc[0]}.{cc[1]} is newer than NVRTC {version_str(nvrtc)} "
            f"knows, and its PTX is too new for this driver (CUDA {version_str(driver)}): "
            "install an NVRTC that knows the device"
        )
    return Plan("ptx", f"compute_{newest}")

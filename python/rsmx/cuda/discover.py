"""What this machine offers for CUDA: the bindings, the driver and its devices, NVRTC,
cuBLAS and cuDNN, each found or missing with the reason. Finding never raises: anything
that fails is recorded, and the devices count only if a build can run on them."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from . import policy


@dataclass(frozen=True)
class Device:
    """One GPU as the driver reports it."""

    ordinal: int
    name: str
    cc: tuple[int, int]
    sm_count: int
    plan: policy.Plan | None
    problem: str | None


@dataclass
class Report:
    """Everything found, in the order ``python -m rsmx.cuda`` prints it."""

    bindings: str | None = None
    driver: int | None = None
    nvrtc: int | None = None
    nvrtc_archs: tuple[int, ...] = ()
    cublas: str | None = None
    cudnn: str | None = None
    devices: list[Device] = field(default_factory=list)
    #: Why each missing part is missing, by part name.
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def usable(self) -> list[Device]:
        """The devices a build can run on."""
        return [d for d in self.devices if d.plan is not None]

    def why_unusable(self) -> str:
        """Why no GPU can be used (empty if one can)."""
        if self.usable:
            return ""
        problems = [d.problem for d in self.devices if d.problem]
        if problems:
            return problems[0]
        for part in ("bindings", "driver", "devices", "nvrtc"):
            if part in self.missing:
                return self.missing[part]
        return "no GPU found"


def _reason(e: BaseException) -> str:
    """The exception's type and the first line of its message."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"


def _call(fn, *args):
    """A cuda.bindings call: its values after the status, or RuntimeError naming it."""
    out = fn(*args)
    status, values = out[0], out[1:]
    if int(status) != 0:
        raise RuntimeError(f"{fn.__name__} returned {status!r}")
    return values[0] if len(values) == 1 else values


def _find_driver(report: Report, driver_mod) -> None:
    try:
        _call(driver_mod.cuInit, 0)
        report.driver = int(_call(driver_mod.cuDriverGetVersion))
    except Exception as e:  # a missing libcuda raises from inside the bindings
        report.missing["driver"] = f"no CUDA driver found ({_reason(e)})"
        return
    try:
        count = int(_call(driver_mod.cuDeviceGetCount))
    except Exception as e:
        report.missing["devices"] = f"the driver could not count devices ({_reason(e)})"
        return
    if count == 0:
        report.missing["devices"] = "the driver reports no GPU"
    attr = driver_mod.CUdevice_attribute
    for i in range(count):
        dev = _call(driver_mod.cuDeviceGet, i)
        name = _call(driver_mod.cuDeviceGetName, 256, dev)
        name = bytes(name).split(b"\0", 1)[0].decode(errors="replace")
        cc = (
            int(_call(driver_mod.cuDeviceGetAttribute,
                      attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)),
            int(_call(driver_mod.cuDeviceGetAttribute,
                      attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)),
        )
        sms = int(_call(driver_mod.cuDeviceGetAttribute,
                        attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))
        report.devices.append(Device(i, name, cc, sms, None, None))


def _find_nvrtc(report: Report, nvrtc_mod) -> None:
    try:
        major, minor = _call(nvrtc_mod.nvrtcVersion)
        report.nvrtc = int(major) * 1000 + int(minor) * 10
        report.nvrtc_archs = tuple(int(a) for a in _call(nvrtc_mod.nvrtcGetSupportedArchs))
    except Exception as e:
        report.missing["nvrtc"] = f"NVRTC could not be loaded ({_reason(e)})"


def _find_library(report: Report, part: str, libname: str) -> None:
    try:
        from cuda import pathfinder

        setattr(report, part, pathfinder.load_nvidia_dynamic_lib(libname).abs_path)
    except Exception as e:
        report.missing[part] = f"not found ({_reason(e)})"


def _plan_devices(report: Report) -> None:
    planned = []
    for d in report.devices:
        try:
            p = policy.plan(report.driver, report.nvrtc, report.nvrtc_archs, d.cc)
            planned.append(Device(d.ordinal, d.name, d.cc, d.sm_count, p, None))
        except policy.Incompatible as e:
            planned.append(Device(d.ordinal, d.name, d.cc, d.sm_count, None, f"gpu({d.ordinal}): {e}"))
    report.devices = planned


def find_with(driver_mod, nvrtc_mod, libraries: bool = True) -> Report:
    """The report for the given ``cuda.bindings`` driver and NVRTC modules (tests pass
    stand-ins); ``libraries`` also looks for cuBLAS and cuDNN."""
    report = Report()
    _find_driver(report, driver_mod)
    _find_nvrtc(report, nvrtc_mod)
    if libraries:
        _find_library(report, "cublas", "cublas")
        _find_library(report, "cudnn", "cudnn")
    _plan_devices(report)
    return report


@functools.lru_cache(maxsize=1)
def find() -> Report:
    """What this process can use, found once."""
    try:
        import cuda.bindings
        from cuda.bindings import driver, nvrtc
    except Exception as e:
        report = Report()
        report.missing["bindings"] = (
            f"cuda-bindings is not installed ({_reason(e)}): pip install rsmx[cuda13] "
            "(or rsmx[cuda12] for drivers older than 580)"
        )
        return report
    report = find_with(driver, nvrtc)
    report.bindings = getattr(cuda.bindings, "__version__", "unknown")
    return report

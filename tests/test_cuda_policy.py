"""The CUDA compatibility policy, case by case, and what discovery makes of a driver and
NVRTC (real when installed, stand-ins otherwise)."""

import types

import pytest
from rsmx.cuda import discover, policy
from rsmx.cuda.policy import Incompatible, Plan

# Choices made from versions and names; no engine op runs.
pytestmark = pytest.mark.engine_free

NVRTC13 = (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)
NVRTC12 = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121)


@pytest.mark.parametrize(
    "driver, nvrtc, archs, cc, want",
    [
        (13000, 13000, NVRTC13, (9, 0), Plan("cubin", "sm_90")),
        (13000, 13050, NVRTC13, (8, 0), Plan("cubin", "sm_80")),
        (13000, 12090, NVRTC12, (7, 0), Plan("cubin", "sm_70")),
        (12040, 12090, NVRTC12, (9, 0), Plan("cubin", "sm_90")),
        # A device newer than NVRTC knows: PTX for NVRTC's newest arch below it, only
        # when the driver can read that PTX.
        (13000, 13000, NVRTC13, (12, 5), Plan("ptx", "compute_121")),
        (12090, 12040, (75, 80, 90), (10, 0), Plan("ptx", "compute_90")),
    ],
)
def test_plans(driver, nvrtc, archs, cc, want):
    assert policy.plan(driver, nvrtc, archs, cc) == want


@pytest.mark.parametrize(
    "driver, nvrtc, archs, cc, words",
    [
        (None, 13000, NVRTC13, (9, 0), "no CUDA driver"),
        (11080, 12090, NVRTC12, (8, 0), "CUDA 12 or newer"),
        (12080, None, (), (9, 0), "rsmx[cuda12]"),
        (13000, None, (), (9, 0), "rsmx[cuda13]"),
        (12080, 13000, NVRTC13, (9, 0), "rsmx[cuda12]"),
        (13000, 13000, NVRTC13, (7, 0), "oldest: sm_75"),
        (13000, 13050, NVRTC13, (12, 5), "too new for this driver"),
    ],
)
def test_refusals_say_why_and_what_to_install(driver, nvrtc, archs, cc, words):
    with pytest.raises(Incompatible, match=words.replace("[", r"\[").replace("]", r"\]")):
        policy.plan(driver, nvrtc, archs, cc)


class Ok(int):
    """A bindings status of success."""


def fake_driver(devices, version=13000):
    """A stand-in for ``cuda.bindings.driver`` with the given ``(name, cc, sms)``."""
    attr = types.SimpleNamespace(
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor",
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="sms",
    )

    def attribute(which, dev):
        name, cc, sms = devices[dev]
        return Ok(0), {"major": cc[0], "minor": cc[1], "sms": sms}[which]

    return types.SimpleNamespace(
        CUdevice_attribute=attr,
        cuInit=lambda flags: (Ok(0),),
        cuDriverGetVersion=lambda: (Ok(0), version),
        cuDeviceGetCount=lambda: (Ok(0), len(devices)),
        cuDeviceGet=lambda i: (Ok(0), i),
        cuDeviceGetName=lambda n, dev: (Ok(0), devices[dev][0].encode() + b"\0" * 4),
        cuDeviceGetAttribute=attribute,
    )


def no_driver():
    def fail(*_):
        raise RuntimeError("Failed to dlopen libcuda.so.1")

    return types.SimpleNamespace(cuInit=fail)


def fake_nvrtc(version=(13, 0), archs=NVRTC13):
    return types.SimpleNamespace(
        nvrtcVersion=lambda: (Ok(0), *version),
        nvrtcGetSupportedArchs=lambda: (Ok(0), list(archs)),
    )


def test_no_driver_means_no_gpu_and_says_so():
    r = discover.find_with(no_driver(), fake_nvrtc(), libraries=False)
    assert r.usable == [] and r.devices == []
    assert "no CUDA driver found" in r.why_unusable()
    assert "libcuda" in r.why_unusable()
    assert r.nvrtc == 13000


def test_devices_are_planned_one_by_one():
    devices = [("H100", (9, 0), 132), ("V100", (7, 0), 80)]
    r = discover.find_with(fake_driver(devices), fake_nvrtc(), libraries=False)
    assert [d.name for d in r.devices] == ["H100", "V100"]
    assert r.devices[0].plan == Plan("cubin", "sm_90") and r.devices[0].sm_count == 132
    assert [d.ordinal for d in r.usable] == [0]
    assert "gpu(1)" in r.devices[1].problem and "oldest: sm_75" in r.devices[1].problem


def test_an_old_driver_with_new_nvrtc_suggests_the_cuda12_extra():
    r = discover.find_with(fake_driver([("A100", (8, 0), 108)], version=12040), fake_nvrtc(),
                           libraries=False)
    assert r.usable == []
    assert "rsmx[cuda12]" in r.why_unusable()


def test_this_machine_is_described_without_raising():
    # CI has the pinned bindings and NVRTC and no driver.
    r = discover.find()
    assert r.bindings is not None and r.nvrtc is not None and 90 in r.nvrtc_archs
    text = __import__("rsmx.cuda", fromlist=["diagnose"]).diagnose()
    assert "nvrtc" in text and "usable GPUs" in text

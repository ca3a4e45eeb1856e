"""Every embedded CUDA module compiles with NVRTC for sm_90, sm_80 and sm_75 with no
warnings, no spills and no stack frame beyond those listed, and holds every kernel its instantiation macros
name; the compile cache serves a second process and recompiles a damaged entry."""

import os
import re
import subprocess
import sys

import pytest
from rsmx.cuda import build, elf, nvrtc
from rsmx.cuda.cache import KernelCache

# NVRTC compiles the sources here; no engine op runs.
pytestmark = pytest.mark.engine_free

ARCHS = ["sm_90", "sm_80", "sm_75"]
DTYPES = {
    "ALL": ["f32", "f64", "f16", "u8", "i8", "i32", "i64"],
    "FLOAT": ["f32", "f64", "f16"],
    "NUM": ["f32", "f64", "f16", "u8", "i8", "i32", "i64"],
    "REAL": ["f32", "f64"],
}
#: Kernels allowed a stack frame, with its most bytes: the trigonometric functions'
#: reduction of large arguments keeps a small array on the stack.
# The slow paths of double-precision log, cos and friends keep a small stack frame.
STACK_ALLOWED = {"unary": 64, "random_normal": 64, "sample": 64, "random_dist": 64}


def expected_kernels(source: str) -> set[str]:
    """The `extern "C"` names the module's `RSMX_DTYPE_<SET>(X, kernel)` lines make."""
    kernels = re.findall(r"^RSMX_DTYPE_(ALL|FLOAT|NUM|REAL)\(\w+, (\w+)\)", source, re.M)
    return {f"{k}_{d}" for dset, k in kernels for d in DTYPES[dset]}


@pytest.fixture(scope="module")
def sources():
    return build.sources()


def test_sources_are_embedded(sources):
    headers, modules = sources
    assert "common.cuh" in headers and {"init", "elemwise"} <= set(modules)
    for name, text in modules.items():
        assert expected_kernels(text), f"{name} instantiates no kernel"


@pytest.mark.parametrize("arch", ARCHS)
def test_every_module_compiles_cleanly(sources, arch):
    headers, modules = sources
    for name, text in modules.items():
        c = nvrtc.compile_source(text, f"{name}.cu", arch, headers)
        assert c.warnings == [], f"{name} for {arch}: {c.warnings}"
        assert expected_kernels(text) <= elf.function_names(c.code), name
        for kernel in expected_kernels(text):
            r = c.resources[kernel]
            assert (r.spill_stores, r.spill_loads) == (0, 0), (kernel, r)
            allowed = STACK_ALLOWED.get(kernel.rsplit("_", 1)[0], 0)
            assert r.stack_frame <= allowed, (kernel, r)
            assert r.registers <= 64, (kernel, r)


def test_a_broken_source_reports_nvrtcs_log():
    with pytest.raises(nvrtc.CompileError, match="undefined"):
        nvrtc.compile_source('extern "C" __global__ void k() { undefined_thing(); }', "bad.cu", "sm_90")


def test_ptxas_report_is_read_per_kernel():
    log = (
        "ptxas info    : Compiling entry function 'a_f32' for 'sm_90'\n"
        "ptxas info    : Function properties for a_f32\n"
        "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem\n"
        "ptxas info    : Compiling entry function 'b_f32' for 'sm_90'\n"
        "ptxas info    : Used 12 registers\n"
    )
    r = nvrtc.parse_resources(log)
    assert r["a_f32"] == nvrtc.Resources(40, 8, 4, 4, 1024)
    assert r["b_f32"] == nvrtc.Resources(12, 0, 0, 0, 0)


def test_elf_reader_refuses_other_files():
    with pytest.raises(ValueError):
        elf.function_names(b"not an elf file at all")


CHILD = (
    "from rsmx.cuda import build\n"
    "from rsmx.cuda.cache import KernelCache\n"
    "c = KernelCache()\n"
    "build.compile_all('sm_90', c)\n"
    "print(c.compiles, c.hits, c.corrupt)\n"
)


def run_child(cache_dir):
    env = dict(os.environ, RSMX_CUDA_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         check=True)
    return tuple(int(x) for x in out.stdout.split())


def test_a_second_process_compiles_nothing_and_damage_is_recompiled(tmp_path, sources):
    n = len(sources[1])
    assert run_child(tmp_path) == (n, 0, 0)
    assert run_child(tmp_path) == (0, n, 0)
    entry = next(tmp_path.glob("*.bin"))
    entry.write_bytes(entry.read_bytes()[:-10])
    assert run_child(tmp_path) == (1, n - 1, 1)
    assert run_child(tmp_path) == (0, n, 0)


def test_the_key_covers_every_part():
    base = dict(source="s", headers={"h": "x"}, options=("-a",), arch="sm_90", nvrtc="13.0")
    keys = {build.key(**base)}
    for part, other in [("source", "t"), ("headers", {"h": "y"}), ("options", ("-b",)),
                        ("arch", "sm_80"), ("nvrtc", "13.5")]:
        keys.add(build.key(**dict(base, **{part: other})))
    assert len(keys) == 6


def test_a_disabled_cache_writes_nothing(tmp_path):
    c = KernelCache(tmp_path, enabled=False)
    assert c.get_or_compile("k", lambda: b"code") == b"code"
    assert c.get_or_compile("k", lambda: b"code") == b"code"
    assert (c.compiles, c.hits) == (2, 0) and not list(tmp_path.iterdir())

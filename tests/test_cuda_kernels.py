"""rsmx's CUDA kernels run on the host: each module is compiled by g++ with the emulation
header in ``tests/cuda/host`` and launched with the argument array ``cuLaunchKernel``
takes. Every kernel, for every dtype, must match numpy on fresh inputs of awkward sizes
with poisoned outputs, and give the same bits whatever order a block's threads run in;
a kernel with a missing barrier must be caught by that order check."""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rsmx.cuda import build

ROOT = Path(__file__).resolve().parent.parent
HOST = ROOT / "tests" / "cuda" / "host"
ORDERS = {"forward": 0, "reverse": 1, "shuffled": 2}
SIZES = [0, 1, 31, 33, 257, 100003]
DTYPES = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16, "u8": np.uint8,
    "i8": np.int8, "i32": np.int32, "i64": np.int64,
}
BLOCK = 256


class HostModule:
    """A ``.cu`` module built for the host; ``launch`` runs one of its kernels."""

    def __init__(self, lib: ctypes.CDLL, kernels: list[str]):
        self.lib = lib
        self.kernels = kernels
        self.lib.rsmx_host_launch.restype = ctypes.c_int
        self.lib.rsmx_host_launch.argtypes = [
            ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint,
        ]

    def launch(self, name: str, grid: int, block: int, args: list, order: str = "forward",
               smem: int = 0, seed: int = 0) -> None:
        holders = []
        for a in args:
            if isinstance(a, np.ndarray):
                holders.append(ctypes.c_void_p(a.ctypes.data))
            else:
                holders.append(a)
        params = (ctypes.c_void_p * len(holders))(
            *[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders]
        )
        rc = self.lib.rsmx_host_launch(name.encode(), grid, block, smem, params,
                                        ORDERS[order], seed)
        assert rc == 0, f"no kernel {name}"


def build_host_module(source: str, name: str, workdir: Path) -> HostModule:
    """Compiles ``source`` with the emulation header and a table of its kernels."""
    headers, _ = build.sources()
    for hname, text in headers.items():
        (workdir / hname).write_text(text)
    (workdir / f"{name}.cu").write_text(source)
    flags = ["-std=c++17", "-O1", f"-I{workdir}", f"-I{HOST}", "-include", "cuda_host.h"]
    pre = subprocess.run(["g++", *flags, "-x", "c++", "-E", str(workdir / f"{name}.cu")],
                         capture_output=True, text=True, check=True).stdout
    kernels = re.findall(r'extern "C" __attribute__\(\(used\)\) void (\w+)\s*\(', pre)
    table = workdir / f"{name}_host.cpp"
    table.write_text(
        f'#include "{name}.cu"\n'
        "#include <cstring>\n"
        'extern "C" int rsmx_host_launch(const char* name, unsigned grid, unsigned block,\n'
        "    std::size_t smem, void** params, int order, unsigned seed) {\n"
        + "".join(
            f'  if (std::strcmp(name, "{k}") == 0) return rsmx_host::launch(\n'
            f"      [](void** p) {{ rsmx_host::call_with({k}, p); }}, dim3(grid), dim3(block),\n"
            "      smem, params, order, seed);\n"
            for k in kernels
        )
        + "  return -1;\n}\n"
    )
    lib = workdir / f"{name}.so"
    subprocess.run(["g++", *flags, "-shared", "-fPIC", "-o", str(lib), str(table)],
                   capture_output=True, text=True, check=True)
    return HostModule(ctypes.CDLL(str(lib)), kernels)


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    """Every embedded module, built for the host once per test run."""
    _, sources = build.sources()
    out = {}
    for name, text in sources.items():
        out[name] = build_host_module(text, name, tmp_path_factory.mktemp(name))
    return out


def poisoned(n: int, dtype) -> np.ndarray:
    """An output the kernel must overwrite: NaN for floats, 0xCD bytes otherwise."""
    if np.issubdtype(dtype, np.floating):
        return np.full(n, np.nan, dtype=dtype)
    return np.frombuffer(b"\xcd" * (n * np.dtype(dtype).itemsize), dtype=dtype).copy()


def grid_for(n: int) -> int:
    # Fewer blocks than items, so the grid-stride loops go round more than once.
    return max(1, min((n + BLOCK - 1) // BLOCK, 8))


def check_orders(module, kernel, inputs, rest, out_shape, dtype) -> np.ndarray:
    """Runs ``kernel(out, *inputs, size, *rest)`` in every thread order; all must agree."""
    results = []
    for order in ORDERS:
        out = poisoned(int(np.prod(out_shape)), dtype)
        args = [out, *inputs, ctypes.c_longlong(out.size), *rest]
        module.launch(kernel, grid_for(out.size), BLOCK, args, order, seed=out.size)
        results.append(out)
    assert len({r.tobytes() for r in results}) == 1, kernel
    return results[0].reshape(out_shape)


def close(got, want, rtol, what):
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=rtol, equal_nan=True, err_msg=what)


def test_every_kernel_of_a_module_is_in_its_table(modules):
    assert len(modules["init"].kernels) == 3 * len(DTYPES)
    assert sorted(modules["elemwise"].kernels) == sorted(
        [f"unary_{d}" for d in FLOATS]
        + [f"{k}_{d}" for k in ("binary", "binary_scalar", "broadcast") for d in DTYPES]
    )


@pytest.mark.parametrize("suffix", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_fill(modules, suffix, n):
    dtype = DTYPES[suffix]
    value = float(np.random.default_rng(n).integers(1, 100)) / (1 if suffix in "u8 i8 i32 i64" else 8)
    got = check_orders(modules["init"], f"fill_{suffix}", [], [ctypes.c_double(value)], (n,), dtype)
    np.testing.assert_array_equal(got, np.full(n, value, dtype=dtype))


@pytest.mark.parametrize("suffix", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_arange(modules, suffix, n):
    dtype = DTYPES[suffix]
    start, step, repeat = 2.0, (0.5 if suffix in ("f32", "f64", "f16") else 3.0), 2
    got = check_orders(modules["init"], f"arange_{suffix}", [],
                       [ctypes.c_double(start), ctypes.c_double(step), ctypes.c_longlong(repeat)],
                       (n,), dtype)
    want = (start + (np.arange(n) // repeat) * step).astype(dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("suffix", DTYPES)
@pytest.mark.parametrize("rows, cols, k", [(1, 1, 0), (5, 7, 2), (33, 31, -3), (4, 4, 9)])
def test_eye(modules, suffix, rows, cols, k):
    dtype = DTYPES[suffix]
    results = []
    for order in ORDERS:
        out = poisoned(rows * cols, dtype)
        modules["init"].launch(f"eye_{suffix}", 2, BLOCK,
                               [out, ctypes.c_longlong(rows), ctypes.c_longlong(cols),
                                ctypes.c_longlong(k)], order, seed=7)
        results.append(out.tobytes())
    assert len(set(results)) == 1
    got = np.frombuffer(results[0], dtype=dtype).reshape(rows, cols)
    np.testing.assert_array_equal(got, np.eye(rows, cols, k, dtype=dtype))


def test_half_conversion_rounds_as_numpy(modules):
    # Values near float16's edges: subnormals, ties, overflow to infinity.
    values = np.array([0.0, -0.0, 1.0, 65504.0, 65520.0, 1e-8, 6e-8, 3e-5, 1 + 2**-11,
                       1 + 3 * 2**-11, -2.5, 1e5, np.inf, -np.inf], dtype=np.float64)
    for v in values:
        out = poisoned(1, np.float16)
        modules["init"].launch("fill_f16", 1, 1, [out, ctypes.c_longlong(1), ctypes.c_double(v)])
        with np.errstate(over="ignore"):
            want = np.float16(np.float32(v))
        assert out.tobytes() == want.tobytes(), v


def op_codes(enum: str) -> dict[str, int]:
    """The lower-case name of each code in ``enum rsmx_<enum>``, in order."""
    text = build.sources()[1]["elemwise"]
    body = re.search(rf"enum rsmx_{enum} \{{(.*?)\}};", text, re.S).group(1)
    prefix = f"RSMX_{enum.upper()}_"
    return {n.strip().removeprefix(prefix).lower(): c for c, n in enumerate(body.split(","))}


UNARY = {("_copy" if n == "copy" else n): c for n, c in op_codes("unary").items()}
BINARY = op_codes("binary")
SCALAR_NAMES = {"add": "_plus_scalar", "sub": "_minus_scalar", "mul": "_mul_scalar",
                "div": "_div_scalar"}
REVERSIBLE = {"sub": "_rminus_scalar", "div": "_rdiv_scalar", "mod": "_rmod_scalar",
              "power": "_rpower_scalar"}
FLOATS = {"f32": (np.float32, 1e-5), "f64": (np.float64, 1e-12), "f16": (np.float16, 2e-3)}


def unary_f32_on_host(module, code, x, out, add=False):
    module.launch("unary_f32", grid_for(len(x)), BLOCK,
                  [out, x, ctypes.c_longlong(len(x)), ctypes.c_int(code), ctypes.c_int(add),
                   ctypes.c_double(0), ctypes.c_double(0)])


@pytest.mark.parametrize("suffix", FLOATS)
@pytest.mark.parametrize("op", UNARY)
def test_unary_matches_the_cpu_operator(modules, op, suffix):
    import rsmx as mx

    dtype, rtol = FLOATS[suffix]
    rng = np.random.default_rng(UNARY[op])
    for n in (1, 33, 1000):
        x = rng.uniform(-3, 3, n).astype(dtype)
        x[: n // 3] = np.round(x[: n // 3] * 2) / 2  # halves, for the rounding operators
        kw = {"a_min": -1.5, "a_max": 2.0} if op == "clip" else {}
        a = mx.nd.array(x, dtype=dtype)
        want = (a.copy() if op == "_copy" else getattr(mx.nd, op)(a, **kw)).asnumpy()
        rest = [ctypes.c_int(UNARY[op]), ctypes.c_int(0), ctypes.c_double(-1.5),
                ctypes.c_double(2.0)]
        got = check_orders(modules["elemwise"], f"unary_{suffix}", [x], rest, (n,), dtype)
        close(got, want, rtol, f"{op} n={n}")


def test_unary_adds_into_its_output_and_runs_in_place(modules):
    x = np.linspace(-2, 2, 257).astype(np.float32)
    out = np.full_like(x, 0.5)
    unary_f32_on_host(modules["elemwise"], UNARY["square"], x, out, add=True)
    np.testing.assert_allclose(out, 0.5 + x * x, rtol=1e-6)
    y = x.copy()
    unary_f32_on_host(modules["elemwise"], UNARY["relu"], y, y)
    np.testing.assert_array_equal(y, np.maximum(x, 0))


INTS = {s: (t, 0) for s, t in DTYPES.items() if s in ("u8", "i8", "i32", "i64")}


def operands(dtype, shape, seed):
    """Small integers (equalities, zero divisors) and fractions, some NaN; for integer
    dtypes, small values and the type's extremes (wrapping)."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -3), 4, shape).astype(dtype)
        flat = x.reshape(-1)
        flat[::7] = info.max
        flat[3::11] = info.min
        return x
    x = rng.integers(-3, 4, shape).astype(np.float64)
    x[..., ::2] += rng.uniform(-0.5, 0.5, x[..., ::2].shape)
    flat = x.reshape(-1)
    flat[::17] = np.nan
    return x.astype(dtype)


@pytest.mark.parametrize("suffix", [*FLOATS, *INTS])
@pytest.mark.parametrize("op", BINARY)
def test_binary_matches_the_cpu_operator(modules, op, suffix):
    import rsmx as mx

    dtype, rtol = {**FLOATS, **INTS}[suffix]
    cpu = getattr(mx.nd, f"broadcast_{op}")
    code = BINARY[op]
    for n in (1, 33, 1000):
        a, b = operands(dtype, (n,), n), operands(dtype, (n,), n + 1)
        got = check_orders(modules["elemwise"], f"binary_{suffix}", [a, b],
                           [ctypes.c_int(code), ctypes.c_int(0)], (n,), dtype)
        close(got, cpu(mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype)).asnumpy(), rtol,
              f"{op} n={n}")


class Broadcast(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int), ("shape", ctypes.c_longlong * 8),
                ("lhs_stride", ctypes.c_longlong * 8), ("rhs_stride", ctypes.c_longlong * 8)]


def broadcast_arg(lshape, rshape) -> tuple[Broadcast, tuple[int, ...]]:
    out = np.broadcast_shapes(lshape, rshape)
    b = Broadcast()
    b.ndim = len(out)
    for shape, strides in ((lshape, b.lhs_stride), (rshape, b.rhs_stride)):
        shape = (1,) * (len(out) - len(shape)) + tuple(shape)
        step = 1
        for d in reversed(range(len(out))):
            strides[d] = 0 if shape[d] == 1 else step
            step *= shape[d]
    for d, s in enumerate(out):
        b.shape[d] = s
    return b, out


@pytest.mark.parametrize("suffix", [*FLOATS, *INTS])
@pytest.mark.parametrize("op", ["add", "sub", "div", "power", "maximum", "greater_equal"])
@pytest.mark.parametrize("lshape, rshape", [((3, 1, 5), (1, 4, 5)), ((4, 1), (2, 4, 3)),
                                            ((33,), (1,)), ((2, 3, 4, 5), (2, 3, 4, 5))])
def test_broadcast_matches_the_cpu_operator(modules, op, suffix, lshape, rshape):
    import rsmx as mx

    dtype, rtol = {**FLOATS, **INTS}[suffix]
    a, b = operands(dtype, lshape, 1), operands(dtype, rshape, 2)
    arg, out_shape = broadcast_arg(lshape, rshape)
    got = check_orders(modules["elemwise"], f"broadcast_{suffix}", [a, b],
                       [arg, ctypes.c_int(BINARY[op]), ctypes.c_int(0)], out_shape, dtype)
    want = getattr(mx.nd, f"broadcast_{op}")(mx.nd.array(a, dtype=dtype),
                                              mx.nd.array(b, dtype=dtype)).asnumpy()
    close(got, want, rtol, f"{op} {lshape} {rshape}")


@pytest.mark.parametrize("suffix", [*FLOATS, *INTS])
@pytest.mark.parametrize("op", BINARY)
def test_binary_scalar_matches_the_cpu_operator(modules, op, suffix):
    import rsmx as mx

    dtype, rtol = {**FLOATS, **INTS}[suffix]
    x = operands(dtype, (257,), 5)
    cases = [(0, SCALAR_NAMES.get(op, f"_{op}_scalar"))]
    if op in REVERSIBLE:
        cases.append((1, REVERSIBLE[op]))
    # 0.1 is inexact in every float type; 300 saturates the small integer types.
    for s in (2.0, -1.5, 0.0, 0.1, 300.0):
        for reverse, name in cases:
            rest = [ctypes.c_int(BINARY[op]), ctypes.c_int(reverse), ctypes.c_int(0),
                    ctypes.c_double(s)]
            got = check_orders(modules["elemwise"], f"binary_scalar_{suffix}", [x], rest, (257,),
                               dtype)
            want = getattr(mx.nd._internal, name)(mx.nd.array(x, dtype=dtype), scalar=s).asnumpy()
            close(got, want, rtol, f"{name} {s}")


@pytest.fixture(scope="module")
def block_sum(tmp_path_factory):
    text = (HOST / "block_sum.cu").read_text()
    return build_host_module(text, "block_sum", tmp_path_factory.mktemp("block_sum"))


def sums(module: HostModule, kernel: str, x: np.ndarray) -> dict[str, np.ndarray]:
    blocks = (len(x) + BLOCK - 1) // BLOCK
    out = {}
    for order in ORDERS:
        o = poisoned(blocks, np.float32)
        module.launch(kernel, blocks, BLOCK, [x, o, ctypes.c_longlong(len(x))], order, seed=3)
        out[order] = o
    return out


def test_a_correct_block_sum_agrees_in_every_order(block_sum):
    x = np.random.default_rng(0).standard_normal(100003).astype(np.float32)
    got = sums(block_sum, "block_sum_f32", x)
    assert len({v.tobytes() for v in got.values()}) == 1
    padded = np.zeros(len(got["forward"]) * BLOCK, np.float64)
    padded[: len(x)] = x
    np.testing.assert_allclose(got["forward"], padded.reshape(-1, BLOCK).sum(axis=1), rtol=1e-5,
                               atol=1e-4)


def test_a_missing_barrier_is_caught(block_sum):
    x = np.random.default_rng(1).standard_normal(4096).astype(np.float32)
    got = sums(block_sum, "block_sum_racy_f32", x)
    assert len({v.tobytes() for v in got.values()}) > 1, "the race went unnoticed"

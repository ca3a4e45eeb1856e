"""rsmx's CUDA kernels run on the host: each module is compiled by g++ with the emulation
header (``rsmx.cuda.host``) and launched with the argument array ``cuLaunchKernel``
takes. Every kernel, for every dtype, must match numpy on fresh inputs of awkward sizes
with poisoned outputs, and give the same bits whatever order a block's threads run in;
a kernel with a missing barrier must be caught by that order check."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rsmx.cuda import build, host

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

    def __init__(self, path: Path, kernels: list[str]):
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.kernels = kernels
        self.lib.rsmx_host_launch.restype = ctypes.c_int
        self.lib.rsmx_host_launch.argtypes = [
            ctypes.c_char_p, *[ctypes.c_uint] * 6, ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint,
        ]
        self.lib.rsmx_host_param_sizes.restype = ctypes.c_int
        self.lib.rsmx_host_param_sizes.argtypes = [
            ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_int,
        ]

    def try_launch(self, name: str, grid, block, args: list, order: str = "forward",
                   smem: int = 0, seed: int = 0) -> int:
        """``rsmx_host_launch``'s code; ``grid`` and ``block`` are ints or 3-tuples."""
        holders = []
        for a in args:
            if isinstance(a, np.ndarray):
                holders.append(ctypes.c_void_p(a.ctypes.data))
            else:
                holders.append(a)
        params = (ctypes.c_void_p * max(1, len(holders)))(
            *[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders]
        )
        g = grid if isinstance(grid, tuple) else (grid, 1, 1)
        b = block if isinstance(block, tuple) else (block, 1, 1)
        return self.lib.rsmx_host_launch(name.encode(), *g, *b, smem, params, ORDERS[order],
                                         seed)

    def launch(self, name: str, grid, block, args: list, order: str = "forward",
               smem: int = 0, seed: int = 0) -> None:
        rc = self.try_launch(name, grid, block, args, order, smem, seed)
        assert rc == 0, f"launch of {name} failed: {rc}"

    def param_sizes(self, name: str) -> list[int] | None:
        sizes = (ctypes.c_size_t * 32)()
        n = self.lib.rsmx_host_param_sizes(name.encode(), sizes, 32)
        return None if n < 0 else list(sizes[:n])


def build_host_module(source: str, name: str, workdir: Path) -> HostModule:
    """Compiles ``source`` with the emulation header and a table of its kernels."""
    headers, _ = build.sources()
    return HostModule(host.build_module(name, source, headers, workdir),
                      host.kernel_names(name, source, headers))


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    """Every embedded module, built for the host once per test run."""
    headers, sources = build.sources()
    paths = host.build_all(tmp_path_factory.mktemp("host-cache"))
    return {name: HostModule(paths[name], host.kernel_names(name, text, headers))
            for name, text in sources.items()}


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
        [f"unary_{d}" for d in DTYPES]
        + [f"{k}_{d}" for k in ("binary", "binary_scalar", "broadcast") for d in DTYPES]
    )
    for m in modules.values():
        for k in m.kernels:
            assert m.param_sizes(k) is not None, k
        assert m.param_sizes("no_such_kernel") is None
        assert m.try_launch("no_such_kernel", 1, 1, []) == -1


def test_the_table_knows_each_parameters_size(modules):
    e = modules["elemwise"]
    assert e.param_sizes("binary_f16") == [8, 8, 8, 8, 4, 4]
    assert e.param_sizes("broadcast_i8") == [8, 8, 8, 8, ctypes.sizeof(Broadcast), 4, 4]
    assert e.param_sizes("unary_f64") == [8, 8, 8, 4, 4, 8, 8]
    assert modules["init"].param_sizes("fill_u8") == [8, 8, 8]


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
        # The kernel's two parameters are clip's bounds or hard_sigmoid's slope and bias.
        kw = {"clip": {"a_min": -1.5, "a_max": 2.0},
              "hard_sigmoid": {"alpha": -1.5, "beta": 2.0}}.get(op, {})
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


def shifted(x: np.ndarray, by: int) -> np.ndarray:
    """A copy of ``x`` whose data starts ``by`` elements past a 64-byte boundary."""
    room = np.empty(x.size + 64 // x.itemsize + by, x.dtype)
    start = (-room.ctypes.data % 64) // x.itemsize + by
    view = room[start:start + x.size]
    view[...] = x
    return view


@pytest.mark.parametrize("suffix", ["f32", "f64", "f16", "i32", "u8"])
def test_binary_kernels_agree_on_aligned_and_unaligned_memory_adding_and_in_place(modules,
                                                                                  suffix):
    # Aligned operands go 16 bytes at a time, the rest one element at a time; each way
    # gives the same bits, also when adding into the output or writing over an input.
    module = modules["elemwise"]
    dtype = {**FLOATS, **INTS}[suffix][0]
    mul, add = ctypes.c_int(BINARY["mul"]), ctypes.c_int(BINARY["add"])
    for n in (1, 7, 31, 33, 257, 1003):
        a, b = operands(dtype, (n,), n), operands(dtype, (n,), n + 1)
        start = operands(dtype, (n,), n + 2)
        results = []
        for by in (0, 1, 3):
            x, y, out = shifted(a, by), shifted(b, by), shifted(start, by)
            module.launch(f"binary_{suffix}", grid_for(n), BLOCK,
                          [out, x, y, ctypes.c_longlong(n), mul, ctypes.c_int(1)], "forward")
            module.launch(f"binary_scalar_{suffix}", grid_for(n), BLOCK,
                          [x, x, ctypes.c_longlong(n), add, ctypes.c_int(0), ctypes.c_int(0),
                           ctypes.c_double(2.0)], "reverse")
            module.launch(f"binary_{suffix}", grid_for(n), BLOCK,
                          [y, x, y, ctypes.c_longlong(n), add, ctypes.c_int(0)], "shuffled")
            results.append((out.tobytes(), x.tobytes(), y.tobytes()))
        assert len(set(results)) == 1, (suffix, n)
        # Half precision computes in single precision and rounds once.
        wide = np.float32 if dtype == np.float16 else dtype
        with np.errstate(all="ignore"):
            want = (start.astype(wide) + a.astype(wide) * b.astype(wide)).astype(dtype)
        np.testing.assert_array_equal(np.frombuffer(results[0][0], dtype), want)


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


def test_block_sums_on_several_os_threads_at_once_keep_their_shared_memory_apart(block_sum):
    # ctypes lets go of the GIL during the call, so the launches overlap.
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(64 * BLOCK).astype(np.float32) for _ in range(4)]

    def run(i):
        return sums(block_sum, "block_sum_f32", xs[i])["shuffled"]

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(run, [0, 1, 2, 3] * 3))
    for i, g in enumerate(got):
        want = xs[i % 4].astype(np.float64).reshape(-1, BLOCK).sum(axis=1)
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def barriers(tmp_path_factory):
    text = (HOST / "barriers.cu").read_text()
    return build_host_module(text, "barriers", tmp_path_factory.mktemp("barriers"))


def test_a_kernel_that_reached_no_barrier_runs_without_fibers_until_it_does(barriers):
    out = np.zeros(2 * 64, np.int32)
    want = np.tile(np.arange(64, dtype=np.int32), 2)
    # The first launch runs with fibers and learns that no thread reached a barrier.
    barriers.launch("maybe_sync", 2, 64, [out, ctypes.c_int(0)])
    np.testing.assert_array_equal(out, want)
    out[:] = 0
    barriers.launch("maybe_sync", 2, 64, [out, ctypes.c_int(0)])
    np.testing.assert_array_equal(out, want)
    # Threads run as plain calls now, so a barrier cannot be honoured: the launch fails...
    assert barriers.try_launch("maybe_sync", 2, 64, [out, ctypes.c_int(1)]) == 1
    # ...and the kernel runs with fibers from then on.
    out[:] = 0
    barriers.launch("maybe_sync", 2, 64, [out, ctypes.c_int(1)])
    np.testing.assert_array_equal(out, want)
    # The other orders always use fibers, whatever was learnt.
    barriers.launch("maybe_sync", 2, 64, [out, ctypes.c_int(1)], "shuffled", seed=1)


def test_a_barrier_that_only_some_threads_reach_fails_the_launch(barriers):
    out = np.zeros(32, np.int32)
    for order in ORDERS:
        assert barriers.try_launch("divergent", 1, 32, [out], order) == 1


def test_bad_launch_shapes_fail_without_running(barriers):
    out = np.zeros(8, np.int32)
    assert barriers.try_launch("divergent", 0, 32, [out]) == 1
    assert barriers.try_launch("divergent", 1, (32, 0, 1), [out]) == 1
    assert barriers.try_launch("divergent", 1, (32, 32, 2), [out]) == 1
    assert not out.any()


@pytest.mark.parametrize("order", ORDERS)
def test_three_dimensional_grids_give_every_thread_its_indices(barriers, order):
    grid, block = (3, 2, 2), (4, 3, 2)
    want = np.array([(tx << 40) | (ty << 32) | (tz << 24) | (bx << 16) | (by << 8) | bz
                     for bz in range(grid[2]) for by in range(grid[1]) for bx in range(grid[0])
                     for tz in range(block[2]) for ty in range(block[1]) for tx in range(block[0])],
                    np.int64)
    for _ in range(2):  # with fibers, then (forward) without
        out = np.full(want.size, -1, np.int64)
        barriers.launch("where", grid, block, [out], order, seed=5)
        np.testing.assert_array_equal(out, want)


def test_host_libraries_are_cached_across_processes(tmp_path):
    script = ("import json, sys; from rsmx.cuda import host; "
              "print(json.dumps({k: str(v) for k, v in host.build_all(sys.argv[1]).items()}))")
    env = {k: v for k, v in os.environ.items() if k != "RSMX_CUDA_CACHE"}

    def build_in_a_new_process():
        r = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                           text=True, env=env, check=True)
        return {k: Path(v) for k, v in json.loads(r.stdout).items()}

    first = build_in_a_new_process()
    assert set(first) == set(build.sources()[1])
    stamps = {k: (p.stat().st_ino, p.stat().st_mtime_ns) for k, p in first.items()}
    assert build_in_a_new_process() == first
    assert {k: (p.stat().st_ino, p.stat().st_mtime_ns) for k, p in first.items()} == stamps
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in first.values())

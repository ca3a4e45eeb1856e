"""The reduction and softmax kernels (``reduce.cu``, ``softmax.cu``) run on the host: every
kernel and dtype against numpy in float64 (or exact integer arithmetic) on fresh inputs of
awkward sizes, with poisoned outputs, and the same bits whatever order a block's threads
run in."""

from __future__ import annotations

import ctypes
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from rsmx.cuda import build, host
from test_cuda_kernels import BLOCK, DTYPES, ORDERS, SIZES, HostModule, poisoned

# The kernels run on the host by themselves, never through the engine.
pytestmark = pytest.mark.engine_free

FLOATS = ("f32", "f64", "f16")
INTS = ("u8", "i8", "i32", "i64")
KINDS = ["sum", "mean", "prod", "max", "min", "nansum", "nanprod", "norm1", "norm2"]
CODE = {s: i for i, s in enumerate(DTYPES)}  # `enum rsmx_dtype_code` follows DTYPES' order
DIMS = 8
L = ctypes.c_longlong
# Blocks of fewer threads than the launcher's (any power of two works) keep the emulation
# quick; the largest inputs run with full blocks.
SMALL = 32


class ReduceDesc(ctypes.Structure):
    _fields_ = [("kept_ndim", ctypes.c_int), ("red_ndim", ctypes.c_int),
                ("kept_shape", L * DIMS), ("kept_stride", L * DIMS),
                ("red_shape", L * DIMS), ("red_stride", L * DIMS)]


class ReducePlan(ctypes.Structure):
    _fields_ = [("n_out", L), ("r", L), ("count", L), ("segments", L), ("cols", ctypes.c_int),
                ("kind", ctypes.c_int), ("out_dtype", ctypes.c_int), ("add", ctypes.c_int),
                ("partials", ctypes.c_int)]


class BcastDesc(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int), ("shape", L * DIMS), ("stride", L * DIMS)]


class GatherDesc(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int), ("offset", L), ("shape", L * DIMS),
                ("stride", L * DIMS)]


def host_module(name: str) -> HostModule:
    """Module ``name`` built for the host, kept in the host library cache the fake GPU
    uses (by a key over its sources), so later runs build nothing."""
    headers, sources = build.sources()
    if os.environ.get("RSMX_CUDA_CACHE", "1") == "0":
        directory = Path(tempfile.mkdtemp(prefix="rsmx-host-"))
    else:
        directory = host.default_dir()
    filename = f"{name}-{host.key(sources[name], headers)}.so"
    if not (directory / filename).is_file():
        host.build_module(name, sources[name], headers, directory, filename)
    return HostModule(directory / filename, host.kernel_names(name, sources[name], headers))


@pytest.fixture(scope="module")
def red():
    return host_module("reduce")


@pytest.fixture(scope="module")
def sm():
    return host_module("softmax")


def groups(shape, mask):
    """Neighbouring axes merged into [size, reduced, stride] groups, size-1 axes dropped."""
    out: list[list] = []
    for d, m in zip(shape, mask, strict=True):
        if d == 1:
            continue
        if out and out[-1][1] == m:
            out[-1][0] *= d
        else:
            out.append([d, m, 0])
    step = 1
    for g in reversed(out):
        g[2] = step
        step *= g[0]
    return out


def reduce_desc(shape, mask):
    d = ReduceDesc()
    gs = groups(shape, mask)
    kept = [g for g in gs if not g[1]]
    reduced = [g for g in gs if g[1]]
    d.kept_ndim, d.red_ndim = len(kept), len(reduced)
    for i, g in enumerate(kept):
        d.kept_shape[i], d.kept_stride[i] = g[0], g[2]
    for i, g in enumerate(reduced):
        d.red_shape[i], d.red_stride[i] = g[0], g[2]
    return d


def info(suffix):
    dtype = DTYPES[suffix]
    return dtype, np.iinfo(dtype) if suffix in INTS else None


def data(suffix, shape, seed, kind="sum"):
    """Random data of `shape`: small integers (some extremes), or floats with some NaN and
    negative zeros; near 1 for products."""
    rng = np.random.default_rng(seed)
    dtype, ii = info(suffix)
    n = int(np.prod(shape))
    if ii is not None:
        lo, hi = max(ii.min, -9), min(ii.max, 9)
        x = rng.integers(lo, hi + 1, n)
        if "prod" in kind:
            x = rng.choice([1, 3, -1, 5] if ii.min < 0 else [1, 3, 5, 7], n)
        elif n > 10:
            x[::11] = ii.max
            x[5::13] = ii.min
        return x.astype(dtype).reshape(shape)
    if "prod" in kind:
        x = rng.uniform(0.995, 1.005, n)
    else:
        x = rng.uniform(-4, 4, n)
        x[::5] = np.round(x[::5])
        x[3::17] = -0.0
    if kind in ("nansum", "nanprod", "max", "min") and n > 2:
        x[2::19] = np.nan
    return x.astype(dtype).reshape(shape)


def wrap(v: np.ndarray, dtype) -> np.ndarray:
    """Integers taken modulo the width of `dtype`, as wrapping arithmetic gives them."""
    return v.astype(np.uint64).astype(dtype)


def int_norm2(vals, dtype):
    """The CPU's integer 2-norm of one run of values (scaled sum of squares in the type)."""
    ii = np.iinfo(dtype)
    bits = ii.bits

    def w(v):
        v %= 1 << bits
        return v - (1 << bits) if ii.min < 0 and v >= 1 << (bits - 1) else v

    def div(a, b):
        if b == 0:
            return 0
        q = abs(a) // abs(b)
        return w(q if (a < 0) == (b < 0) else -q)

    sos = scale = 0
    for v in vals:
        v = int(v)
        if v == 0:
            continue
        a = w(-v) if v < 0 else v
        if scale < a:
            q = div(scale, a)
            sos = w(1 + sos * q * q)
            scale = a
        else:
            q = div(a, scale)
            sos = w(sos + q * q)
    r = float(scale) * np.sqrt(float(sos)) if sos >= 0 else np.nan
    return saturate(r, dtype)


def saturate(v: float, dtype) -> int:
    """`v` converted as Rust's `as` converts a float to an integer type."""
    ii = np.iinfo(dtype)
    if np.isnan(v):
        return 0
    return ii.max if v >= ii.max else ii.min if v <= ii.min else int(v)


def reference(kind, x: np.ndarray, axes: tuple, suffix: str) -> np.ndarray:
    """The CPU operator's result in float64 (floats) or exactly (integers)."""
    dtype, ii = info(suffix)
    count = int(np.prod([x.shape[a] for a in axes]))
    if ii is None:
        f = x.astype(np.float64)
        with np.errstate(all="ignore"):
            return {
                "sum": lambda: f.sum(axes), "mean": lambda: f.sum(axes) / count,
                "prod": lambda: f.prod(axes), "max": lambda: f.max(axes, initial=-np.inf),
                "min": lambda: f.min(axes, initial=np.inf), "nansum": lambda: np.nansum(f, axes),
                "nanprod": lambda: np.nanprod(f, axes), "norm1": lambda: np.abs(f).sum(axes),
                "norm2": lambda: np.sqrt((f * f).sum(axes)),
            }[kind]()
    u = x.astype(np.int64).astype(np.uint64)
    if kind in ("sum", "nansum", "mean"):
        s = wrap(u.sum(axes, dtype=np.uint64), dtype)
        if kind == "mean":
            n = min(count, ii.max)
            q = [0 if n == 0 else (int(v) // n if v >= 0 else -(-int(v) // n)) for v in s.ravel()]
            return np.array(q, dtype).reshape(s.shape)
        return s
    if kind in ("prod", "nanprod"):
        return wrap(u.prod(axes, dtype=np.uint64), dtype)
    if kind == "max":
        return x.max(axes, initial=ii.min)
    if kind == "min":
        return x.min(axes, initial=ii.max)
    if kind == "norm1":
        a = np.where(x < 0, wrap(-x.astype(np.int64).astype(np.uint64), dtype), x)
        return wrap(a.astype(np.int64).astype(np.uint64).sum(axes, dtype=np.uint64), dtype)
    moved = np.moveaxis(x, axes, list(range(x.ndim - len(axes), x.ndim)))
    kept = moved.shape[: x.ndim - len(axes)]
    flat = moved.reshape(int(np.prod(kept)), -1)
    return np.array([int_norm2(row, dtype) for row in flat], dtype).reshape(kept)


def block_for(size: int) -> int:
    return BLOCK if size > 50000 else SMALL


def run_reduce(red, kind, x, mask, cols, suffix, out_dtype=None, out=None, add=0):
    """Launches reduce_<suffix> in every order; returns the (agreed) output."""
    out_suffix = out_dtype or suffix
    kept = [d for d, m in zip(x.shape, mask, strict=True) if not m]
    n_out = int(np.prod(kept))
    r = int(np.prod([d for d, m in zip(x.shape, mask, strict=True) if m]))
    desc = reduce_desc(x.shape, mask)
    results = []
    for order in ORDERS:
        o = poisoned(n_out, DTYPES[out_suffix]) if out is None else out.copy()
        blocks = max(1, min(-(-n_out // cols), 3))  # fewer blocks than tiles: the tile loop turns
        plan = ReducePlan(n_out, r, r, 1, cols, KINDS.index(kind), CODE[out_suffix], add, 0)
        red.launch(f"reduce_{suffix}", blocks, block_for(x.size), [o, x, desc, plan], order,
                   seed=n_out + r)
        results.append(o)
    assert len({v.tobytes() for v in results}) == 1, (kind, suffix, x.shape, mask, cols)
    return results[0].reshape(kept)


def tile(r: int, inner: int | None, block: int) -> int:
    """The launcher's tile width: lanes for the reduced length `r`, columns side by side
    where outputs are contiguous (`inner` of them)."""
    lanes = 1 if r <= 16 else min(block, 1 << (r - 1).bit_length())
    if inner is not None:
        return min(block, max(min(32, 1 << (inner - 1).bit_length()), block // lanes))
    return block // lanes


def cols_for(shape, mask):
    gs = groups(shape, mask)
    r = int(np.prod([g[0] for g in gs if g[1]]))
    inner = gs[-1][0] if gs and not gs[-1][1] else None
    return tile(r, inner, block_for(int(np.prod(shape))))


def check(got, want, suffix, kind, x, axes, what=""):
    if suffix in INTS:
        np.testing.assert_array_equal(got, want, err_msg=f"{kind} {what}")
        return
    rtol = {"f32": 2e-5, "f64": 1e-12, "f16": 2e-3}[suffix]
    f = np.nan_to_num(x.astype(np.float64), nan=0.0)
    scale = np.abs(f).sum(axes) if kind not in ("prod", "nanprod", "max", "min") else 0
    if kind == "norm2":
        scale = 0
    if kind == "mean":
        scale = scale / max(1, int(np.prod([x.shape[a] for a in axes])))
    if suffix == "f16":
        with np.errstate(over="ignore"):
            want = want.astype(DTYPES[suffix]).astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol,
                               atol=rtol * (np.max(scale) if np.size(scale) else 0) + 1e-30,
                               equal_nan=True, err_msg=f"{kind} {what}")


@pytest.mark.parametrize("suffix", DTYPES)
def test_full_reductions_of_every_size(red, suffix):
    for kind in KINDS:
        for n in SIZES:
            x = data(suffix, (n,), n + KINDS.index(kind), kind)
            got = run_reduce(red, kind, x, [True], cols_for((n,), [True]), suffix)
            check(got.reshape(()), reference(kind, x, (0,), suffix), suffix, kind, x, (0,),
                  f"n={n}")


@pytest.mark.parametrize("suffix", ["f32", "f64", "i32", "u8"])
def test_every_axis_pattern_and_tile_width(red, suffix):
    shape = (3, 5, 1, 7, 4)
    rng = np.random.default_rng(1)
    for bits in range(1, 1 << len(shape)):
        mask = [bool(bits >> i & 1) for i in range(len(shape))]
        axes = tuple(i for i in range(len(shape)) if mask[i])
        kind = KINDS[bits % len(KINDS)] if suffix != "f64" else ["sum", "max"][bits % 2]
        x = data(suffix, shape, bits, kind)
        widths = {cols_for(shape, mask), int(rng.choice([1, 2, 8, 32]))}
        for cols in widths:
            got = run_reduce(red, kind, x, mask, cols, suffix)
            check(got, reference(kind, x, axes, suffix), suffix, kind, x, axes,
                  f"axes={axes} cols={cols}")


def test_an_empty_reduced_axis_gives_each_kinds_identity(red):
    x = np.zeros((0, 3), np.float32)
    want = {"sum": 0, "mean": np.nan, "prod": 1, "max": -np.inf, "min": np.inf, "nansum": 0,
            "nanprod": 1, "norm1": 0, "norm2": 0}
    for kind, v in want.items():
        got = run_reduce(red, kind, x, [True, False], 4, "f32")
        np.testing.assert_array_equal(got, np.full(3, v, np.float32), err_msg=kind)
    i = np.zeros((0, 2), np.int8)
    assert run_reduce(red, "max", i, [True, False], 2, "i8").tolist() == [-128, -128]
    assert run_reduce(red, "mean", i, [True, False], 2, "i8").tolist() == [0, 0]


def test_outputs_of_another_dtype_and_adding(red):
    x = data("f32", (6, 50), 3)
    want = reference("norm2", x, (1,), "f32")
    for out in ("f64", "f16", "i32", "i64", "i8"):
        got = run_reduce(red, "norm2", x, [False, True], 4, "f32", out_dtype=out)
        assert got.dtype == DTYPES[out]
        np.testing.assert_array_equal(got, want.astype(DTYPES[out]), err_msg=out)
    # float64 to float16 rounds once: 1 + 2^-11 + 2^-40 is just above a tie.
    v = np.array([1 + 2**-11 + 2**-40], np.float64)
    got = run_reduce(red, "sum", v, [True], SMALL, "f64", out_dtype="f16")
    assert got.reshape(()) == np.float16(1 + 2**-10)
    base = np.linspace(-2, 2, 6).astype(np.float32)
    got = run_reduce(red, "sum", x, [False, True], 8, "f32", out=base, add=1)
    np.testing.assert_allclose(got, base + x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    i = data("i32", (4, 9), 5)
    base = np.array([2**31 - 1, 5, -7, 0], np.int32)
    got = run_reduce(red, "max", i, [False, True], 4, "i32", out=base, add=1)
    np.testing.assert_array_equal(got, wrap(base.astype(np.int64) + i.max(1), np.int32))
    h = data("f16", (4, 9), 6)
    base = np.full(4, 0.1, np.float16)
    got = run_reduce(red, "mean", h, [False, True], 4, "f16", out=base, add=1)
    mean = (h.astype(np.float32).sum(1, dtype=np.float32) / np.float32(9)).astype(np.float16)
    np.testing.assert_array_equal(got, (base.astype(np.float32) + mean).astype(np.float16))


@pytest.mark.parametrize("suffix, kind, partial", [
    ("f32", "sum", "f32"), ("f16", "mean", "f32"), ("f32", "norm2", "f64"), ("f64", "max", "f64"),
    ("i32", "mean", "i32"), ("f16", "nansum", "f32"), ("u8", "prod", "u8"), ("f32", "norm1", "f32"),
])
def test_long_reductions_run_in_two_stages(red, suffix, kind, partial):
    """A first launch writes each segment's unfinished result, a second combines them."""
    x = data(suffix, (3, 40000), 41, kind)
    n_out, r, segments = 3, 40000, 7
    desc = reduce_desc(x.shape, [False, True])
    results = []
    for order in ORDERS:
        parts = poisoned(n_out * segments, DTYPES[partial])
        plan = ReducePlan(n_out, r, r, segments, 1, KINDS.index(kind), CODE[suffix], 0, 0)
        red.launch(f"reduce_{suffix}", 4, BLOCK, [parts, x, desc, plan], order, seed=2)
        o = poisoned(n_out, DTYPES[suffix])
        plan = ReducePlan(n_out, segments, r, 1, 32, KINDS.index(kind), CODE[suffix], 0, 1)
        red.launch(f"reduce_{partial}", 1, SMALL,
                   [o, parts, reduce_desc((n_out, segments), [False, True]), plan], order, seed=3)
        results.append(o)
    assert len({v.tobytes() for v in results}) == 1
    check(results[0], reference(kind, x, (1,), suffix), suffix, kind, x, (1,), "two stages")


def run_arg(red, x, outer, r, inner, cols, suffix, is_max):
    desc = ReduceDesc()
    desc.kept_ndim = 0
    for size, stride in ((outer, r * inner), (inner, 1)):
        if size > 1:
            desc.kept_shape[desc.kept_ndim], desc.kept_stride[desc.kept_ndim] = size, stride
            desc.kept_ndim += 1
    desc.red_ndim = 1 if r > 1 else 0
    desc.red_shape[0], desc.red_stride[0] = r, inner
    n_out = outer * inner
    results = []
    for order in ORDERS:
        o = poisoned(n_out, DTYPES[suffix])
        red.launch(f"arg_reduce_{suffix}", max(1, min(-(-n_out // cols), 3)), block_for(x.size),
                   [o, x, desc, L(n_out), L(r), ctypes.c_int(cols), ctypes.c_int(is_max),
                    ctypes.c_int(0)], order, seed=r)
        results.append(o)
    assert len({v.tobytes() for v in results}) == 1
    return results[0].reshape(outer, inner)


def arg_reference(x3: np.ndarray, is_max: bool) -> np.ndarray:
    """The first NaN, else the first extreme, along axis 1."""
    f = x3.astype(np.float64)
    nan = np.isnan(f)
    ext = np.where(nan, np.inf if not is_max else -np.inf, f)
    idx = ext.argmax(1) if is_max else ext.argmin(1)
    return np.where(nan.any(1), nan.argmax(1), idx)


@pytest.mark.parametrize("suffix", DTYPES)
def test_arg_reductions(red, suffix):
    cases = [(1, n, 1) for n in SIZES[1:]] + [(3, 7, 5), (4, 33, 1), (2, 1, 9), (5, 300, 3)]
    for outer, r, inner in cases:
        x = data(suffix, (outer, r, inner), r * 7 + inner, "max")
        if suffix in FLOATS and r > 3:
            x[:, 1:3] = x[:, :1]  # ties keep the first index
        for is_max in (True, False):
            for cols in {cols_for((outer, r, inner), [False, True, False]), 1, 16}:
                got = run_arg(red, x, outer, r, inner, cols, suffix, is_max)
                want = arg_reference(x, is_max)
                if suffix in INTS:
                    ii = np.iinfo(DTYPES[suffix])
                    want = np.clip(want, ii.min, ii.max)
                want = want.astype(DTYPES[suffix])
                np.testing.assert_array_equal(got, want, err_msg=f"{(outer, r, inner)} {cols}")


def bcast_desc(shape, mask):
    d = BcastDesc()
    gs = groups(shape, mask)
    d.ndim = len(gs)
    step = 1
    for i in reversed(range(len(gs))):
        d.shape[i] = gs[i][0]
        d.stride[i] = 0 if gs[i][1] else step
        step *= 1 if gs[i][1] else gs[i][0]
    return d


@pytest.mark.parametrize("suffix", DTYPES)
def test_reduce_backward(red, suffix):
    shape, mask = (4, 3, 5), [False, True, False]
    x = data(suffix, shape, 11, "sum")
    if suffix in FLOATS:
        x.reshape(-1)[7] = np.nan
        x.reshape(-1)[8] = 0
    kept = (4, 1, 5)
    g = data(suffix, kept, 12, "sum")
    for kind in KINDS:
        with np.errstate(all="ignore"):
            f = x.astype(np.float64)
            y64 = reference(kind, x, (1,), suffix).reshape(kept).astype(np.float64)
            y = y64.astype(DTYPES[suffix])
            yf, gf = y.astype(np.float64), g.astype(np.float64)
            share = {
                "sum": gf * np.ones_like(f), "mean": gf / 3 * np.ones_like(f), "nansum": np.where(np.isnan(f), 0, gf),
                "prod": gf * yf / f, "nanprod": np.where(np.isnan(f), 0, gf * yf / f),
                "max": np.where(f == yf, gf, 0), "min": np.where(f == yf, gf, 0),
                "norm1": np.where(f > 0, gf, np.where(f < 0, -gf, 0)), "norm2": gf * f / yf,
            }[kind]
        results = []
        for order in ORDERS:
            o = poisoned(x.size, DTYPES[suffix])
            red.launch(f"reduce_backward_{suffix}", 2, SMALL,
                       [o, g, x, y, L(x.size), bcast_desc(shape, mask),
                        ctypes.c_int(KINDS.index(kind)), L(3), ctypes.c_int(0)], order)
            results.append(o)
        assert len({v.tobytes() for v in results}) == 1
        got = results[0].reshape(shape)
        if suffix in INTS:
            want = np.array([saturate(v, DTYPES[suffix]) for v in share.ravel()], DTYPES[suffix])
            np.testing.assert_array_equal(got.ravel(), want, err_msg=kind)
        else:
            rtol = {"f32": 1e-5, "f64": 1e-12, "f16": 2e-3}[suffix]
            np.testing.assert_allclose(got.astype(np.float64), share, rtol=rtol, atol=rtol,
                                       equal_nan=True, err_msg=kind)


@pytest.mark.parametrize("suffix", DTYPES)
def test_gathers_through_views(red, suffix):
    x = data(suffix, (4, 1, 6), 21)
    views = [  # (shape, strides, offset) over the flat input
        ((6, 4), (1, 6), 0),            # transpose
        ((4, 3, 6), (6, 0, 1), 0),      # broadcast the middle axis
        ((4, 6), (6, -1), 5),           # flip the last axis
        ((2, 2, 3), (12, 1, 2), 1),     # slice with steps
    ]
    flat = x.reshape(-1)
    for shape, strides, offset in views:
        want = np.lib.stride_tricks.as_strided(
            flat[offset:], shape, [s * flat.itemsize for s in strides]) if min(strides) >= 0 \
            else flat[[offset + sum(i * s for i, s in zip(idx, strides, strict=True))
                       for idx in np.ndindex(*shape)]].reshape(shape)
        d = GatherDesc()
        d.ndim, d.offset = len(shape), offset
        for i, (n, s) in enumerate(zip(shape, strides, strict=True)):
            d.shape[i], d.stride[i] = n, s
        n = int(np.prod(shape))
        for add in (0, 1):
            base = data(suffix, (n,), 3) if add else None
            results = []
            for order in ORDERS:
                o = poisoned(n, DTYPES[suffix]) if base is None else base.copy()
                red.launch(f"view_copy_{suffix}", 2, 32, [o, x, L(n), d, ctypes.c_int(add)],
                           order, seed=n)
                results.append(o)
            assert len({v.tobytes() for v in results}) == 1
            got = results[0].reshape(shape)
            if add:
                if suffix in INTS:
                    want_add = wrap(base.astype(np.int64) + want.reshape(-1).astype(np.int64),
                                    DTYPES[suffix])
                else:
                    w = np.float32 if suffix == "f16" else np.float64
                    want_add = (base.astype(w) + want.reshape(-1).astype(w)).astype(DTYPES[suffix])
                np.testing.assert_array_equal(got.reshape(-1), want_add)
            else:
                np.testing.assert_array_equal(got, want)


def test_scatter_adds_through_a_view_that_reads_each_element_once(red):
    for suffix in ("f32", "f16", "i32"):
        g = data(suffix, (3, 2), 31)
        out = data(suffix, (4, 6), 32)
        d = GatherDesc()  # rows 1..3 of out, every other column from 5 down
        d.ndim, d.offset = 2, 11
        d.shape[0], d.shape[1], d.stride[0], d.stride[1] = 3, 2, 6, -2
        want = out.copy().reshape(-1)
        for (a, b), v in zip(np.ndindex(3, 2), g.reshape(-1), strict=True):
            k = 11 + 6 * a - 2 * b
            if suffix in INTS:
                want[k] = wrap(np.array(int(want[k]) + int(v)), DTYPES[suffix])
            else:
                want[k] = (np.float32(want[k]) + np.float32(v)).astype(DTYPES[suffix])
        results = []
        for order in ORDERS:
            o = out.copy()
            red.launch(f"view_copy_{suffix}", 2, 4, [o, g, L(6), d, ctypes.c_int(2)], order,
                       seed=1)
            results.append(o)
        assert len({v.tobytes() for v in results}) == 1
        np.testing.assert_array_equal(results[0].reshape(-1), want)


# ---- softmax.cu ---------------------------------------------------------------------------

SM_FLOATS = {"f32": (np.float32, 1e-5), "f64": (np.float64, 1e-12), "f16": (np.float16, 2e-3)}
LEN_DTYPES = {"u8": np.uint8, "i8": np.int8, "i32": np.int32, "i64": np.int64}


def sm_lengths(outer, n, inner, suffix, seed):
    rng = np.random.default_rng(seed)
    lens = rng.integers(-2, n + 3, outer * inner)
    if suffix == "u8":
        lens = np.abs(lens)
    return lens.astype(LEN_DTYPES[suffix])


def sm_reference(x3, t, log, lens):
    """Softmax along axis 1 in float64; past a position's valid length 0."""
    outer, n, inner = x3.shape
    f = x3.astype(np.float64)
    valid = np.arange(n)[None, :, None] < (
        n if lens is None else np.clip(lens.astype(np.int64), 0, n).reshape(outer, 1, inner))
    m = np.fmax.reduce(np.where(valid, f, -np.inf), axis=1, initial=-np.inf, keepdims=True)
    with np.errstate(all="ignore"):
        z = (f - m) / t
        e = np.where(valid, np.exp(z), 0)
        s = e.sum(1, keepdims=True)
        y = z - np.log(s) if log else e / s
    return np.where(valid, y, 0)


def sm_launch(sm, kernel, out, ins, layout, cols, rest, block):
    outer, n, inner = layout
    results = []
    for order in ORDERS:
        o = out.copy()
        sm.launch(kernel, max(1, min(-(-outer * inner // cols), 3)), block,
                  [o, *ins, L(outer * inner), L(n), L(inner), ctypes.c_int(cols), *rest], order,
                  seed=n)
        results.append(o)
    assert len({v.tobytes() for v in results}) == 1, kernel
    return results[0]


LAYOUTS = [(1, n, 1) for n in SIZES] + [(3, 7, 5), (4, 33, 1), (2, 40, 17), (5, 1, 3)]


@pytest.mark.parametrize("i_sfx", SM_FLOATS)
@pytest.mark.parametrize("o_sfx", SM_FLOATS)
def test_softmax_forward(sm, i_sfx, o_sfx):
    (it, itol), (ot, otol) = SM_FLOATS[i_sfx], SM_FLOATS[o_sfx]
    rng = np.random.default_rng(7)
    for k, layout in enumerate(LAYOUTS):
        x = (rng.standard_normal(layout) * 3).astype(it)
        if x.size > 40:
            x.reshape(-1)[::37] = -np.inf
        log, t = k % 2 == 1, [1.0, 0.7, 2.5][k % 3]
        lens, len_code = None, -1
        if k % 4 == 2:
            len_sfx = list(LEN_DTYPES)[k % 16 // 4]
            lens = sm_lengths(layout[0], layout[1], layout[2], len_sfx, k)
            len_code = CODE[len_sfx]
        block = block_for(x.size)
        cols = tile(layout[1], layout[2] if layout[2] > 1 else None, block)
        rest = [ctypes.c_double(t), ctypes.c_int(log),
                ctypes.c_void_p(None if lens is None else lens.ctypes.data),
                ctypes.c_int(len_code), ctypes.c_int(0)]
        got = sm_launch(sm, f"softmax_{i_sfx}_{o_sfx}", poisoned(x.size, ot), [x], layout, cols,
                        rest, block)
        want = sm_reference(x, t, log, lens)
        tol = max(itol if log else 0, otol, 1e-6 if "f32" in (i_sfx, o_sfx) else 0)
        np.testing.assert_allclose(got.reshape(layout).astype(np.float64), want, rtol=tol,
                                   atol=tol, err_msg=f"{layout} log={log} t={t}")


def test_softmax_adds_and_runs_in_place(sm):
    x = np.random.default_rng(8).standard_normal((2, 50, 3)).astype(np.float32)
    want = sm_reference(x, 1.0, False, None)
    rest = [ctypes.c_double(1.0), ctypes.c_int(0), ctypes.c_void_p(None), ctypes.c_int(-1)]
    base = np.full(x.size, 0.25, np.float32)
    got = sm_launch(sm, "softmax_f32_f32", base, [x], x.shape, 4, [*rest, ctypes.c_int(1)], 32)
    np.testing.assert_allclose(got.reshape(x.shape), want + 0.25, rtol=1e-5, atol=1e-6)
    for cols in (4, 32):
        y = x.copy()
        for order in ORDERS:
            y[:] = x
            sm.launch("softmax_f32_f32", 2, 32, [y, y, L(6), L(50), L(3), ctypes.c_int(cols),
                                                 *rest, ctypes.c_int(0)], order, seed=3)
            np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    h = x.astype(np.float16)
    base = np.full(x.size, 0.1, np.float16)
    got = sm_launch(sm, "softmax_f16_f16", base, [h], h.shape, 4, [*rest, ctypes.c_int(1)], 32)
    y = sm_reference(h, 1.0, False, None).astype(np.float32).astype(np.float16)
    np.testing.assert_array_equal(got, (y.reshape(-1).astype(np.float32)
                                        + np.float32(base[0])).astype(np.float16))


@pytest.mark.parametrize("o_sfx", SM_FLOATS)
@pytest.mark.parametrize("d_sfx", SM_FLOATS)
def test_softmax_backward(sm, o_sfx, d_sfx):
    (ot, otol), (dt, dtol) = SM_FLOATS[o_sfx], SM_FLOATS[d_sfx]
    rng = np.random.default_rng(9)
    for k, layout in enumerate(LAYOUTS):
        x = rng.standard_normal(layout)
        log, t = k % 2 == 0, [1.0, 0.5, 3.0][k % 3]
        lens, len_code = None, -1
        if k % 4 == 1:
            len_sfx = list(LEN_DTYPES)[k % 16 // 4]
            lens = sm_lengths(layout[0], layout[1], layout[2], len_sfx, k)
            len_code = CODE[len_sfx]
        y = sm_reference(x, t, log, lens).astype(ot)
        g = rng.uniform(-1, 1, layout).astype(ot)
        n = layout[1]
        valid = np.arange(n)[None, :, None] < (
            n if lens is None else np.clip(lens.astype(np.int64), 0, n)
            .reshape(layout[0], 1, layout[2]))
        yf, gf = y.astype(np.float64), g.astype(np.float64)
        if log:
            s = np.where(valid, gf, 0).sum(1, keepdims=True)
            want = (gf - np.exp(yf) * s) / t
        else:
            s = np.where(valid, gf * yf, 0).sum(1, keepdims=True)
            want = yf * (gf - s) / t
        want = np.where(valid, want, 0)
        block = block_for(x.size)
        cols = tile(n, layout[2] if layout[2] > 1 else None, block)
        rest = [ctypes.c_double(t), ctypes.c_int(log),
                ctypes.c_void_p(None if lens is None else lens.ctypes.data),
                ctypes.c_int(len_code), ctypes.c_int(0)]
        got = sm_launch(sm, f"softmax_backward_{o_sfx}_{d_sfx}", poisoned(x.size, dt), [g, y],
                        layout, cols, rest, block)
        tol = max(otol, dtol) * (10 if n > 1000 else 1)
        scale = np.abs(gf).max() if gf.size else 1
        np.testing.assert_allclose(got.reshape(layout).astype(np.float64), want, rtol=tol,
                                   atol=tol * scale, err_msg=f"{layout} log={log}")


class OutputSpec(ctypes.Structure):
    _fields_ = [("n", L), ("inner", L), ("positions", L), ("ignore", L),
                ("scale", ctypes.c_double), ("on", ctypes.c_double), ("off", ctypes.c_double),
                ("label_dtype", ctypes.c_int), ("prob_labels", ctypes.c_int),
                ("use_ignore", ctypes.c_int), ("smooth", ctypes.c_int), ("valid", ctypes.c_int),
                ("has_ograd", ctypes.c_int)]


@pytest.mark.parametrize("suffix", SM_FLOATS)
def test_softmax_output_backward(sm, suffix):
    dtype, tol = SM_FLOATS[suffix]
    rng = np.random.default_rng(10)
    cases = [  # (outer, n, inner), label dtype, prob labels, use_ignore, valid, alpha, ograd
        ((4, 5, 1), "f32", False, False, False, 0.0, False),
        ((6, 7, 1), "i32", False, True, True, 0.0, True),
        ((3, 4, 5), "u8", False, True, False, 0.0, False),
        ((2, 9, 1), "f64", False, False, True, 0.3, False),
        ((5, 6, 1), "f32", True, False, True, 0.0, True),
        ((1, 257, 1), "i64", False, False, False, 0.1, False),
        ((300, 3, 1), "f16", False, True, True, 0.0, False),
    ]
    for (outer, n, inner), lsfx, prob, use_ignore, valid, alpha, ograd in cases:
        total = outer * n * inner
        y = rng.uniform(0, 1, total).astype(dtype)
        g = rng.uniform(-1, 1, total).astype(dtype)
        if prob:
            labels = rng.uniform(0, 1, total).astype(DTYPES[lsfx])
        else:
            labels = rng.integers(-1, n + 1, outer * inner).astype(DTYPES[lsfx])
        ignore = 1
        count = int((labels[: outer * inner].astype(np.float64).astype(np.int64) != ignore).sum())
        scale = 1.5 / (max(count, 1) if valid else 1)
        off = alpha / (n - 1) if n > 1 else 0.0
        spec = OutputSpec(n, inner, outer * inner, ignore, 1.5, 1 - alpha, off, CODE[lsfx],
                          int(prob), int(use_ignore), int(alpha > 0), int(valid), int(ograd))
        y3, g3 = y.reshape(outer, n, inner).astype(np.float64), g.reshape(outer, n, inner)
        if prob:
            target = labels.reshape(outer, n, inner).astype(np.float64)
            skip = np.zeros((outer, 1, inner), bool)
        else:
            lab = labels.astype(np.float64).astype(np.int64).reshape(outer, 1, inner)
            onehot = np.arange(n)[None, :, None] == lab
            target = np.where(onehot, 1 - alpha, off if alpha > 0 else 0.0)
            skip = (lab == ignore) if use_ignore else np.zeros_like(lab, bool)
        want = (y3 - target) * scale * (g3.astype(np.float64) if ograd else 1)
        want = np.where(skip, 0, want)
        results = []
        for order in ORDERS:
            o = poisoned(total, dtype)
            sm.launch(f"softmax_output_backward_{suffix}", 3, SMALL,
                      [o, y, g if ograd else ctypes.c_void_p(None), labels, L(total), spec,
                       ctypes.c_int(0)], order, seed=total)
            results.append(o)
        assert len({v.tobytes() for v in results}) == 1
        np.testing.assert_allclose(results[0].reshape(outer, n, inner).astype(np.float64), want,
                                   rtol=tol, atol=tol, err_msg=f"{(outer, n, inner)} {lsfx}")


@pytest.mark.parametrize("suffix", SM_FLOATS)
def test_regression_outputs(sm, suffix):
    dtype, tol = SM_FLOATS[suffix]
    for n in SIZES:
        rng = np.random.default_rng(n)
        x = rng.uniform(-5, 5, n).astype(dtype)
        label = rng.uniform(-5, 5, n).astype(dtype)
        if n > 3:
            label[:3] = x[:3]  # MAE takes -1 where they are equal
        for logistic in (0, 1):
            want = 1 / (1 + np.exp(-x.astype(np.float64))) if logistic else x.astype(np.float64)
            results = []
            for order in ORDERS:
                o = poisoned(n, dtype)
                sm.launch(f"regression_{suffix}", 2, SMALL,
                          [o, x, L(n), ctypes.c_int(logistic), ctypes.c_int(0)], order)
                results.append(o)
            assert len({v.tobytes() for v in results}) == 1
            np.testing.assert_allclose(results[0].astype(np.float64), want, rtol=tol, atol=tol)
        for mae in (0, 1):
            d = x.astype(np.float64) - label.astype(np.float64)
            want = (np.where(d > 0, 1.0, -1.0) if mae else d) * 0.25
            base = rng.uniform(-1, 1, n).astype(dtype)
            results = []
            for order in ORDERS:
                o = base.copy()
                sm.launch(f"regression_backward_{suffix}", 2, SMALL,
                          [o, x, label, L(n), ctypes.c_int(mae), ctypes.c_double(0.25),
                           ctypes.c_int(1)], order)
                results.append(o)
            assert len({v.tobytes() for v in results}) == 1
            np.testing.assert_allclose(results[0].astype(np.float64),
                                       base.astype(np.float64) + want, rtol=tol, atol=tol)

"""The indexing and BatchNorm kernels (``index.cu``, ``norm.cu``) run on the host: every
kernel and dtype against numpy references that follow the CPU operators (float64 or
exact integer arithmetic) on fresh inputs of awkward sizes, with poisoned outputs, and the
same bits whatever order a block's threads run in."""

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

L = ctypes.c_longlong
C_INT = ctypes.c_int
D = ctypes.c_double
# Index and data dtypes: the numeric ones and bool (suffix b8).
ALL = {**DTYPES, "b8": np.bool_}
NUMS = list(DTYPES)
INT64_MIN = -(2**63)
CLIP, WRAP, RAISE, RAISE_ZERO, EMBEDDING, RAW = range(6)
SUM, ADD, LAST = range(3)
SMALL = 32


def host_module(name: str) -> HostModule:
    """Module ``name`` built for the host, kept in the host library cache."""
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
def ix():
    return host_module("index")


@pytest.fixture(scope="module")
def bn():
    return host_module("norm")


def grid(n: int, block: int = BLOCK) -> int:
    return max(1, min((n + block - 1) // block, 8))


def run(module, kernel, outs, args, n, block=BLOCK, blocks=None, poison=True):
    """Runs ``kernel`` in every thread order on fresh copies of ``outs`` (poisoned unless
    ``poison`` is false, then copied as given); all orders must give the same bytes.
    ``args`` names the outputs by position: an int ``k`` in it stands for ``outs[k]``."""
    results = []
    for order in ORDERS:
        copies = [poisoned(o.size, o.dtype).reshape(o.shape) if poison else o.copy()
                  for o in outs]
        real = [copies[a] if isinstance(a, int) else a for a in args]
        g = blocks if blocks is not None else grid(n, block)
        module.launch(kernel, g, block, real, order, seed=n + 1)
        results.append(copies)
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert a.tobytes() == b.tobytes(), kernel
    return results[0]


def indices(rng, dtype, count: int, n: int) -> np.ndarray:
    """Index values around [-2n, 2n), with NaN, infinities and huge values for floats."""
    if dtype is np.bool_:
        return rng.integers(0, 2, count).astype(np.bool_)
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    lo = -2 * n - 3 if info is None else max(info.min, -2 * n - 3)
    hi = 2 * n + 3 if info is None else min(info.max, 2 * n + 3)
    v = rng.uniform(lo, hi, count)
    if info is not None:
        v = np.floor(v).astype(dtype)
        if count > 4:
            v[:2] = [info.min, info.max]
        return v
    v = v.astype(dtype)
    if count > 6:
        v[:6] = [np.nan, np.inf, -np.inf, 1e30 if dtype is not np.float16 else 6e4, -0.5, n]
    return v


def to_index(v) -> int:
    """C's conversion of an index element to int64, as the CPU kernels read indices."""
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if f != f or not (-(2.0**63) <= f < 2.0**63):
            return INT64_MIN
        return int(f)
    return int(v)


def fix(v, n: int, mode: int) -> int:
    if mode == EMBEDDING:
        f, last = float(v), max(n - 1, 0)
        return 0 if not f >= 0 else (last if f >= last else int(f))
    i = to_index(v)
    inside = 0 <= i < n
    if mode == CLIP:
        return 0 if n <= 0 else min(max(i, 0), n - 1)
    if mode == WRAP:
        return 0 if n <= 0 else i % n
    if mode == RAISE:
        return i if inside else -1
    if mode == RAISE_ZERO:
        return i if inside else 0
    return i


def data(rng, dtype, shape) -> np.ndarray:
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` as the CPU accumulates: wrapping integers, float16 rounded per sum, or."""
    if a.dtype == np.bool_:
        return a | b
    with np.errstate(over="ignore"):
        return (a + b).astype(a.dtype)


# ---------------------------------------------------------------------------------------
# index conversions


@pytest.mark.parametrize("sfx", list(ALL))
def test_index_fix_follows_the_cpu_conversions(ix, sfx):
    rng = np.random.default_rng(hash(sfx) % 2**32)
    for count in SIZES:
        for n in (0, 1, 7, 300):
            v = indices(rng, ALL[sfx], count, n)
            for mode in range(6):
                if count > 1000 and mode not in (CLIP, EMBEDDING):
                    continue
                out = np.zeros(count, np.int64)
                (got,) = run(ix, f"index_fix_{sfx}", [out],
                             [0, v, L(count), L(n), C_INT(mode)], count)
                want = np.array([fix(x, n, mode) for x in v], np.int64)
                assert np.array_equal(got, want), (sfx, count, n, mode)


class Nd(ctypes.Structure):
    _fields_ = [("dim", L * 10), ("stride", L * 10)]


def nd_ref(idx: np.ndarray, shape) -> np.ndarray:
    """The CPU's gather_nd offsets, -(ax + 1) at the first bad axis of a column."""
    m, count = idx.shape
    strides = [int(np.prod(shape[a + 1:m])) for a in range(m)]
    out = np.zeros(count, np.int64)
    for c in range(count):
        off = 0
        for ax in range(m):
            v, d = float(idx[ax, c]), float(shape[ax])
            if v != v or v > d - 1 or v < -d:
                off = -ax - 1
                break
            off += int(v + d if v < 0 else v) * strides[ax]
        out[c] = off
    return out


@pytest.mark.parametrize("sfx", list(ALL))
def test_gather_nd_positions_and_the_first_bad_one(ix, sfx):
    rng = np.random.default_rng(7)
    for shape in [(3, 4), (5, 1, 6, 2), (2,)]:
        for count in (0, 1, 33, 1000):
            m = len(shape) - (1 if len(shape) > 2 else 0)
            if ALL[sfx] is np.bool_:
                idx = rng.integers(0, 2, (m, count)).astype(np.bool_)
            else:
                idx = np.stack([indices(rng, ALL[sfx], count, shape[a]) for a in range(m)])
            if np.issubdtype(idx.dtype, np.floating) and count > 40:
                idx[:, 10:] = np.stack([rng.integers(-shape[a], shape[a], count - 10)
                                        for a in range(m)])
            nd = Nd()
            for a in range(m):
                nd.dim[a] = shape[a]
                nd.stride[a] = int(np.prod(shape[a + 1:m]))
            flat = np.ascontiguousarray(idx)
            (got,) = run(ix, f"gather_nd_pos_{sfx}", [np.zeros(count, np.int64)],
                         [0, flat, L(m), L(count), nd], count)
            want = nd_ref(idx, shape)
            assert np.array_equal(got, want), (sfx, shape, count)
            for block in (32, 256):
                (first,) = run(ix, "index_first_bad", [np.zeros(2, np.int64)],
                               [0, want, L(count)], block, block=block, blocks=1)
                bad = np.flatnonzero(want < 0)
                expect = [bad[0], want[bad[0]]] if bad.size else [-1, 0]
                assert list(first) == expect


def test_first_bad_finds_the_least_in_any_thread(ix):
    for count in (1, 31, 257, 100003):
        for at in sorted({0, count // 2, count - 1}):
            pos = np.arange(count, dtype=np.int64)
            pos[at] = -3
            pos[min(at + 40, count - 1)] = -1 if at + 40 < count else pos[count - 1]
            (got,) = run(ix, "index_first_bad", [np.zeros(2, np.int64)], [0, pos, L(count)],
                         256, blocks=1)
            assert list(got) == [at, -3]
    (got,) = run(ix, "index_first_bad", [np.zeros(2, np.int64)],
                 [0, np.arange(5, dtype=np.int64), L(5)], 256, blocks=1)
    assert list(got) == [-1, 0]


# ---------------------------------------------------------------------------------------
# gathers


@pytest.mark.parametrize("sfx", list(ALL))
def test_take_gathers_rows(ix, sfx):
    rng = np.random.default_rng(11)
    for outer, n, m, inner in [(1, 5, 0, 3), (1, 1, 1, 1), (3, 7, 33, 1), (2, 4, 5, 31),
                               (1, 300, 257, 3), (1, 10, 100003, 1)]:
        a = data(rng, ALL[sfx], (outer, n, inner))
        idx = rng.integers(0, n, m).astype(np.int64)
        want = a[:, idx, :]
        size = outer * m * inner
        (got,) = run(ix, f"take_{sfx}", [np.zeros(want.shape, want.dtype)],
                     [0, a, idx, L(outer), L(n), L(m), L(inner), C_INT(0)], size)
        assert np.array_equal(got, want)
        base = data(rng, ALL[sfx], want.shape)
        (got,) = run(ix, f"take_{sfx}", [base],
                     [0, a, idx, L(outer), L(n), L(m), L(inner), C_INT(1)], size, poison=False)
        assert np.array_equal(got, add(base, want), equal_nan=True)


@pytest.mark.parametrize("sfx", list(ALL))
def test_pick_and_its_backward(ix, sfx):
    rng = np.random.default_rng(12)
    for outer, n, inner in [(0, 3, 2), (1, 1, 1), (33, 4, 1), (5, 7, 31), (257, 3, 2)]:
        x = data(rng, ALL[sfx], (outer, n, inner))
        idx = rng.integers(0, n, (outer, inner)).astype(np.int64)
        want = np.take_along_axis(x, idx[:, None, :], 1)[:, 0, :]
        rows = outer * inner
        (got,) = run(ix, f"pick_{sfx}", [np.zeros(want.shape, want.dtype)],
                     [0, x, idx, L(rows), L(n), L(inner), C_INT(0)], rows)
        assert np.array_equal(got, want)
        if sfx == "b8":
            continue
        g = data(rng, ALL[sfx], (outer, inner))
        base = data(rng, ALL[sfx], x.shape)
        (got,) = run(ix, f"pick_backward_{sfx}", [base],
                     [0, g, idx, L(rows), L(n), L(inner)], rows, poison=False)
        expect = base.copy()
        o, k = np.meshgrid(np.arange(outer), np.arange(inner), indexing="ij")
        expect[o, idx, k] = add(expect[o, idx, k], g)
        assert np.array_equal(got, expect, equal_nan=True)


@pytest.mark.parametrize("sfx", NUMS)
def test_one_hot_writes_on_and_off(ix, sfx):
    rng = np.random.default_rng(13)
    dt = ALL[sfx]
    on, off = np.array([5, 0], dtype=dt) if sfx in ("u8",) else np.array([3, -1], dtype=dt)
    for count, depth in [(0, 3), (1, 1), (33, 4), (257, 31), (1000, 7)]:
        idx = rng.integers(-2, depth + 2, count).astype(np.int64)
        want = np.where(idx[:, None] == np.arange(depth)[None, :], on, off).astype(dt)
        ctype = np.ctypeslib.as_ctypes_type(dt) if sfx != "f16" else ctypes.c_uint16
        cv = [ctype(int(np.array(v).view(np.uint16)) if sfx == "f16" else v.item())
              for v in (on, off)]
        (got,) = run(ix, f"one_hot_{sfx}", [np.zeros((count, depth), dt)],
                     [0, idx, L(count), L(depth), *cv, C_INT(0)], count * depth)
        assert np.array_equal(got, want)
        base = data(rng, dt, want.shape)
        (got,) = run(ix, f"one_hot_{sfx}", [base],
                     [0, idx, L(count), L(depth), *cv, C_INT(1)], count * depth, poison=False)
        assert np.array_equal(got, add(base, want), equal_nan=True)


@pytest.mark.parametrize("sfx", list(ALL))
def test_where_and_its_backward(ix, sfx):
    rng = np.random.default_rng(14)
    dt = ALL[sfx]
    for shape, cshape in [((0,), (0,)), ((1,), (1,)), ((33, 3), (33, 3)), ((31, 5), (31,)),
                          ((100003,), (100003,))]:
        c = data(rng, dt, cshape)
        if dt is not np.bool_:
            c = np.where(rng.uniform(size=cshape) < 0.5, np.zeros((), dt), c).astype(dt)
        if np.issubdtype(dt, np.floating) and c.size > 3:
            c[:3] = [np.nan, -0.0, 0.0]
        n = int(np.prod(shape))
        truth = np.zeros(c.size, np.uint8)
        (t,) = run(ix, f"truth_{sfx}", [truth], [0, c, L(c.size)], c.size)
        assert np.array_equal(t, (c.reshape(-1) != 0).astype(np.uint8))
        row = 1 if c.size == n else max(n // max(c.size, 1), 1)
        mask = np.repeat(t.astype(bool), row)
        x, y = data(rng, dt, shape), data(rng, dt, shape)
        want = np.where(mask, x.reshape(-1), y.reshape(-1))
        (got,) = run(ix, f"where_{sfx}", [np.zeros(n, dt)], [0, t, x, y, L(n), L(row), C_INT(0)], n)
        assert np.array_equal(got, want)
        if sfx == "b8":
            continue
        g = data(rng, dt, shape).reshape(-1)
        for want_x in (1, 0):
            sel = mask if want_x else ~mask
            expect = np.where(sel, g, np.zeros((), dt)).astype(dt)
            (got,) = run(ix, f"where_backward_{sfx}", [np.zeros(n, dt)],
                         [0, g, t, L(n), L(row), C_INT(want_x), C_INT(0)], n)
            assert np.array_equal(got, expect)
            base = data(rng, dt, n)
            (got,) = run(ix, f"where_backward_{sfx}", [base],
                         [0, g, t, L(n), L(row), C_INT(want_x), C_INT(1)], n, poison=False)
            assert np.array_equal(got, add(base, expect), equal_nan=True)


# ---------------------------------------------------------------------------------------
# scatters


def scatter_ref(g, idx, outer, n, inner, mode, base):
    """The CPU's scatter: rows in index order, summed in the storage type (or the last
    row kept), into zeros or onto ``base``."""
    out = base.copy() if mode == ADD else np.zeros((outer, n, inner), g.dtype)
    for o in range(outer):
        for j, r in enumerate(idx):
            if mode == LAST:
                out[o, r] = g[o, j]
            else:
                out[o, r] = add(out[o, r], g[o, j])
    return out


def sort_targets(ix, pos: np.ndarray, n: int, block: int = BLOCK):
    """The scatter's stable sort of ``pos`` by target: (start, sorted), checked against
    numpy on the way."""
    m = pos.size
    (counts,) = run(ix, "scatter_count", [np.zeros(n, np.uint64)], [0, pos, L(m), L(n)], m,
                    poison=False)
    inside = pos[(pos >= 0) & (pos < n)]
    assert np.array_equal(counts, np.bincount(inside, minlength=n))
    start, cursor = run(ix, "scatter_offsets", [np.zeros(n + 1, np.int64),
                                                np.zeros(n, np.int64)],
                        [0, 1, counts, L(n)], block, block=block, blocks=1)
    want_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    assert np.array_equal(start, want_start) and np.array_equal(cursor, want_start[:n])
    total = int(want_start[-1])
    if m == 0:  # the launcher skips the placement
        return start, np.zeros(0, np.int64)
    sorted_, _ = run(ix, "scatter_place", [np.zeros(total, np.int64), cursor],
                     [0, 1, pos, L(m), L(n)], block, block=block, blocks=1, poison=False)
    keep = np.flatnonzero((pos >= 0) & (pos < n))
    assert np.array_equal(sorted_, keep[np.argsort(pos[keep], kind="stable")])
    return start, sorted_


def test_the_scatter_sort_is_stable_for_any_block(ix):
    rng = np.random.default_rng(21)
    for m, n in [(0, 3), (1, 1), (33, 2), (257, 40), (1000, 7), (100003, 1000)]:
        pos = rng.integers(-1, n + 1, m).astype(np.int64)
        for block in ((32, 256) if m < 5000 else (256,)):
            sort_targets(ix, pos, n, block)
    hot = np.zeros(5000, np.int64)
    hot[::7] = 3
    sort_targets(ix, hot, 4)


@pytest.mark.parametrize("sfx", list(ALL))
def test_scatter_sums_in_index_order(ix, sfx):
    rng = np.random.default_rng(15)
    dt = ALL[sfx]
    for outer, n, m, inner in [(1, 3, 0, 2), (1, 1, 1, 1), (2, 5, 33, 3), (1, 7, 257, 31),
                               (3, 40, 300, 1)]:
        # Few distinct rows, so most receive several.
        idx = rng.integers(0, max(n - 1, 1), m).astype(np.int64)
        start, sorted_ = sort_targets(ix, idx, n)
        g = data(rng, dt, (outer, m, inner))
        if np.issubdtype(dt, np.floating):
            g = (g * 100).astype(dt)
        size = outer * n * inner
        for mode in (SUM, ADD, LAST):
            base = data(rng, dt, (outer, n, inner))
            (got,) = run(ix, f"scatter_{sfx}", [base],
                         [0, g, start, sorted_, L(outer), L(n), L(m), L(inner), C_INT(mode)],
                         size, poison=mode != ADD)
            want = scatter_ref(g, idx, outer, n, inner, mode, base)
            assert np.array_equal(got, want, equal_nan=True), (mode, outer, n, m, inner)


# ---------------------------------------------------------------------------------------
# BatchNorm


def bn_layout(shape, axis):
    return (int(np.prod(shape[:axis])), shape[axis], int(np.prod(shape[axis + 1:])))


BN_SHAPES = [((0, 3, 2), 1), ((4, 1), 1), ((1, 5), 0), ((3, 33), 1), ((2, 3, 31), 1),
             ((5, 4, 3), 2), ((257, 2), 1), ((100003, 1), 1)]


def bn_sums(bn, kernel, ins, c, segments, width, divisor, block=SMALL):
    """A ``*_part`` kernel over ``segments`` parts of each channel, then ``bn_combine``."""
    parts = c * segments
    (part,) = run(bn, kernel, [np.zeros(parts * width)], [0, *ins, L(segments)],
                  parts * block, block=block, blocks=min(parts, 5) if parts else 1)
    (out,) = run(bn, "bn_combine", [np.zeros(width * c)],
                 [0, part, L(c), L(segments), C_INT(width), D(divisor)], c)
    return out


@pytest.mark.parametrize("sfx", ["f32", "f64"])
def test_bn_statistics_are_float64_sums(bn, sfx):
    rng = np.random.default_rng(16)
    dt = DTYPES[sfx]
    for shape, axis in BN_SHAPES:
        outer, c, inner = bn_layout(shape, axis)
        x = (rng.standard_normal(shape) * 3 + 1).astype(dt)
        xs = np.moveaxis(x.reshape(outer, c, inner), 1, 0).reshape(c, -1).astype(np.float64)
        m = max(outer * inner, 1)
        mean = xs.sum(1) / m
        var = ((xs - mean[:, None]) ** 2).sum(1) / m
        for segments in (1, 3, 40):
            for block in ((SMALL, BLOCK) if segments == 1 else (SMALL,)):
                dims = [L(outer), L(c), L(inner)]
                got_mean = bn_sums(bn, f"bn_stats_part_{sfx}", [x, ctypes.c_void_p(None), *dims], c, segments,
                                   1, m, block)
                np.testing.assert_allclose(got_mean, mean, rtol=1e-12, atol=1e-12)
                got_var = bn_sums(bn, f"bn_stats_part_{sfx}", [x, got_mean, *dims], c,
                                  segments, 1, m, block)
                np.testing.assert_allclose(got_var, var, rtol=1e-12, atol=1e-12)


def cast(v, dt):
    return np.asarray(v, np.float64).astype(dt)


@pytest.mark.parametrize("sfx", ["f32", "f64"])
@pytest.mark.parametrize("batch", [0, 1])
@pytest.mark.parametrize("fix_gamma", [0, 1])
def test_bn_forward_coefficients_and_moving_statistics(bn, sfx, batch, fix_gamma):
    rng = np.random.default_rng(17)
    dt = DTYPES[sfx]
    eps, mom = 1e-3, 0.9
    for c in (1, 33, 300):
        stats = np.concatenate([rng.standard_normal(c), rng.uniform(0.1, 2, c)])
        gamma, beta = rng.standard_normal(c).astype(dt), rng.standard_normal(c).astype(dt)
        mm, mv = rng.standard_normal(c).astype(dt), rng.uniform(0.5, 2, c).astype(dt)
        om, ov = rng.standard_normal(c).astype(dt), rng.standard_normal(c).astype(dt)
        for reqs in ((1, 1), (2, 0), (0, 2)):
            coef, mean_o, inv_o, mm_o, mv_o = run(
                bn, f"bn_coef_{sfx}", [np.zeros(2 * c, dt), om, ov, mm, mv],
                [0, 1, 2, 3, 4, stats, gamma, beta, L(c), D(eps), D(mom), C_INT(fix_gamma),
                 C_INT(batch), C_INT(reqs[0]), C_INT(reqs[1])], c, poison=False)
            mean = stats[:c] if batch else mm.astype(np.float64)
            var = stats[c:] if batch else mv.astype(np.float64)
            inv = 1.0 / np.sqrt(var + eps)
            g = np.ones(c) if fix_gamma else gamma.astype(np.float64)
            s = g * inv
            assert np.array_equal(coef[:c], cast(s, dt))
            assert np.array_equal(coef[c:], cast(beta.astype(np.float64) - mean * s, dt))
            for got, base, v, r in ((mean_o, om, mean, reqs[0]), (inv_o, ov, inv, reqs[1])):
                want = {0: base, 1: cast(v, dt), 2: (base + cast(v, dt)).astype(dt)}[r]
                assert np.array_equal(got, want)
            if batch:
                assert np.array_equal(mm_o, cast(mm.astype(np.float64) * mom
                                                  + stats[:c] * (1 - mom), dt))
                assert np.array_equal(mv_o, cast(mv.astype(np.float64) * mom
                                                  + stats[c:] * (1 - mom), dt))
            else:
                assert np.array_equal(mm_o, mm) and np.array_equal(mv_o, mv)


@pytest.mark.parametrize("sfx", ["f32", "f64"])
def test_bn_apply_scales_and_shifts_per_channel(bn, sfx):
    rng = np.random.default_rng(18)
    dt = DTYPES[sfx]
    for shape, axis in BN_SHAPES:
        outer, c, inner = bn_layout(shape, axis)
        x = rng.standard_normal(shape).astype(dt)
        coef = rng.standard_normal(2 * c).astype(dt)
        bshape = [1] * len(shape)
        bshape[axis] = c
        want = x * coef[:c].reshape(bshape) + coef[c:].reshape(bshape)
        n = x.size
        (got,) = run(bn, f"bn_apply_{sfx}", [np.zeros(shape, dt)],
                     [0, x, coef, L(n), L(c), L(inner), C_INT(0)], n)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        base = rng.standard_normal(shape).astype(dt)
        (got,) = run(bn, f"bn_apply_{sfx}", [base],
                     [0, x, coef, L(n), L(c), L(inner), C_INT(1)], n, poison=False)
        np.testing.assert_allclose(got, base + want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("sfx", ["f32", "f64"])
def test_bn_backward_matches_the_float64_formulas(bn, sfx):
    rng = np.random.default_rng(19)
    dt = DTYPES[sfx]
    for (shape, axis), batch, fix_gamma in zip(BN_SHAPES, [1, 0, 1, 1, 0, 1, 1, 1],
                                               [0, 0, 1, 0, 1, 0, 0, 1], strict=True):
        outer, c, inner = bn_layout(shape, axis)
        x, dy = rng.standard_normal(shape).astype(dt), rng.standard_normal(shape).astype(dt)
        mean, inv = rng.standard_normal(c).astype(dt), rng.uniform(0.5, 2, c).astype(dt)
        gamma = rng.standard_normal(c).astype(dt)
        bshape = [1] * len(shape)
        bshape[axis] = c
        x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
        axes = tuple(a for a in range(len(shape)) if a != axis)
        xhat = (x64 - mean.astype(np.float64).reshape(bshape)) * inv.astype(np.float64).reshape(bshape)
        a = dy64.sum(axes) if axes else dy64
        b = (dy64 * xhat).sum(axes) if axes else dy64 * xhat
        sums = bn_sums(bn, f"bn_backward_part_{sfx}",
                       [dy, x, mean, inv, L(outer), L(c), L(inner)], c, 7, 2, 1.0)
        np.testing.assert_allclose(sums[:c], a, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(sums[c:], b, rtol=1e-10, atol=1e-10)
        count = float(max(outer * inner, 1))
        dg0, db0 = rng.standard_normal(c).astype(dt), rng.standard_normal(c).astype(dt)
        coef, dg, db = run(bn, f"bn_backward_coef_{sfx}", [np.zeros(4 * c, dt), dg0, db0],
                           [0, 1, 2, sums, gamma, mean, inv, L(c), D(count), C_INT(fix_gamma),
                            C_INT(batch), C_INT(1), C_INT(2)], c, poison=False)
        g = np.ones(c) if fix_gamma else gamma.astype(np.float64)
        s = inv.astype(np.float64)
        k1 = g * s
        k2 = -k1 * s * sums[c:] / count if batch else np.zeros(c)
        k0 = -k1 * sums[:c] / count if batch else np.zeros(c)
        assert np.array_equal(coef, np.concatenate([cast(k1, dt), cast(k2, dt), cast(k0, dt),
                                                    mean]))
        assert np.array_equal(dg, cast(np.zeros(c) if fix_gamma else sums[c:], dt))
        assert np.array_equal(db, (db0 + cast(sums[:c], dt)).astype(dt))
        n = x.size
        (dx,) = run(bn, f"bn_backward_apply_{sfx}", [np.zeros(shape, dt)],
                    [0, dy, x, coef, L(n), L(c), L(inner), C_INT(0)], n)
        k1, k2, k0, mu = (coef[j * c:(j + 1) * c].reshape(bshape) for j in range(4))
        want = k1 * dy + k2 * (x - mu) + k0
        np.testing.assert_allclose(dx, want, rtol=1e-5, atol=1e-5)

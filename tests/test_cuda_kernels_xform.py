"""The data-moving, cast and sorting kernels (``xform.cu``, ``sort.cu``) run on the host:
joins and splits, copies, every cast between dtypes, MakeLoss's gradient and the bitonic
sorts against numpy on fresh inputs of awkward sizes, with poisoned outputs, and the same
bits whatever order a block's threads run in."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from test_cuda_kernels import DTYPES, ORDERS, SIZES, poisoned
from test_cuda_kernels_reduce import host_module

L = ctypes.c_longlong
INTS = ("u8", "i8", "i32", "i64")
PARTS = 16
ALL = {**DTYPES, "bool": np.bool_}


class JoinDesc(ctypes.Structure):
    _fields_ = [("rows", L), ("row", L), ("base", L), ("nparts", L), ("col", L * (PARTS + 1)),
                ("part", ctypes.c_void_p * PARTS), ("add", ctypes.c_int * PARTS)]


class Lanes(ctypes.Structure):
    _fields_ = [("outer", L), ("n", L), ("inner", L), ("k", L), ("p", L)]


@pytest.fixture(scope="module")
def xf():
    return host_module("xform")


@pytest.fixture(scope="module")
def so():
    return host_module("sort")


def data(suffix, n, seed):
    """Random values: small integers with the extremes, or floats with NaN, infinities,
    signed zeros and values past every integer range."""
    rng = np.random.default_rng(seed)
    if suffix == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    dtype = DTYPES[suffix]
    if suffix in INTS:
        ii = np.iinfo(dtype)
        x = rng.integers(max(ii.min, -300), min(ii.max, 300) + 1, n)
        if n > 10:
            x[::7] = ii.max
            x[3::11] = ii.min
        return x.astype(dtype)
    x = rng.uniform(-300, 300, n)
    x[::5] = np.round(x[::5])
    if n > 20:
        specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, 3e9, -3e9, 1e20, -1e20, 0.5, -0.5]
        x[1::13][: len(specials)] = specials[: len(x[1::13])]
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def wrap(v: np.ndarray, dtype) -> np.ndarray:
    return v.astype(np.int64).astype(np.uint64).astype(dtype)


def added(base, v, suffix):
    """`base + v` with the dtype's arithmetic (integers wrap, float16 rounds once)."""
    if suffix == "bool":
        return base | v
    if suffix in INTS:
        return wrap(base.astype(np.int64) + v.astype(np.int64), DTYPES[suffix])
    w = np.float32 if suffix == "f16" else DTYPES[suffix]
    with np.errstate(over="ignore", invalid="ignore"):
        return (base.astype(w) + v.astype(w)).astype(DTYPES[suffix])


def run_orders(module, kernel, grid, block, make_args, outs):
    """Launches in every thread order on fresh copies of `outs`; all must agree."""
    results = []
    for order in ORDERS:
        copies = [o.copy() for o in outs]
        module.launch(kernel, grid, block, make_args(copies), order, seed=7)
        results.append(copies)
    first = [r.tobytes() for r in results[0]]
    for r in results[1:]:
        assert [x.tobytes() for x in r] == first, kernel
    return results[0]


def desc(rows, row, base, parts, adds=None):
    d = JoinDesc()
    d.rows, d.row, d.base, d.nparts = rows, row, base, len(parts)
    for i, p in enumerate(parts):
        d.col[i + 1] = d.col[i] + p.size // max(rows, 1)
        d.part[i] = p.ctypes.data
        d.add[i] = 0 if adds is None else adds[i]
    return d


@pytest.mark.parametrize("suffix", DTYPES)
def test_joins_and_splits_of_awkward_parts(xf, suffix):
    rng = np.random.default_rng(1)
    dtype = DTYPES[suffix]
    for rows, widths in [(1, [1]), (3, [2, 0, 5]), (7, [1] * PARTS), (33, [31, 1, 257]),
                         (0, [3, 4])]:
        parts = [data(suffix, rows * w, int(rng.integers(1000))) for w in widths]
        row = sum(widths) + 3  # three more columns that the launch must leave alone
        base = 2
        want = poisoned(rows * row, dtype).reshape(rows, row)
        col = base
        for p, w in zip(parts, widths, strict=True):
            want[:, col:col + w] = p.reshape(rows, w)
            col += w
        for add in (0, 1):
            start = data(suffix, rows * row, 5) if add else poisoned(rows * row, dtype)
            d = desc(rows, row, base, parts)
            n = rows * sum(widths)
            (got,) = run_orders(xf, f"join_{suffix}", max(1, min(3, n // 64 + 1)), 64,
                                lambda o, d=d, add=add: [o[0], d, ctypes.c_int(add)], [start])
            got = got.reshape(rows, row)
            exp = start.reshape(rows, row).copy()
            sl = slice(base, base + sum(widths))
            exp[:, sl] = added(exp[:, sl], want[:, sl], suffix) if add else want[:, sl]
            np.testing.assert_array_equal(got, exp)
        # The split gives the parts back, one of them added to.
        whole = data(suffix, rows * row, 9).reshape(rows, row)
        outs = [poisoned(rows * w, dtype) for w in widths]
        adds = [i % 2 for i in range(len(widths))]
        outs = [data(suffix, o.size, 11) if a else o for o, a in zip(outs, adds, strict=True)]
        for o in outs:
            o.flags.writeable = True
        results = []
        for order in ORDERS:
            copies = [o.copy() for o in outs]
            d = desc(rows, row, base, copies, adds)
            xf.launch(f"split_{suffix}", 2, 32, [whole, d], order, seed=3)
            results.append(copies)
        assert len({b"".join(x.tobytes() for x in r) for r in results}) == 1
        col = base
        for got, o, w, a in zip(results[0], outs, widths, adds, strict=True):
            piece = whole[:, col:col + w].reshape(-1)
            np.testing.assert_array_equal(got, added(o, piece, suffix) if a else piece)
            col += w


@pytest.mark.parametrize("suffix", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_copies(xf, suffix, n):
    x = data(suffix, n, n)
    for add in (0, 1):
        start = data(suffix, n, 3) if add else poisoned(n, DTYPES[suffix])
        (got,) = run_orders(xf, f"copy_{suffix}", max(1, min(8, n // 256 + 1)), 256,
                            lambda o, add=add: [o[0], x, L(n), ctypes.c_int(add)], [start])
        np.testing.assert_array_equal(got, added(start, x, suffix) if add else x)


def cast_reference(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """MXNet's `Cast`: floats truncate toward zero (into int32 for the narrow integers, and
    the type's minimum for NaN or out of range), integers wrap, non-zero is true."""
    if dst == "bool":
        return x != 0
    if src == "bool":
        x = x.astype(np.int64)
    if dst in ("f32", "f64", "f16"):
        if src in ("f32", "f64", "f16"):
            f = x.astype(np.float64)
            with np.errstate(over="ignore"):
                return f.astype(np.float32).astype(DTYPES[dst]) if dst != "f64" else f
        with np.errstate(over="ignore"):
            return x.astype(np.int64).astype(np.float32 if dst == "f16" else DTYPES[dst]) \
                .astype(DTYPES[dst])
    if src in ("f32", "f64", "f16"):
        f = x.astype(np.float64)
        if dst == "i64":
            lo, hi = -(2.0 ** 63), 2.0 ** 63
        else:
            lo, hi = -2147483649.0, 2147483648.0
        bad = np.isnan(f) | (f <= lo if dst != "i64" else f < lo) | (f >= hi)
        t = np.where(bad, 0, np.trunc(np.where(bad, 0, f))).astype(np.int64)
        t[bad] = np.iinfo(np.int64 if dst == "i64" else np.int32).min
        return wrap(t, DTYPES[dst])
    return wrap(x.astype(np.int64), DTYPES[dst])


@pytest.mark.parametrize("src", ALL)
def test_every_cast(xf, src):
    for dst in ALL:
        for n in (0, 1, 33, 1000):
            x = data(src, n, n + 1)
            want = cast_reference(x, src, dst)
            out_t = ALL[dst]
            start = poisoned(n, out_t) if dst != "bool" else np.full(n, 0xCD, np.uint8)
            kernel = f"cast_{dst}_{src}"
            (got,) = run_orders(xf, kernel, 2, 64,
                                lambda o, x=x, n=n: [o[0], x, L(n), ctypes.c_int(0)], [start])
            got = got.view(np.bool_) if dst == "bool" else got
            np.testing.assert_array_equal(got, want, err_msg=kernel)
            if dst == "bool":
                assert set(np.unique(got.view(np.uint8))) <= {0, 1}
            # Adding: integers wrap, bool ors.
            base = data(dst, n, 2)
            (got,) = run_orders(xf, kernel, 2, 64,
                                lambda o, x=x, n=n: [o[0], x, L(n), ctypes.c_int(1)], [base])
            np.testing.assert_array_equal(got, added(base, want, dst), err_msg=kernel)


@pytest.mark.parametrize("suffix", ["f32", "f64", "f16"])
def test_make_loss_gradient(xf, suffix):
    dtype = DTYPES[suffix]
    for n in (0, 1, 257, 100003):
        y = data(suffix, n, n)
        count = np.full(1, -1, np.int64)
        for order in ORDERS:
            xf.launch(f"count_above_{suffix}", 1, 256, [y, L(n), ctypes.c_double(0.5), count],
                      order)
            assert count[0] == int(np.sum(y.astype(np.float64) > 0.5))
        for cnt in (None, count):
            out = poisoned(n, dtype)
            ptr = ctypes.c_void_p(None) if cnt is None else ctypes.c_void_p(cnt.ctypes.data)
            xf.launch(f"make_loss_grad_{suffix}", 3, 64,
                      [out, L(n), ctypes.c_double(3.0), ptr, ctypes.c_int(0)])
            g = 3.0 if cnt is None else 3.0 / max(int(cnt[0]), 1)
            np.testing.assert_array_equal(out, np.full(n, g).astype(dtype))


def sort_key(x: np.ndarray, ascend: bool) -> np.ndarray:
    """The CPU's sort key: numbers in order, -0 equal to 0, NaN above all; complemented for
    a descending order."""
    if np.issubdtype(x.dtype, np.integer):
        k = x.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
    else:
        f = x.astype(np.float64)
        f = np.where(f == 0, 0.0, f)
        b = f.view(np.uint64)
        neg = (b >> np.uint64(63)) == 1
        k = np.where(neg, ~b, b | np.uint64(1 << 63))
        k[np.isnan(f)] = np.uint64(2**64 - 1)
    return k if ascend else ~k


def lane_desc(outer, n, inner, k):
    d = Lanes()
    d.outer, d.n, d.inner, d.k = outer, n, inner, k
    d.p = 1 << max(0, (n - 1).bit_length()) if n > 0 else 1
    return d


def run_sort(so, x3, k, ascend, shared, order="forward"):
    """The kept indices of each lane of `x3` (outer, n, inner), as (outer*inner, k)."""
    outer, n, inner = x3.shape
    d = lane_desc(outer, n, inner, k)
    suffix = next(s for s, t in DTYPES.items() if t == x3.dtype)
    lanes = outer * inner
    total = lanes * d.p
    keys = np.zeros(total, np.uint64)
    idx = np.full(total, -7, np.int64)
    flip = ctypes.c_ulonglong(0 if ascend else 2**64 - 1)
    so.launch(f"sort_keys_{suffix}", 3, 64, [x3.reshape(-1), d, flip, keys, idx], order)
    if shared:
        so.launch("sort_block", min(lanes, 3), 64, [keys, idx, L(lanes), L(d.p)], order, seed=1)
    else:
        size = 2
        while size <= d.p:
            j = size // 2
            while j > 0:
                so.launch("sort_step", 3, 64, [keys, idx, L(lanes), L(d.p), L(size), L(j)],
                          order)
                j //= 2
            size *= 2
    return d, idx


def sort_reference(x3, k, ascend):
    outer, n, inner = x3.shape
    lanes = np.moveaxis(x3, 1, 2).reshape(outer * inner, n)
    return np.stack([np.argsort(sort_key(lane, ascend), kind="stable")[:k] for lane in lanes]) \
        if outer * inner else np.zeros((0, k), np.int64)


@pytest.mark.parametrize("suffix", DTYPES)
def test_sorts_are_stable_in_every_thread_order(so, suffix):
    rng = np.random.default_rng(4)
    for shape in [(1, 1, 1), (2, 31, 3), (3, 33, 1), (1, 257, 2), (2, 5, 1)]:
        x = data(suffix, int(np.prod(shape)), int(rng.integers(100)))
        if suffix not in INTS:
            x[::4] = x[0]  # ties
        x3 = x.reshape(shape)
        for ascend in (True, False):
            want = sort_reference(x3, shape[1], ascend)
            for shared in (True, False):
                for order in ORDERS:
                    d, idx = run_sort(so, x3, shape[1], ascend, shared, order)
                    got = idx.reshape(-1, d.p)[:, : shape[1]]
                    np.testing.assert_array_equal(got, want, err_msg=f"{shape} {shared}")


def test_a_long_lane_sorts_in_global_memory(so):
    x = data("f32", 100003, 3)
    x[::3] = 7.0
    x3 = x.reshape(1, -1, 1)
    for ascend in (True, False):
        d, idx = run_sort(so, x3, x.size, ascend, shared=False)
        np.testing.assert_array_equal(idx[: x.size], sort_reference(x3, x.size, ascend)[0])


@pytest.mark.parametrize("suffix", DTYPES)
def test_sort_outputs(so, suffix):
    outer, n, inner, k = 2, 37, 3, 5
    x = data(suffix, outer * n * inner, 8)
    x3 = x.reshape(outer, n, inner)
    d, idx = run_sort(so, x3, k, False, True)
    picked = sort_reference(x3, k, False).reshape(outer, inner, k)
    m = outer * k * inner
    want_idx = np.moveaxis(picked, 2, 1)  # (outer, k, inner)
    want_val = np.take_along_axis(x3, want_idx, axis=1)
    dtype = DTYPES[suffix]
    for add in (0, 1):
        start = data(suffix, m, 1) if add else poisoned(m, dtype)
        (got,) = run_orders(so, f"sort_values_{suffix}", 2, 32,
                            lambda o, add=add: [o[0], x, idx, d, ctypes.c_int(add)], [start])
        w = want_val.reshape(-1)
        np.testing.assert_array_equal(got, added(start, w, suffix) if add else w)
        (got,) = run_orders(so, f"sort_indices_{suffix}", 2, 32,
                            lambda o, add=add: [o[0], idx, d, ctypes.c_int(add)], [start])
        w = wrap(want_idx.reshape(-1), dtype) if suffix in INTS else want_idx.reshape(-1)
        np.testing.assert_array_equal(got, added(start, w.astype(dtype), suffix) if add else w)
    # The mask: ones where kept (the rest cleared before), or one more.
    mask = np.zeros(x.size, dtype)
    (got,) = run_orders(so, f"sort_mask_{suffix}", 2, 32,
                        lambda o: [o[0], idx, d, ctypes.c_int(0)], [mask])
    want = np.zeros((outer, n, inner), dtype)
    np.put_along_axis(want, want_idx, 1, axis=1)
    np.testing.assert_array_equal(got.reshape(outer, n, inner), want)
    # topk's gradient lands where each kept value came from.
    g = data(suffix, m, 2)
    out = np.zeros(x.size, dtype)
    (got,) = run_orders(so, f"topk_grad_{suffix}", 2, 32, lambda o: [o[0], g, idx, d], [out])
    want = np.zeros((outer, n, inner), dtype)
    np.put_along_axis(want, want_idx, g.reshape(outer, k, inner), axis=1)
    np.testing.assert_array_equal(got.reshape(outer, n, inner), want)


@pytest.mark.parametrize("suffix", INTS)
def test_integer_unary_kernels_match_the_cpu_operators(suffix):
    """``unary_<int>`` (``elemwise.cu``): exact operators wrap, the rest go through double
    precision and saturate back, as the CPU kernels do."""
    import rsmx as mx
    from test_cuda_kernels import UNARY

    el = host_module("elemwise")
    dtype = DTYPES[suffix]
    for op, code in UNARY.items():
        x = data(suffix, 257, code)
        kw = {"clip": {"a_min": -1.5, "a_max": 20.0},
              "hard_sigmoid": {"alpha": -1.5, "beta": 20.0}}.get(op, {})
        a = mx.nd.array(x, dtype=dtype)
        with np.errstate(all="ignore"):
            want = (a.copy() if op == "_copy" else getattr(mx.nd, op)(a, **kw)).asnumpy()
        rest = [L(x.size), ctypes.c_int(code), ctypes.c_int(0), ctypes.c_double(-1.5),
                ctypes.c_double(20.0)]
        (got,) = run_orders(el, f"unary_{suffix}", 2, 64, lambda o, x=x, r=rest: [o[0], x, *r],
                            [poisoned(x.size, dtype)])
        np.testing.assert_array_equal(got, want, err_msg=op)
        base = data(suffix, x.size, 1)
        (got,) = run_orders(el, f"unary_{suffix}", 2, 64,
                            lambda o, x=x, r=rest: [o[0], x, r[0], r[1], ctypes.c_int(1), *r[3:]],
                            [base])
        np.testing.assert_array_equal(got, added(base, want, suffix), err_msg=op)


@pytest.fixture(scope="module")
def rnd():
    return host_module("random")


SAMPLE = {"uniform": 0, "normal": 1, "exponential": 2, "gamma": 3, "poisson": 4,
          "negative_binomial": 5, "generalized_negative_binomial": 6}


def run_sample(rnd, suffix, kind, a, b, m, key=11, order="forward"):
    pa = np.asarray(a, np.float64)
    pb = None if b is None else np.asarray(b, np.float64)
    n = pa.size * m
    out = poisoned(n, DTYPES[suffix])
    pb_arg = ctypes.c_void_p(None) if pb is None else pb
    rnd.launch(f"sample_{suffix}", 4, 64, [out, L(n), L(m), pa, pb_arg, ctypes.c_int(SAMPLE[kind]),
                                          ctypes.c_ulonglong(key), ctypes.c_int(0)], order)
    return out.reshape(pa.size, m).astype(np.float64)


@pytest.mark.parametrize("suffix", ["f32", "f64", "f16"])
def test_samples_have_their_moments(rnd, suffix):
    m = 20000
    cases = [  # kind, params, mean, std
        ("uniform", ([-1.0, 2.0], [1.0, 10.0]), [0.0, 6.0], [2 / 12**0.5, 8 / 12**0.5]),
        ("normal", ([0.0, 5.0], [1.0, 0.5]), [0.0, 5.0], [1.0, 0.5]),
        ("exponential", ([1.0, 4.0], None), [1.0, 0.25], [1.0, 0.25]),
        ("gamma", ([0.5, 3.0], [2.0, 1.0]), [1.0, 3.0], [2**0.5, 3**0.5]),
        ("poisson", ([3.0, 40.0], None), [3.0, 40.0], [3**0.5, 40**0.5]),
        ("negative_binomial", ([2.0, 5.0], [0.5, 0.25]), [2.0, 15.0], [2.0, 60**0.5]),
        ("generalized_negative_binomial", ([2.0, 6.0], [0.5, 0.0]), [2.0, 6.0],
         [(2 + 0.5 * 4) ** 0.5, 6**0.5]),
    ]
    for kind, (a, b), mean, std in cases:
        got = run_sample(rnd, suffix, kind, a, b, m)
        assert np.all(np.isfinite(got)), kind
        tol = 0.03 if suffix != "f16" else 0.05
        np.testing.assert_allclose(got.mean(axis=1), mean, rtol=tol, atol=tol * 2, err_msg=kind)
        np.testing.assert_allclose(got.std(axis=1), std, rtol=0.06, atol=0.03, err_msg=kind)
        if kind == "uniform":
            assert np.all(got >= np.array(a)[:, None]) and np.all(got < np.array(b)[:, None])
        if kind in ("poisson", "negative_binomial", "generalized_negative_binomial"):
            assert np.all(got == np.round(got)) and np.all(got >= 0)


def test_samples_do_not_depend_on_thread_order_and_follow_the_key(rnd):
    runs = [run_sample(rnd, "f32", "gamma", [0.3, 7.0], [1.0, 2.0], 257, order=o)
            for o in ORDERS]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])
    other = run_sample(rnd, "f32", "gamma", [0.3, 7.0], [1.0, 2.0], 257, key=12)
    assert not np.array_equal(runs[0], other)


def test_invalid_sample_parameters(rnd):
    assert np.all(np.isnan(run_sample(rnd, "f64", "gamma", [0.0, -1.0], [1.0, 1.0], 5)))
    assert np.all(np.isnan(run_sample(rnd, "f64", "gamma", [1.0], [0.0], 5)))
    assert np.all(run_sample(rnd, "f64", "poisson", [0.0, -2.0], None, 5) == 0)
    assert np.all(np.isnan(run_sample(rnd, "f64", "poisson", [np.nan], None, 5)))
    assert np.all(run_sample(rnd, "f64", "negative_binomial", [0.0, 2.0], [0.5, 1.0], 5) == 0)


@pytest.mark.parametrize("suffix", ["f32", "f64", "f16"])
def test_multinomial_frequencies_and_log_probabilities(rnd, suffix):
    probs = np.array([[0.1, 0.0, 0.6, 0.3], [0.0, 0.0, 1.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    p = probs.astype(DTYPES[suffix])
    m = 20000
    n = probs.shape[0] * m
    cats = np.full(n, -5, np.int64)
    logp = poisoned(n, DTYPES[suffix])
    for order in ORDERS:
        rnd.launch(f"multinomial_{suffix}", 3, 64, [p, L(n), L(m), L(4), ctypes.c_ulonglong(3),
                                                   cats, logp, ctypes.c_int(0)], order)
    c = cats.reshape(3, m)
    freq = np.stack([np.bincount(r, minlength=4) / m for r in c])
    np.testing.assert_allclose(freq, probs, atol=0.02)
    rows = np.repeat(np.arange(3), m)
    want = np.log(p.astype(np.float64)[rows, cats]).astype(DTYPES[suffix])
    np.testing.assert_array_equal(logp, want)


@pytest.mark.parametrize("rows", [1, 2, 33, 3000])
def test_shuffles_are_permutations(rnd, so, rows):
    p = 1 << max(0, (rows - 1).bit_length())
    keys = np.zeros(p, np.uint64)
    order = np.zeros(p, np.int64)
    rnd.launch("shuffle_keys", 2, 64, [keys, order, L(rows), L(p), ctypes.c_ulonglong(5)])
    if p <= 2048:
        so.launch("sort_block", 1, 64, [keys, order, L(1), L(p)])
    else:
        size = 2
        while size <= p:
            j = size // 2
            while j > 0:
                so.launch("sort_step", 3, 64, [keys, order, L(1), L(p), L(size), L(j)])
                j //= 2
            size *= 2
    perm = order[:rows]
    assert sorted(perm.tolist()) == list(range(rows))
    if rows > 30:
        assert not np.array_equal(perm, np.arange(rows))
    x = data("i32", rows * 3, 1)
    out = poisoned(rows * 3, np.int32)
    rnd.launch("shuffle_rows_i32", 2, 64, [out, x, order, L(rows), L(3), ctypes.c_int(0)])
    np.testing.assert_array_equal(out.reshape(rows, 3), x.reshape(rows, 3)[perm])


@pytest.mark.parametrize("suffix", ["f32", "f64", "f16"])
def test_attribute_samplers_have_their_moments(rnd, suffix):
    n = 40000
    for kind, a, b, mean, std in [("exponential", 2.0, 0.0, 0.5, 0.5),
                                  ("gamma", 2.0, 3.0, 6.0, 18**0.5),
                                  ("poisson", 25.0, 0.0, 25.0, 5.0),
                                  ("negative_binomial", 3.0, 0.5, 3.0, 6**0.5),
                                  ("generalized_negative_binomial", 4.0, 0.25, 4.0, 2**1.5)]:
        runs = []
        for order in ORDERS:
            out = poisoned(n, DTYPES[suffix])
            rnd.launch(f"random_dist_{suffix}", 4, 64,
                       [out, L(n), ctypes.c_int(SAMPLE[kind]), ctypes.c_double(a),
                        ctypes.c_double(b), ctypes.c_ulonglong(8), ctypes.c_int(0)], order)
            runs.append(out)
        assert all(np.array_equal(runs[0], r) for r in runs[1:])
        got = runs[0].astype(np.float64)
        assert np.all(np.isfinite(got)), kind
        np.testing.assert_allclose(got.mean(), mean, rtol=0.04, err_msg=kind)
        np.testing.assert_allclose(got.std(), std, rtol=0.06, err_msg=kind)


@pytest.mark.parametrize("suffix", ["i32", "i64"])
def test_random_integers_cover_their_range(rnd, suffix):
    dtype = DTYPES[suffix]
    ii = np.iinfo(dtype)
    for low, high in [(-3, 4), (0, 1), (10, 1000), (int(ii.min), int(ii.max))]:
        n = 20000
        out = poisoned(n, dtype)
        rnd.launch(f"random_randint_{suffix}", 4, 64,
                   [out, L(n), L(low), L(high), ctypes.c_ulonglong(4), ctypes.c_int(0)])
        assert out.min() >= low and out.max() < high
        if high - low < 10:
            assert set(np.unique(out)) == set(range(low, high))
        else:
            np.testing.assert_allclose(out.astype(np.float64).mean(), (low + high - 1) / 2,
                                       rtol=0.05, atol=(high - low) * 0.02)

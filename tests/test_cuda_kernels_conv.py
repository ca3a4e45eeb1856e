"""The convolution and pooling kernels (``conv.cu``, ``pool.cu``) run on the host: im2col,
the gathering col2im, the bias kernels and every pooling kind forward and backward against
numpy references in float64, on fresh inputs of awkward sizes with poisoned outputs, and
with the same bits whatever order a block's threads run in."""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest
from test_cuda_kernels import BLOCK, DTYPES, ORDERS, poisoned
from test_cuda_kernels_reduce import host_module

# The kernels run on the host by themselves, never through the engine.
pytestmark = pytest.mark.engine_free

FLOATS = ("f32", "f64", "f16")
L = ctypes.c_longlong
I3 = ctypes.c_int * 3
TOL = {"f32": 2e-5, "f64": 1e-12, "f16": 4e-3}
SMALL = 32
POOLS = {"max": 0, "avg": 1, "sum": 2, "lp": 3}
NULL = ctypes.c_void_p(None)


class ColGeom(ctypes.Structure):
    _fields_ = [("channels", L), ("input", I3), ("output", I3), ("kernel", I3), ("stride", I3),
                ("dilate", I3), ("pad", I3)]


class PoolGeom(ctypes.Structure):
    _fields_ = [("input", I3), ("output", I3), ("kernel", I3), ("stride", I3), ("pad", I3),
                ("pool", ctypes.c_int), ("include_pad", ctypes.c_int), ("p_value", ctypes.c_int)]


@pytest.fixture(scope="module")
def conv():
    return host_module("conv")


@pytest.fixture(scope="module")
def pool():
    return host_module("pool")


def grid(n: int) -> int:
    # Fewer blocks than items, so the grid-stride loops go round more than once.
    return max(1, min(-(-n // BLOCK), 5))


def block(n: int) -> int:
    return BLOCK if n > 50000 else SMALL


def in_orders(module, kernel, make_out, args, n, blocks=None, threads=None):
    """Runs ``kernel(out, *args)`` in every thread order on a fresh output each time; all
    must agree bit for bit."""
    results = []
    for order in ORDERS:
        out = make_out()
        module.launch(kernel, blocks or grid(n), threads or block(n), [out, *args], order,
                      seed=n)
        results.append(out)
    assert len({r.tobytes() for r in results}) == 1, kernel
    return results[0]


def data(suffix, shape, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-2, 2, shape).astype(DTYPES[suffix])


def close(got, want, suffix, scale=1.0, what=""):
    tol = TOL[suffix]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * scale,
                               equal_nan=True, err_msg=what)


# ---- convolution geometry -------------------------------------------------------------


def conv_out(i, k, s, d, p):
    return (i + 2 * p - (d * (k - 1) + 1)) // s + 1


def col_geom(channels, inp, k, s, d, p, out=None):
    out = out or [conv_out(*a) for a in zip(inp, k, s, d, p, strict=True)]
    return ColGeom(channels, I3(*inp), I3(*out), I3(*k), I3(*s), I3(*d), I3(*p)), out


def im2col_ref(x, g):
    """(images, channels * taps, cols) from (images, channels, D, H, W) in float64."""
    k, s, d, p, out = (list(getattr(g, f)) for f in ("kernel", "stride", "dilate", "pad",
                                                     "output"))
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pi, pi + si * oi + di * ki)
                                                           for pi, si, oi, di, ki in
                                                           zip(p, s, out, d, k, strict=True)])
    taps = []
    for t in itertools.product(*[range(v) for v in k]):
        sl = tuple(slice(t[i] * d[i], t[i] * d[i] + s[i] * out[i], s[i]) for i in range(3))
        taps.append(xp[(slice(None), slice(None)) + sl][..., :out[0], :out[1], :out[2]])
    col = np.stack(taps, axis=2)  # images, channels, taps, od, oh, ow
    return col.reshape(x.shape[0], x.shape[1] * len(taps), int(np.prod(out)))


def col2im_ref(col, g, images):
    """The adjoint of im2col_ref: each column entry added to the pixel it read."""
    k, s, d, p, out = (list(getattr(g, f)) for f in ("kernel", "stride", "dilate", "pad",
                                                     "output"))
    inp = list(g.input)
    c = g.channels
    col = col.astype(np.float64).reshape(images, c, int(np.prod(k)), *out)
    xp = np.zeros([images, c] + [inp[i] + 2 * p[i] + s[i] * out[i] + d[i] * k[i]
                                 for i in range(3)])
    for ti, t in enumerate(itertools.product(*[range(v) for v in k])):
        sl = tuple(slice(t[i] * d[i], t[i] * d[i] + s[i] * out[i], s[i]) for i in range(3))
        xp[(slice(None), slice(None)) + sl] += col[:, :, ti]
    return xp[:, :, p[0]:p[0] + inp[0], p[1]:p[1] + inp[1], p[2]:p[2] + inp[2]]


GEOMS = [
    # images, channels, input, kernel, stride, dilate, pad
    (2, 3, (1, 5, 6), (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0)),
    (1, 2, (1, 7, 6), (1, 3, 2), (1, 2, 3), (1, 1, 2), (0, 1, 2)),
    (3, 1, (1, 1, 9), (1, 1, 4), (1, 1, 2), (1, 1, 1), (0, 0, 3)),
    (2, 2, (4, 5, 5), (2, 3, 2), (2, 1, 2), (1, 2, 1), (1, 1, 0)),
    (1, 1, (1, 3, 3), (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 4, 4)),
    (1, 1, (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0)),
    (0, 3, (1, 4, 4), (1, 2, 2), (1, 1, 1), (1, 1, 1), (0, 0, 0)),
    (1, 1, (1, 1, 100003), (1, 1, 3), (1, 1, 2), (1, 1, 1), (0, 0, 1)),
    (2, 3, (1, 31, 33), (1, 5, 3), (1, 3, 2), (1, 2, 3), (0, 2, 1)),
]


@pytest.mark.parametrize("suffix", FLOATS)
def test_im2col_and_col2im_match_numpy(conv, suffix):
    for case, (images, ch, inp, k, s, d, p) in enumerate(GEOMS):
        g, out = col_geom(ch, inp, k, s, d, p)
        x = data(suffix, (images, ch, *inp), case)
        rows, cols = ch * int(np.prod(k)), int(np.prod(out))
        n = images * rows * cols
        col = in_orders(conv, f"im2col_{suffix}", lambda n=n: poisoned(n, DTYPES[suffix]),
                        [x, L(n), g], n)
        # A copy of existing values: no rounding.
        np.testing.assert_array_equal(col.reshape(images, rows, cols),
                                      im2col_ref(x, g).astype(DTYPES[suffix]), err_msg=str(case))
        dcol = data(suffix, (images, rows, cols), case + 100)
        m = x.size
        want = col2im_ref(dcol, g, images)
        got = in_orders(conv, f"col2im_{suffix}", lambda m=m: poisoned(m, DTYPES[suffix]),
                        [dcol, L(m), g, ctypes.c_int(0)], m)
        close(got.reshape(x.shape), want, suffix, np.prod(k) * 2, str(case))
        base = data(suffix, x.shape, case + 200)
        got = in_orders(conv, f"col2im_{suffix}", lambda b=base: b.copy(),
                        [dcol, L(m), g, ctypes.c_int(1)], m)
        close(got, want + base.astype(np.float64), suffix, np.prod(k) * 2 + 2, str(case))


def test_a_grid_smaller_than_the_image_windows_only_part_of_it(conv):
    g, out = col_geom(2, (1, 6, 7), (1, 2, 2), (1, 2, 2), (1, 1, 1), (0, 0, 0), out=[1, 2, 3])
    x = data("f64", (1, 2, 1, 6, 7), 5)
    n = 2 * 4 * 6
    col = in_orders(conv, "im2col_f64", lambda: poisoned(n, np.float64), [x, L(n), g], n)
    np.testing.assert_array_equal(col.reshape(1, 8, 6), im2col_ref(x, g))
    got = in_orders(conv, "col2im_f64", lambda: poisoned(x.size, np.float64),
                    [col, L(x.size), g, ctypes.c_int(0)], x.size)
    np.testing.assert_array_equal(got.reshape(x.shape), col2im_ref(col, g, 1))


@pytest.mark.parametrize("suffix", FLOATS)
def test_bias_add_and_its_gradient(conv, suffix):
    for images, ch, plane in [(0, 3, 4), (1, 1, 1), (2, 3, 31), (3, 33, 5), (1, 2, 100003),
                              (5, 4, 0)]:
        y = data(suffix, (images, ch, plane), plane)
        b = data(suffix, (ch,), ch)
        n = y.size
        got = in_orders(conv, f"bias_add_{suffix}", lambda y=y: y.copy(),
                        [b, L(n), L(max(plane, 1)), L(ch)], n)
        close(got, y.astype(np.float64) + b.astype(np.float64)[:, None], suffix, 2)
        want = y.astype(np.float64).sum(axis=(0, 2))
        scale = np.abs(y.astype(np.float64)).sum(axis=(0, 2)).max(initial=1.0)
        for add in (0, 1):
            start = data(suffix, (ch,), 7)
            make = (lambda s=start: s.copy()) if add else (lambda c=ch: poisoned(c, DTYPES[suffix]))
            for threads in (SMALL, BLOCK):
                got = in_orders(conv, f"bias_grad_{suffix}", make,
                                [y, L(images), L(ch), L(plane), ctypes.c_int(add)], ch,
                                blocks=max(1, min(ch, 3)), threads=threads)
                close(got, want + (start.astype(np.float64) if add else 0), suffix, scale,
                      f"{images} {ch} {plane} add={add}")


# ---- pooling --------------------------------------------------------------------------


def pool_out(i, k, s, p, full):
    span = i + 2 * p - k
    return 1 + (-(-span // s) if full else span // s)


def window(i, o, k, s, p):
    start = o * s - p
    end = min(start + k, i + p)
    padded = max(end - start, 0)
    lo, hi = max(start, 0), min(max(end, 0), i)
    return lo, max(hi, lo), padded


def windows(inp, out, k, s, p):
    for o in itertools.product(*[range(v) for v in out]):
        w = [window(inp[i], o[i], k[i], s[i], p[i]) for i in range(3)]
        yield o, tuple(slice(a, b) for a, b, _ in w), int(np.prod([c for _, _, c in w]))


def flat(a):
    """(planes, window elements) of a window's slice."""
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:])))


def pool_ref(x, kind, inp, out, k, s, p, include_pad, pv):
    """Forward pooling of (planes, D, H, W) in float64, and max pooling's first arg-max."""
    x64 = x.astype(np.float64)
    planes = x.shape[0]
    y = np.zeros((planes, *out))
    at = np.full((planes, *out), -1.0)
    lowest = float(np.finfo(x.dtype).min)
    for o, sl, padded in windows(inp, out, k, s, p):
        win = flat(x64[(slice(None),) + sl])
        if kind == "max":
            if win.shape[1]:
                y[(slice(None),) + o] = np.maximum(np.nan_to_num(win, nan=lowest).max(1), lowest)
                best = np.nan_to_num(win, nan=-np.inf).argmax(1)
                idx = np.indices([sl[i].stop - sl[i].start for i in range(3)]).reshape(3, -1)
                pos = [(idx[i][best] + sl[i].start) for i in range(3)]
                at[(slice(None),) + o] = (pos[0] * inp[1] + pos[1]) * inp[2] + pos[2]
            else:
                y[(slice(None),) + o] = lowest
        elif kind == "lp":
            y[(slice(None),) + o] = (win ** pv).sum(1) ** (1.0 / pv)
        else:
            size = padded if include_pad or kind != "avg" else win.shape[1]
            total = win.sum(1)
            y[(slice(None),) + o] = total / size if kind == "avg" and size else (
                0.0 if kind == "avg" else total)
    return y, at


def unpool_ref(dy, x, y, kind, inp, out, k, s, p, include_pad, pv):
    planes = x.shape[0]
    dx = np.zeros(x.shape)
    x64, y64, g64 = (v.astype(np.float64) for v in (x, y, dy))
    for o, sl, padded in windows(inp, out, k, s, p):
        g = g64[(slice(None),) + o]
        if kind == "max":
            win = flat(x64[(slice(None),) + sl])
            if not win.shape[1]:
                continue
            hit = win == y64[(slice(None),) + o][:, None]
            first = np.where(hit.any(1), hit.argmax(1), win.shape[1] - 1)
            sub = flat(dx[(slice(None),) + sl]).copy()
            sub[np.arange(planes), first] += g
            dx[(slice(None),) + sl] = sub.reshape(dx[(slice(None),) + sl].shape)
        elif kind == "lp":
            q = x64[(slice(None),) + sl] / y64[(slice(None),) + o].reshape(-1, 1, 1, 1)
            dx[(slice(None),) + sl] += g.reshape(-1, 1, 1, 1) * q ** (pv - 1)
        else:
            size = padded if include_pad or kind != "avg" else int(
                np.prod([v.stop - v.start for v in sl]))
            if kind == "avg":
                if size == 0:
                    continue
                g = g / size
            dx[(slice(None),) + sl] += g.reshape(-1, 1, 1, 1)
    return dx


POOL_CASES = [
    # planes, input, kernel, stride, pad, full
    (3, (1, 6, 6), (1, 2, 2), (1, 2, 2), (0, 0, 0), False),
    (2, (1, 7, 5), (1, 3, 3), (1, 2, 2), (0, 1, 1), True),
    (2, (1, 1, 31), (1, 1, 4), (1, 1, 3), (0, 0, 2), False),
    (1, (4, 5, 6), (2, 3, 2), (2, 1, 2), (1, 1, 1), True),
    (2, (1, 5, 5), (1, 5, 5), (1, 1, 1), (0, 0, 0), False),  # global
    (1, (1, 3, 3), (1, 3, 3), (1, 1, 1), (0, 2, 2), False),  # windows in the padding
    (0, (1, 4, 4), (1, 2, 2), (1, 1, 1), (0, 0, 0), False),
    (1, (1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), False),
    (2, (1, 1, 2), (1, 1, 2), (1, 1, 1), (0, 0, 2), False),  # windows wholly in the padding
    (1, (1, 1, 100003), (1, 1, 3), (1, 1, 2), (0, 0, 1), True),
]


def pool_geom(kind, inp, k, s, p, full, include_pad=1, pv=2):
    out = [pool_out(*a, full) for a in zip(inp, k, s, p, strict=True)]
    return PoolGeom(I3(*inp), I3(*out), I3(*k), I3(*s), I3(*p), POOLS[kind], include_pad,
                    pv), out


@pytest.mark.parametrize("suffix", FLOATS)
@pytest.mark.parametrize("kind", ["max", "avg", "sum", "lp"])
def test_pooling_forward_and_backward_match_numpy(pool, suffix, kind):
    dt = DTYPES[suffix]
    for case, (planes, inp, k, s, p, full) in enumerate(POOL_CASES):
        for include_pad, pv in ([(1, 2), (0, 2)] if kind == "avg" else
                                [(1, 1), (1, 2), (1, 3)] if kind == "lp" else [(1, 2)]):
            g, out = pool_geom(kind, inp, k, s, p, full, include_pad, pv)
            x = data(suffix, (planes, *inp), case)
            if kind == "lp":
                x = np.abs(x) + dt(0.25)
            n_out, n_in = planes * int(np.prod(out)), x.size
            what = f"{case} pad={include_pad} p={pv}"
            y_want, at_want = pool_ref(x, kind, inp, out, k, s, p, include_pad, pv)
            y = in_orders(pool, f"pool_{suffix}", lambda n=n_out: poisoned(n, dt),
                          [NULL, x, L(n_out), g, ctypes.c_int(0)], n_out)
            scale = float(np.prod(k)) * 2
            close(y.reshape(y_want.shape), y_want, suffix, scale, what)
            if kind == "max":
                at = poisoned(n_out, dt)
                pool.launch(f"pool_{suffix}", grid(n_out), block(n_out),
                            [poisoned(n_out, dt), at, x, L(n_out), g, ctypes.c_int(0)])
                exact = at_want.size == 0 or at_want.max() < 2048 or suffix != "f16"
                if exact:
                    np.testing.assert_array_equal(at.reshape(at_want.shape), at_want, what)
            dy = data(suffix, y.shape, case + 50)
            dx_want = unpool_ref(dy.reshape(y_want.shape), x, y.reshape(y_want.shape), kind,
                                 inp, out, k, s, p, include_pad, pv)
            routes = [NULL]
            if kind == "max":
                sources = [NULL, at] if exact else [NULL]
                routes = []
                for src in sources:
                    r = in_orders(pool, f"pool_route_{suffix}",
                                  lambda n=n_out: np.full(n, -7, np.int64),
                                  [src, x, y, L(n_out), g], n_out)
                    routes.append(r)
                if len(routes) == 2:
                    np.testing.assert_array_equal(routes[0], routes[1], what)
            for route in routes:
                for add in (0, 1):
                    base = data(suffix, x.shape, case + 70)
                    make = (lambda b=base: b.copy()) if add else (
                        lambda n=n_in: poisoned(n, dt))
                    dx = in_orders(pool, f"pool_backward_{suffix}", make,
                                   [dy, x, y, route, L(n_in), g, ctypes.c_int(add)], n_in)
                    want = dx_want + (base.astype(np.float64) if add else 0)
                    close(dx.reshape(x.shape), want, suffix, scale * 2, f"{what} add={add}")


def test_max_pooling_routes_ties_and_nan_as_the_cpu_does(pool):
    g, out = pool_geom("max", (1, 2, 4), (1, 2, 2), (1, 2, 2), (0, 0, 0), False)
    x = np.array([[[[1.0, 3.0, np.nan, 5.0], [3.0, 2.0, 5.0, 5.0]]]])
    y = np.zeros(2)
    at = np.zeros(2)
    pool.launch("pool_f64", 1, 4, [y, at, x, L(2), g, ctypes.c_int(0)])
    np.testing.assert_array_equal(y, [3.0, 5.0])
    np.testing.assert_array_equal(at, [1.0, 3.0])  # the first maximum; NaN never wins
    route = np.zeros(2, np.int64)
    pool.launch("pool_route_f64", 1, 4, [route, NULL, x, y, L(2), g])
    np.testing.assert_array_equal(route, [1, 3])
    dx = np.zeros(8)
    pool.launch("pool_backward_f64", 1, 4, [dx, np.array([10.0, 20.0]), x, y, route, L(8), g,
                                            ctypes.c_int(0)])
    np.testing.assert_array_equal(dx, [0, 10, 0, 20, 0, 0, 0, 0])

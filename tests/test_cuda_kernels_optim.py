"""Host builds of the optimizer, activation, dropout and gradient kernels (``optim.cu``,
``nn.cu``, ``grad.cu``) against rsmx's CPU operators: every kernel and dtype on fresh
random inputs of awkward sizes with poisoned outputs, in every thread order. The fused
updates round operation by operation as the CPU does, so they must match it bit for bit."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import rsmx as mx
from rsmx.cuda import build, host
from test_cuda_kernels import BLOCK, ORDERS, SIZES, HostModule, grid_for, poisoned

MODULES = ("optim", "nn", "grad")


@pytest.fixture(scope="module")
def modules():
    """This file's modules built for the host, from the shared host library cache."""
    headers, sources = build.sources()
    paths = host.build_all()
    return {name: HostModule(paths[name], host.kernel_names(name, sources[name], headers))
            for name in MODULES}


FLOATS = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
TOL = {"f32": 2e-6, "f64": 1e-12, "f16": 1e-3}


def run_orders(module, kernel: str, n: int, written: list[np.ndarray], make_args,
               launch_items: int | None = None) -> list[np.ndarray]:
    """Runs ``kernel`` in every thread order on fresh copies of the arrays it writes
    (``written``); ``make_args`` builds the argument list from those copies. Every order
    must give the same bytes; returns the first order's arrays."""
    results = []
    items = n if launch_items is None else launch_items
    for order in ORDERS:
        arrays = [w.copy() for w in written]
        module.launch(kernel, grid_for(items), BLOCK, make_args(arrays), order, seed=items)
        results.append(arrays)
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert a.tobytes() == b.tobytes(), f"{kernel}: thread orders disagree"
    return results[0]


def same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, what
    ok = (got == want) | (np.isnan(got) & np.isnan(want))
    assert ok.all(), f"{what}: {np.flatnonzero(~ok)[:5]} {got[~ok][:5]} != {want[~ok][:5]}"


def close(got, want, suffix: str, what: str) -> None:
    tol = TOL[suffix]
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol, equal_nan=True, err_msg=what)


def cpu(name: str):
    return getattr(mx.nd._internal if name.startswith("_") else mx.nd, name)


def nd(a: np.ndarray):
    return mx.nd.array(a, dtype=a.dtype)


# ---------------------------------------------------------------------------------------
# Fused optimizer updates.

class Hyper(ctypes.Structure):
    _fields_ = [(f, ctypes.c_double) for f in (
        "lr", "wd", "rescale_grad", "clip_gradient", "momentum", "beta1", "beta2", "epsilon",
        "gamma1", "gamma2", "clip_weights", "lamda1", "beta", "wd_lh", "rho", "one_minus_rho")]


#: Each update: its code (the order of `enum rsmx_update`), its states (those of a
#: multi-precision kind are float32, the master weight last), how to draw each state, and
#: its arguments, clipping given separately.
UPDATES = {
    "sgd_update": (0, [], dict(lr=0.1, wd=0.01, rescale_grad=0.5)),
    "sgd_mom_update": (1, ["any"], dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5)),
    "mp_sgd_update": (2, ["w32"], dict(lr=0.1, wd=0.01, rescale_grad=0.5)),
    "mp_sgd_mom_update": (3, ["any", "w32"],
                          dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5)),
    "nag_mom_update": (4, ["any"], dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5)),
    "mp_nag_mom_update": (5, ["any", "w32"],
                          dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5)),
    "adam_update": (6, ["any", "pos"], dict(lr=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8,
                                            wd=0.01, rescale_grad=0.5)),
    "rmsprop_update": (7, ["pos"], dict(lr=0.01, gamma1=0.95, epsilon=1e-8, wd=0.01,
                                        rescale_grad=0.5, clip_weights=0.8)),
    "rmspropalex_update": (8, ["big", "small", "any"],
                           dict(lr=0.01, gamma1=0.95, gamma2=0.9, epsilon=1e-8, wd=0.01,
                                rescale_grad=0.5, clip_weights=0.8)),
    "ftrl_update": (9, ["any", "pos"], dict(lr=0.1, lamda1=0.01, beta=1.0, wd=0.01,
                                            rescale_grad=0.5)),
    "signsgd_update": (10, [], dict(lr=0.1, wd=0.01, rescale_grad=0.5)),
    "signum_update": (11, ["any"], dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5,
                                        wd_lh=0.02)),
    "_rsmx_adagrad_update": (12, ["pos"], dict(lr=0.1, epsilon=1e-7, wd=0.01,
                                               rescale_grad=0.5)),
    "_rsmx_adadelta_update": (13, ["pos", "pos"], dict(rho=0.9, epsilon=1e-5, wd=0.01,
                                                      rescale_grad=0.5)),
    "_rsmx_agg_sgd_update": (14, [], dict(lr=0.1, wd=0.01, rescale_grad=0.5)),
    "_rsmx_agg_mp_sgd_update": (15, ["w32"], dict(lr=0.1, wd=0.01, rescale_grad=0.5)),
}
MIXED = {"mp_sgd_update", "mp_sgd_mom_update", "mp_nag_mom_update", "_rsmx_agg_mp_sgd_update"}
#: Arguments declared as doubles (the Python-side optimizers); the rest are float32.
DOUBLE_ARGS = {"_rsmx_adagrad_update", "_rsmx_adadelta_update"}


def hyper(name: str, attrs: dict, dtype) -> Hyper:
    """The kernel's hyperparameters: parsed as the CPU does (float32 unless declared
    double), then rounded to the type the update computes in."""
    h = Hyper(lr=0, wd=0, rescale_grad=1, clip_gradient=-1, clip_weights=-1)
    for k, v in attrs.items():
        setattr(h, k, v if name in DOUBLE_ARGS else float(np.float32(v)))
    compute = np.float32 if name in MIXED else dtype
    for f, _ in Hyper._fields_[:-1]:
        setattr(h, f, float(compute(getattr(h, f))))
    h.one_minus_rho = float(compute(1.0 - attrs.get("rho", 0.0)))  # rho: adadelta's, a double
    return h


def draw_state(kind: str, w: np.ndarray, rng, dtype) -> np.ndarray:
    n = w.size
    if kind == "w32":
        return w.astype(np.float32)
    if kind == "pos":
        return rng.uniform(0, 2, n).astype(dtype)
    if kind == "big":  # rmspropalex's n: above g² so the root stays real
        return rng.uniform(4, 6, n).astype(dtype)
    if kind == "small":
        return rng.uniform(-1, 1, n).astype(dtype)
    return rng.uniform(-1, 1, n).astype(dtype)


def update_case(name: str, suffix: str, n: int, clip: float, seed: int):
    """Weight, gradient, states and arguments of one update."""
    code, states, attrs = UPDATES[name]
    dtype = FLOATS[suffix]
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, n).astype(dtype)
    g = rng.uniform(-4, 4, n).astype(dtype)  # beyond the clip bound, once rescaled
    g[::13] = 0
    state_type = np.float32 if name in MIXED else dtype
    s = [draw_state(k, w, rng, state_type) for k in states]
    attrs = dict(attrs, clip_gradient=clip)
    return code, w, g, s, attrs


def cpu_update(name, w, g, states, attrs, in_place=False):
    """The CPU's new weight and states; the output is a new array unless ``in_place``
    (nag_mom_update reads the weight again after writing its output)."""
    arrs = [nd(w), nd(g), *[nd(s) for s in states]]
    out = arrs[0] if in_place else mx.nd.zeros(w.shape, dtype=w.dtype)
    cpu(name)(*arrs, out=out, **attrs)
    return out.asnumpy(), [a.asnumpy() for a in arrs[2:]]


def launch_update(module, name, suffix, out, w, g, states, attrs, req=1):
    """Runs the update kernel in every order on copies of ``out`` and the states."""
    code, _, _ = UPDATES[name]
    h = hyper(name, attrs, FLOATS[suffix])
    n = w.size
    null = ctypes.c_void_p(0)
    if name in MIXED:
        def make(arrs):
            o, *st = arrs
            mom, w32 = (st[0], st[1]) if len(st) == 2 else (null, st[0])
            return [o, g, mom, w32, ctypes.c_longlong(n), ctypes.c_int(code), ctypes.c_int(req),
                    h]
        return run_orders(module, f"mp_update_{suffix}", n, [out, *states], make)

    def make(arrs):
        o, *st = arrs
        st = st + [null] * (3 - len(st))
        return [o, w, g, *st, ctypes.c_longlong(n), ctypes.c_int(code), ctypes.c_int(req), h]
    return run_orders(module, f"update_{suffix}", n, [out, *states], make)


@pytest.mark.parametrize("suffix", FLOATS)
@pytest.mark.parametrize("name", UPDATES)
def test_updates_match_the_cpu_bit_for_bit(modules, name, suffix):
    m = modules["optim"]
    for i, n in enumerate(SIZES):
        clip = 1.0 if i % 2 else -1.0
        _, w, g, states, attrs = update_case(name, suffix, n, clip, seed=i)
        want_w, want_s = cpu_update(name, w, g, states, attrs)
        got_w, *got_s = launch_update(m, name, suffix, poisoned(n, w.dtype), w, g, states,
                                      attrs)
        same_bits(got_w, want_w, f"{name} weight n={n}")
        for j, (a, b) in enumerate(zip(got_s, want_s, strict=True)):
            same_bits(a, b, f"{name} state {j} n={n}")


@pytest.mark.parametrize("name", UPDATES)
def test_updates_run_in_place_add_and_skip_the_output(modules, name):
    m = modules["optim"]
    n = 257
    _, w, g, states, attrs = update_case(name, "f32", n, 0.5, seed=7)
    want_w, want_s = cpu_update(name, w, g, states, attrs, in_place=True)
    # In place: the output is the weight itself.
    code, _, _ = UPDATES[name]
    h = hyper(name, attrs, np.float32)
    null = ctypes.c_void_p(0)
    wc, sc = w.copy(), [s.copy() for s in states]
    if name in MIXED:
        mom, w32 = (sc[0], sc[1]) if len(sc) == 2 else (null, sc[0])
        m.launch("mp_update_f32", grid_for(n), BLOCK,
                 [wc, g, mom, w32, ctypes.c_longlong(n), ctypes.c_int(code), ctypes.c_int(1), h])
    else:
        st = sc + [null] * (3 - len(sc))
        m.launch("update_f32", grid_for(n), BLOCK,
                 [wc, wc, g, *st, ctypes.c_longlong(n), ctypes.c_int(code), ctypes.c_int(1), h])
    same_bits(wc, want_w, f"{name} in place")
    for a, b in zip(sc, want_s, strict=True):
        same_bits(a, b, f"{name} in-place state")
    want_w, want_s = cpu_update(name, w, g, states, attrs)
    # Added to the output; and a null request updates the states only.
    base = np.linspace(-1, 1, n).astype(np.float32)
    got, *_ = launch_update(m, name, "f32", base, w, g, states, attrs, req=2)
    same_bits(got, (base + want_w).astype(np.float32), f"{name} add")
    got, *got_s = launch_update(m, name, "f32", poisoned(n, np.float32), w, g, states, attrs,
                                req=0)
    assert np.isnan(got).all()
    for a, b in zip(got_s, want_s, strict=True):
        same_bits(a, b, f"{name} null-request state")


# ---------------------------------------------------------------------------------------
# Activation, LeakyReLU, Dropout.

ACTS = {"relu": 0, "sigmoid": 1, "tanh": 2, "softrelu": 3, "softsign": 4}
LEAKY = {"leaky": 0, "elu": 1, "selu": 2, "gelu": 3}


def data(suffix: str, n: int, seed: int, low=-4.0, high=4.0) -> np.ndarray:
    x = np.random.default_rng(seed).uniform(low, high, n)
    x[::11] = 0
    if n > 40:
        x[7] = 25.0  # softrelu's linear branch
    return x.astype(FLOATS[suffix])


def elementwise(module, kernel, out_dtype, n, inputs, rest, base=None):
    """``kernel(out, *inputs, n, *rest)`` in every order; out poisoned (or ``base``)."""
    out = poisoned(n, out_dtype) if base is None else base
    return run_orders(module, kernel, n, [out],
                      lambda a: [a[0], *inputs, ctypes.c_longlong(n), *rest])[0]


@pytest.mark.parametrize("suffix", FLOATS)
@pytest.mark.parametrize("act", ACTS)
def test_activation_and_its_backward_match_the_cpu(modules, act, suffix):
    m = modules["nn"]
    for n in SIZES:
        x = data(suffix, n, n)
        g = data(suffix, n, n + 1)
        code = [ctypes.c_int(ACTS[act]), ctypes.c_int(0)]
        y = elementwise(m, f"activation_{suffix}", x.dtype, n, [x], code)
        want = mx.nd.Activation(nd(x), act_type=act).asnumpy()
        close(y, want, suffix, f"{act} n={n}")
        # The backward takes the output (the input for softsign).
        v = x if act == "softsign" else want
        dx = elementwise(m, f"activation_backward_{suffix}", x.dtype, n, [g, v], code)
        want = mx.nd._internal._backward_Activation(nd(g), nd(v), act_type=act).asnumpy()
        close(dx, want, suffix, f"backward {act} n={n}")


def test_activation_adds_and_runs_in_place(modules):
    m = modules["nn"]
    x = data("f32", 257, 3)
    base = np.full(257, 0.5, np.float32)
    got = elementwise(m, "activation_f32", np.float32, 257, [x],
                      [ctypes.c_int(ACTS["tanh"]), ctypes.c_int(1)], base=base)
    close(got, 0.5 + np.tanh(x.astype(np.float64)), "f32", "tanh add")
    y = x.copy()
    m.launch("activation_f32", 2, BLOCK, [y, y, ctypes.c_longlong(257), ctypes.c_int(0),
                                          ctypes.c_int(0)])
    np.testing.assert_array_equal(y, np.maximum(x, 0))


@pytest.mark.parametrize("suffix", FLOATS)
@pytest.mark.parametrize("kind", LEAKY)
def test_leaky_relu_kinds_match_the_cpu(modules, kind, suffix):
    m = modules["nn"]
    for n in SIZES:
        x = data(suffix, n, 2 * n, low=-12, high=4)
        g = data(suffix, n, 2 * n + 1)
        rest = [ctypes.c_int(LEAKY[kind]), ctypes.c_int(0), ctypes.c_double(0.3)]
        y = elementwise(m, f"leaky_{suffix}", x.dtype, n, [x], rest)
        want = mx.nd.LeakyReLU(nd(x), act_type=kind, slope=0.3).asnumpy()
        close(y, want, suffix, f"{kind} n={n}")
        dx = elementwise(m, f"leaky_backward_{suffix}", x.dtype, n, [g, x], rest)
        want = mx.nd._internal._backward_LeakyReLU(nd(g), nd(x), act_type=kind,
                                                   slope=0.3).asnumpy()
        close(dx, want, suffix, f"backward {kind} n={n}")


@pytest.mark.parametrize("suffix", FLOATS)
@pytest.mark.parametrize("shape, gshape", [((2, 3, 5), (3,)), ((7, 4), (4,)), ((9,), (1,)),
                                           ((31, 33, 3), (1,)), ((2, 5, 10007), (5,)), ((3, 40), (40,)),
                                           ((0, 3), (3,))])
def test_prelu_and_its_gradients_match_the_cpu(modules, suffix, shape, gshape):
    m = modules["nn"]
    n = int(np.prod(shape))
    x = data(suffix, n, n).reshape(shape)
    g = data(suffix, n, n + 1).reshape(shape)
    gamma = np.random.default_rng(5).uniform(0.05, 0.5, gshape).astype(x.dtype)
    channels = 1 if gshape == (1,) else gshape[0]
    inner = max(n, 1) if channels == 1 else int(np.prod(shape[2:]))
    layout = [ctypes.c_longlong(channels), ctypes.c_longlong(inner), ctypes.c_int(0)]
    y = elementwise(m, f"prelu_{suffix}", x.dtype, n, [x, gamma], layout)
    want = mx.nd.LeakyReLU(data=nd(x), gamma=nd(gamma), act_type="prelu").asnumpy().reshape(-1)
    close(y, want, suffix, "prelu")
    dx = elementwise(m, f"prelu_backward_{suffix}", x.dtype, n, [g, x, gamma], layout)
    # The gradients in float64: the slope of each element's channel where x <= 0.
    xf, gf = x.astype(np.float64), g.astype(np.float64)
    slope = np.broadcast_to(gamma.astype(np.float64).reshape((-1,) + (1,) * max(0, x.ndim - 2)),
                            shape) if channels > 1 else np.full(shape, float(gamma[0]))
    want_dx = np.where(xf > 0, gf, gf * slope)
    contrib = np.where(xf <= 0, xf * gf, 0.0)
    want_dg = (contrib.sum(axis=tuple(i for i in range(x.ndim) if i != 1)) if channels > 1
               else contrib.sum().reshape(1))
    close(dx, want_dx.reshape(-1), suffix, "prelu data gradient")
    # gamma's gradient: one block per channel, whatever the grid.
    for grid in (1, 3):
        results = []
        for order in ORDERS:
            dg = poisoned(gamma.size, x.dtype)
            m.launch(f"prelu_gamma_backward_{suffix}", grid, BLOCK,
                     [dg, g, x, ctypes.c_longlong(n), *layout], order, seed=grid)
            results.append(dg)
        assert len({r.tobytes() for r in results}) == 1
        # float16 sums in float32: the tolerance scales with the channel's length.
        tol = TOL[suffix] * (10 if suffix == "f16" else 1) * max(1.0, np.sqrt(n / channels))
        np.testing.assert_allclose(results[0].astype(np.float64), want_dg, rtol=tol, atol=tol)


def test_prelu_gamma_gradient_adds(modules):
    m = modules["nn"]
    x = data("f64", 6 * 40, 1).reshape(6, 4, 10)
    g = np.ones_like(x)
    dg = np.full(4, 2.0)
    m.launch("prelu_gamma_backward_f64", 2, BLOCK,
             [dg, g, x, ctypes.c_longlong(x.size), ctypes.c_longlong(4), ctypes.c_longlong(10),
              ctypes.c_int(1)])
    want = 2.0 + np.where(x <= 0, x, 0).sum(axis=(0, 2))
    np.testing.assert_allclose(dg, want, rtol=1e-12)


@pytest.mark.parametrize("suffix", FLOATS)
def test_rrelu_draws_slopes_in_its_bounds(modules, suffix):
    m = modules["nn"]
    n = 100003
    dtype = FLOATS[suffix]
    mask = run_orders(m, f"rrelu_draw_{suffix}", n, [poisoned(n, dtype)],
                      lambda a: [a[0], ctypes.c_longlong(n), ctypes.c_ulonglong(99),
                                 ctypes.c_double(0.125), ctypes.c_double(0.334)])[0]
    mask = mask.astype(np.float64)
    assert mask.min() >= 0.125 - 1e-3 and mask.max() <= 0.334 + 1e-3
    assert abs(mask.mean() - (0.125 + 0.334) / 2) < 2e-3
    assert abs(mask.std() - (0.334 - 0.125) / np.sqrt(12)) < 2e-3
    # The slopes apply as prelu's with one slope per element.
    x = data(suffix, n, 4)
    y = elementwise(m, f"prelu_{suffix}", dtype, n, [x, mask.astype(dtype)],
                    [ctypes.c_longlong(n), ctypes.c_longlong(1), ctypes.c_int(0)])
    xf = x.astype(np.float64)
    close(y, np.where(xf > 0, xf, mask * xf), suffix, "rrelu")


class DrawShape(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int), ("shape", ctypes.c_longlong * 8),
                ("stride", ctypes.c_longlong * 8)]


def draw_shape(shape, axes) -> DrawShape:
    d = DrawShape()
    if not axes:
        return d
    d.ndim = len(shape)
    step = 1
    for k in reversed(range(len(shape))):
        d.shape[k] = shape[k]
        d.stride[k] = 0 if k in axes else step
        step *= 1 if k in axes else shape[k]
    return d


def dropout(m, suffix, x, p, seed, desc, req=1, out=None):
    n = x.size
    keep = 1.0 - p
    threshold = int(keep * 4294967296.0)
    with np.errstate(divide="ignore"):
        scale = float(FLOATS[suffix](np.float64(1.0) / keep))
    out = poisoned(n, x.dtype) if out is None else out
    return run_orders(m, f"dropout_{suffix}", n, [out, poisoned(n, x.dtype)],
                      lambda a: [a[0], a[1], x, ctypes.c_longlong(n), ctypes.c_ulonglong(seed),
                                 ctypes.c_ulonglong(threshold), ctypes.c_double(scale), desc,
                                 ctypes.c_int(req)])


@pytest.mark.parametrize("suffix", FLOATS)
def test_dropout_keeps_its_fraction_and_scales_by_its_mask(modules, suffix):
    m = modules["nn"]
    dtype = FLOATS[suffix]
    for n in SIZES:
        x = data(suffix, n, n)
        out, mask = dropout(m, suffix, x, 0.3, seed=n, desc=draw_shape((n,), ()))
        scale = dtype(1 / 0.7)
        assert np.isin(mask, [0, scale]).all()
        close(out, x.astype(np.float64) * mask.astype(np.float64), suffix, "out = x * mask")
        if n == 100003:
            kept = (mask != 0).mean()
            assert abs(kept - 0.7) < 0.005, kept
            # Neighbours are independent: P(both kept) = keep².
            both = ((mask[1:] != 0) & (mask[:-1] != 0)).mean()
            assert abs(both - 0.49) < 0.006, both
            _, again = dropout(m, suffix, x, 0.3, seed=n + 1, desc=draw_shape((n,), ()))
            assert abs(((again != 0) == (mask != 0)).mean() - 0.58) < 0.01
        # The backward multiplies by the mask, or passes the gradient through.
        g = data(suffix, n, n + 2)
        dx = elementwise(m, f"dropout_backward_{suffix}", dtype, n, [g, mask],
                         [ctypes.c_int(1), ctypes.c_int(0)])
        close(dx, g.astype(np.float64) * mask.astype(np.float64), suffix, "backward")
        dx = elementwise(m, f"dropout_backward_{suffix}", dtype, n, [g, mask],
                         [ctypes.c_int(0), ctypes.c_int(0)])
        # Outside training the CPU's backward passes the gradient through.
        want = mx.nd._internal._backward_Dropout(nd(g), nd(mask), p=0.3).asnumpy()
        same_bits(dx, want, "backward outside training")


def test_dropout_edges_axes_requests(modules):
    m = modules["nn"]
    x = data("f32", 4 * 33 * 5, 1).reshape(4, 33, 5)
    out, mask = dropout(m, "f32", x.reshape(-1), 0.5, seed=3, desc=draw_shape(x.shape, (1,)))
    mask = mask.reshape(x.shape)
    assert (mask == mask[:, :1, :]).all() and (mask == 0).any() and (mask == 2).any()
    # p = 0 keeps everything; p = 1 gives NaN, as the CPU's 0·∞.
    ones = np.ones(257, np.float32)
    _, mask = dropout(m, "f32", ones, 0.0, seed=1, desc=draw_shape((257,), ()))
    assert (mask == 1).all()
    out, mask = dropout(m, "f32", ones, 1.0, seed=1, desc=draw_shape((257,), ()))
    assert np.isnan(mask).all() and np.isnan(out).all()
    # Add, null and in place.
    base = np.full(257, 3.0, np.float32)
    out, mask = dropout(m, "f32", ones, 0.5, seed=2, desc=draw_shape((257,), ()), req=2,
                        out=base)
    np.testing.assert_array_equal(out, 3.0 + mask)
    out, mask = dropout(m, "f32", ones, 0.5, seed=2, desc=draw_shape((257,), ()), req=0)
    assert np.isnan(out).all() and np.isin(mask, [0, 2]).all()
    y, mask = ones.copy(), poisoned(257, np.float32)
    m.launch("dropout_f32", 2, BLOCK,
             [y, mask, y, ctypes.c_longlong(257), ctypes.c_ulonglong(2),
              ctypes.c_ulonglong(1 << 31), ctypes.c_double(2.0), draw_shape((257,), ()),
              ctypes.c_int(1)])
    np.testing.assert_array_equal(y, mask)


# ---------------------------------------------------------------------------------------
# add_n and the element-wise backward operators.

ALL = {**FLOATS, "u8": np.uint8, "i8": np.int8, "i32": np.int32, "i64": np.int64}


class SumInputs(ctypes.Structure):
    _fields_ = [("p", ctypes.c_void_p * 8)]


def sum_inputs(arrays) -> SumInputs:
    s = SumInputs()
    for i, a in enumerate(arrays):
        s.p[i] = a.ctypes.data
    return s


def operand(dtype, n, seed):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        return x
    return rng.uniform(-3, 3, n).astype(dtype)


@pytest.mark.parametrize("suffix", ALL)
def test_add_n_matches_the_cpu(modules, suffix):
    m = modules["grad"]
    dtype = ALL[suffix]
    for n in SIZES:
        for count in (1, 3, 8):
            xs = [operand(dtype, n, 10 * n + i) for i in range(count)]
            rest = [sum_inputs(xs), ctypes.c_longlong(n), ctypes.c_int(count), ctypes.c_int(0)]
            got = run_orders(m, f"add_n_{suffix}", n, [poisoned(n, dtype)],
                             lambda a, rest=rest: [a[0], *rest])[0]
            want = mx.nd.add_n(*[nd(x) for x in xs]).asnumpy()
            same_bits(got, want, f"add_n of {count} n={n}")
    # keep: the output's old value counts `keep` times (an input aliasing it, or req=add).
    n = 257
    xs = [operand(dtype, n, i) for i in range(3)]
    base = operand(dtype, n, 99)
    got = run_orders(m, f"add_n_{suffix}", n, [base],
                     lambda a: [a[0], sum_inputs(xs[1:]), ctypes.c_longlong(n), ctypes.c_int(2),
                                ctypes.c_int(2)])[0]
    b = nd(base)
    want = mx.nd.add_n(b, b, nd(xs[1]), nd(xs[2])).asnumpy()
    same_bits(got, want, "add_n keeping the output twice")


UNARY = ["_copy", "negative", "abs", "sign", "sqrt", "rsqrt", "cbrt", "rcbrt", "square",
         "reciprocal", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan",
         "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
         "degrees", "radians", "sigmoid", "softsign", "relu", "floor", "ceil", "round", "rint",
         "fix", "trunc", "logical_not", "clip"]
#: The forward output rather than its input feeds these backward operators.
USES_OUTPUT = {"sqrt", "cbrt", "exp", "tan", "tanh", "sigmoid", "relu"}
#: Inputs inside each function's domain.
DOMAIN = {"sqrt": (0.1, 3), "rsqrt": (0.1, 3), "log": (0.1, 3), "log2": (0.1, 3),
          "log10": (0.1, 3), "log1p": (-0.9, 3), "arcsin": (-0.95, 0.95),
          "arccos": (-0.95, 0.95), "arctanh": (-0.95, 0.95), "arccosh": (1.1, 3),
          "reciprocal": (0.2, 3), "cbrt": (0.2, 3), "rcbrt": (0.2, 3)}
#: The derivatives that are zero, so the CPU has no backward operator for them.
ZERO_GRAD = {"sign", "floor", "ceil", "round", "rint", "fix", "trunc", "logical_not"}


def unary_backward_want(op, g, v):
    """The CPU's `_backward_<op>`, or the zero gradient."""
    if op in ZERO_GRAD:
        return np.zeros_like(g)
    if op == "_copy":
        return g.copy()
    if op == "negative":
        return -g
    kw = {"a_min": -1.5, "a_max": 2.0} if op == "clip" else {}
    return getattr(mx.nd._internal, f"_backward_{op}")(nd(g), nd(v), **kw).asnumpy()


@pytest.mark.parametrize("suffix", FLOATS)
def test_unary_backward_matches_the_cpu(modules, suffix):
    m = modules["grad"]
    dtype = FLOATS[suffix]
    for code, op in enumerate(UNARY):
        for n in (SIZES if op in ("sin", "sigmoid", "clip") else (0, 257)):
            rng = np.random.default_rng(code * 7 + n)
            lo, hi = DOMAIN.get(op, (-3, 3))
            x = rng.uniform(lo, hi, n).astype(dtype)
            if op in USES_OUTPUT:
                x = cpu(op)(nd(x)).asnumpy()
            if op in ("sin", "cos") and n > 40:
                x[:20] = np.linspace(-1e4, 1e4, 20)  # large arguments
            g = rng.uniform(-2, 2, n).astype(dtype)
            rest = [ctypes.c_int(code), ctypes.c_int(0), ctypes.c_double(-1.5),
                    ctypes.c_double(2.0)]
            got = elementwise(m, f"unary_backward_{suffix}", dtype, n, [g, x], rest)
            close(got, unary_backward_want(op, g, x), suffix, f"_backward_{op} n={n}")


def test_sin_and_cos_backward_reduce_large_arguments(modules):
    m = modules["grad"]
    x = np.concatenate([np.linspace(-1e6, 1e6, 1001), [1e15, -3e14, 2.0**40 + 0.5]])
    g = np.ones_like(x)
    for code, f in ((16, np.cos), (17, lambda v: -np.sin(v))):
        got = elementwise(m, "unary_backward_f64", np.float64, x.size, [g, x],
                          [ctypes.c_int(code), ctypes.c_int(0), ctypes.c_double(0),
                           ctypes.c_double(0)])
        np.testing.assert_allclose(got, f(x), rtol=1e-9, atol=1e-9)


BINARY = ["add", "sub", "mul", "div", "mod", "power", "maximum", "minimum", "hypot"]
#: (op, reverse) of each `_backward_<name>_scalar` the CPU registers as a ScalarBackward.
SCALAR_BACKWARD = {("div", 1): "rdiv", ("mod", 1): "rmod", ("power", 0): "power",
                   ("power", 1): "rpower", ("maximum", 0): "maximum", ("minimum", 0): "minimum",
                   ("hypot", 0): "hypot"}
#: The linear ones, which the CPU computes with other operators: d/dx of x op s.
LINEAR = {("add", 0): lambda g, s: g, ("sub", 0): lambda g, s: g, ("sub", 1): lambda g, s: -g,
          ("mul", 0): lambda g, s: g * s, ("div", 0): lambda g, s: g / s,
          ("mod", 0): lambda g, s: g}


def positive(dtype, shape, seed):
    x = np.random.default_rng(seed).uniform(0.5, 2.5, shape)
    x.reshape(-1)[::5] = 1.5  # ties for maximum and minimum
    return x.astype(dtype)


@pytest.mark.parametrize("suffix", FLOATS)
def test_scalar_backward_matches_the_cpu(modules, suffix):
    m = modules["grad"]
    dtype = FLOATS[suffix]
    for (op, reverse) in [*SCALAR_BACKWARD, *LINEAR]:
        for n in (SIZES if op == "power" else (1, 257)):
            x, g = positive(dtype, n, n), operand(dtype, n, n + 1)
            got = elementwise(m, f"scalar_backward_{suffix}", dtype, n, [g, x],
                              [ctypes.c_int(BINARY.index(op)), ctypes.c_int(reverse),
                               ctypes.c_int(0), ctypes.c_double(1.5)])
            if (op, reverse) in LINEAR:
                want = LINEAR[(op, reverse)](g.astype(np.float64), 1.5)
            else:
                name = f"_backward_{SCALAR_BACKWARD[(op, reverse)]}_scalar"
                want = getattr(mx.nd._internal, name)(nd(g), nd(x), scalar=1.5).asnumpy()
            close(got, want, suffix, f"{op} reverse={reverse} n={n}")


class SumTo(ctypes.Structure):
    _fields_ = [("nkeep", ctypes.c_int), ("nreduce", ctypes.c_int),
                *[(f, ctypes.c_longlong * 8) for f in (
                    "keep_shape", "keep_g", "keep_a", "keep_b",
                    "red_shape", "red_g", "red_a", "red_b")]]


def strides_over(shape, full):
    out = [0] * len(full)
    offset = len(full) - len(shape)
    step = 1
    for d in reversed(range(len(shape))):
        if shape[d] != 1:
            out[offset + d] = step
        step *= shape[d]
    return out


def sum_to(out_shape, full, ga, sa, sb) -> tuple[SumTo, int]:
    """The description the core builds (without merging axes)."""
    d = SumTo()
    strides = [strides_over(s, full) for s in (ga, sa, sb)]
    pad = len(full) - len(out_shape)
    count = 1
    for k, size in enumerate(full):
        if size == 1:
            continue
        reduced = k < pad or out_shape[k - pad] == 1
        prefix = "red" if reduced else "keep"
        i = d.nreduce if reduced else d.nkeep
        getattr(d, f"{prefix}_shape")[i] = size
        for name, st in zip("gab", strides, strict=True):
            getattr(d, f"{prefix}_{name}")[i] = st[k]
        if reduced:
            d.nreduce += 1
            count *= size
        else:
            d.nkeep += 1
    return d, (0 if 0 in full else count)


def binary_backward_want(op, a, b, g, broadcast):
    name = f"_backward_{'broadcast_' if broadcast else ''}{op}"
    if op in ("add", "sub") and not broadcast:
        return cpu(name)(nd(g))
    return cpu(name)(nd(g), nd(a), nd(b))


@pytest.mark.parametrize("suffix", FLOATS)
@pytest.mark.parametrize("lshape, rshape", [((100003,), (100003,)), ((3, 1, 5), (1, 4, 5)),
                                            ((100, 1), (2, 100, 3)), ((1, 3), (500, 3)),
                                            ((4, 1), (4, 300)), ((0, 3), (3,))])
def test_binary_backward_matches_the_cpu(modules, suffix, lshape, rshape):
    m = modules["grad"]
    dtype = FLOATS[suffix]
    full = np.broadcast_shapes(lshape, rshape)
    broadcast = lshape != rshape
    for op in BINARY:
        a, b = positive(dtype, lshape, 1), positive(dtype, rshape, 2)
        g = operand(dtype, int(np.prod(full)), 3).reshape(full)
        want = binary_backward_want(op, a, b, g, broadcast)
        for side, (shape, w) in enumerate(zip((lshape, rshape), want, strict=True)):
            n = int(np.prod(shape))
            desc, count = sum_to(shape, full, full, lshape, rshape)
            lhs = int(side == 0)
            rest = [g, a, b, ctypes.c_longlong(n), desc, ctypes.c_longlong(count),
                    ctypes.c_int(BINARY.index(op)), ctypes.c_int(lhs), ctypes.c_int(0)]
            results = {}
            for kernel, items in (("binary_backward", n), ("binary_backward_block", n * BLOCK)):
                # The block kernel runs its threads as fibers: keep its cases small.
                if kernel == "binary_backward_block" and (count < 2 or n > 8):
                    continue
                results[kernel] = run_orders(m, f"{kernel}_{suffix}", n, [poisoned(n, dtype)],
                                             lambda arr, rest=rest: [arr[0], *rest],
                                             launch_items=items)[0]
            for kernel, got in results.items():
                tol = TOL[suffix] * (1 if count <= 1 else 10 * np.sqrt(count))
                np.testing.assert_allclose(got.astype(np.float64),
                                           w.asnumpy().reshape(-1).astype(np.float64),
                                           rtol=tol, atol=tol, equal_nan=True,
                                           err_msg=f"{kernel} {op} side {side}")


def test_binary_backward_adds_into_its_output(modules):
    m = modules["grad"]
    full = (6, 70)
    a, b = positive(np.float32, full, 1), positive(np.float32, (70,), 2)
    g = operand(np.float32, 420, 3).reshape(full)
    desc, count = sum_to((70,), full, full, full, (70,))
    want = mx.nd._internal._backward_broadcast_mul(nd(g), nd(a), nd(b))[1].asnumpy()
    for kernel, items in (("binary_backward_f32", 70), ("binary_backward_block_f32", 70 * BLOCK)):
        out = np.full(70, 1.0, np.float32)
        m.launch(kernel, grid_for(items), BLOCK,
                 [out, g, a, b, ctypes.c_longlong(70), desc, ctypes.c_longlong(count),
                  ctypes.c_int(BINARY.index("mul")), ctypes.c_int(0), ctypes.c_int(1)])
        np.testing.assert_allclose(out, 1.0 + want, rtol=1e-5)

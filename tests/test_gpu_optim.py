"""Optimizer updates, activations, dropout, add_n and the element-wise backward
operators on GPUs against the CPU operators: the fused updates bit for bit, the rest
within each dtype's tolerance, gradients through executors' backward passes. Runs on real
GPUs and on fake ones (``RSMX_FAKE_GPU=2``)."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx

pytestmark = pytest.mark.gpu

FLOATS = ["float32", "float64", "float16"]
TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3}


def close(got, want, dtype, what="", scale=1.0) -> None:
    got = got.asnumpy() if hasattr(got, "asnumpy") else got
    want = want.asnumpy() if hasattr(want, "asnumpy") else want
    assert got.shape == want.shape and got.dtype == want.dtype, what
    t = TOL[str(want.dtype)] * scale
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=t, atol=t,
                               equal_nan=True, err_msg=what)


def bits(got, want, what="") -> None:
    got, want = got.asnumpy(), want.asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape, what
    ok = (got == want) | (np.isnan(got) & np.isnan(want))
    assert ok.all(), f"{what}: {got[~ok][:4]} != {want[~ok][:4]}"


# ---------------------------------------------------------------------------------------
# Fused optimizer updates.

UPDATES = {
    "sgd_update": (0, dict(lr=0.1, wd=0.01)),
    "sgd_mom_update": (1, dict(lr=0.1, momentum=0.9, wd=0.01)),
    "mp_sgd_update": (1, dict(lr=0.1, wd=0.01)),
    "mp_sgd_mom_update": (2, dict(lr=0.1, momentum=0.9, wd=0.01)),
    "nag_mom_update": (1, dict(lr=0.1, momentum=0.9, wd=0.01)),
    "mp_nag_mom_update": (2, dict(lr=0.1, momentum=0.9, wd=0.01)),
    "adam_update": (2, dict(lr=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.01)),
    "rmsprop_update": (1, dict(lr=0.01, gamma1=0.95, epsilon=1e-8, wd=0.01,
                               clip_weights=0.8)),
    "rmspropalex_update": (3, dict(lr=0.01, gamma1=0.95, gamma2=0.9, epsilon=1e-8,
                                   clip_weights=0.8)),
    "ftrl_update": (2, dict(lr=0.1, lamda1=0.01, beta=1.0, wd=0.01)),
    "signsgd_update": (0, dict(lr=0.1, wd=0.01)),
    "signum_update": (1, dict(lr=0.1, momentum=0.9, wd=0.01, wd_lh=0.02)),
    "_rsmx_adagrad_update": (1, dict(lr=0.1, epsilon=1e-7, wd=0.01)),
    "_rsmx_adadelta_update": (2, dict(rho=0.9, epsilon=1e-5, wd=0.01)),
    "_rsmx_agg_sgd_update": (0, dict(lr=0.1, wd=0.01)),
    "_rsmx_agg_mp_sgd_update": (1, dict(lr=0.1, wd=0.01)),
    "ftml_update": (3, dict(lr=0.1, beta1=0.6, beta2=0.999, epsilon=1e-8, wd=0.01, t=3)),
}


def op(name):
    return getattr(mx.nd._internal if name.startswith("_") else mx.nd, name)


def update_inputs(name, dtype, n, rng):
    nstates, _ = UPDATES[name]
    w = rng.uniform(-1, 1, n).astype(dtype)
    g = rng.uniform(-4, 4, n).astype(dtype)
    mp = name.startswith(("mp_", "_rsmx_agg_mp"))
    states = []
    for k in range(nstates):
        if mp and k == nstates - 1:
            states.append(w.astype(np.float32))
        else:
            low = 4.0 if (name == "rmspropalex_update" and k == 0) else 0.0
            states.append(rng.uniform(low, low + 2, n).astype(np.float32 if mp else dtype))
    return [w, g, *states]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UPDATES)
def test_updates_match_the_cpu_bit_for_bit(name, dtype):
    rng = np.random.default_rng(len(name))
    for n, clip in ((1, -1.0), (257, 1.0), (100003, 0.5)):
        arrays = update_inputs(name, dtype, n, rng)
        attrs = dict(UPDATES[name][1], rescale_grad=0.5)
        attrs["clip_grad" if name == "ftml_update" else "clip_gradient"] = clip
        results = []
        for ctx in (mx.cpu(), mx.gpu(0)):
            nds = [mx.nd.array(a, ctx=ctx, dtype=a.dtype) for a in arrays]
            op(name)(*nds, out=nds[0], **attrs)
            results.append([nds[0], *nds[2:]])
        for j, (got, want) in enumerate(zip(results[1], results[0], strict=True)):
            bits(got, want, f"{name} array {j} n={n}")


def test_an_update_steps_repeatedly_and_keeps_a_separate_output_apart():
    ctx = mx.gpu(0)
    w = mx.nd.ones((300,), ctx=ctx)
    g = mx.nd.full((300,), 0.5, ctx=ctx)
    mean, var = mx.nd.zeros((300,), ctx=ctx), mx.nd.zeros((300,), ctx=ctx)
    cw, cg = w.copyto(mx.cpu()), g.copyto(mx.cpu())
    cmean, cvar = mean.copyto(mx.cpu()), var.copyto(mx.cpu())
    for _ in range(10):
        mx.nd.adam_update(w, g, mean, var, out=w, lr=0.01)
        mx.nd.adam_update(cw, cg, cmean, cvar, out=cw, lr=0.01)
    bits(w, cw, "weight")
    bits(var, cvar, "var")
    out = mx.nd.sgd_mom_update(w, g, mean, lr=0.1, momentum=0.9)
    cout = mx.nd.sgd_mom_update(cw, cg, cmean, lr=0.1, momentum=0.9)
    bits(out, cout, "new output")
    bits(w, cw, "weight left alone")
    with pytest.raises(mx.base.MXNetError, match="dtype"):
        mx.nd.sgd_update(mx.nd.ones((3,), ctx=ctx), mx.nd.ones((3,), ctx=ctx, dtype="float16"),
                         lr=0.1).wait_to_read()


def test_the_optimizers_train_on_the_gpu_as_on_the_cpu():
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((64,)).astype(np.float32)
    grads = [rng.standard_normal((64,)).astype(np.float32) for _ in range(5)]
    for name, kw in [("sgd", dict(momentum=0.9)), ("nag", dict(momentum=0.9)), ("adam", {}),
                     ("rmsprop", dict(centered=True)), ("ftrl", {}), ("signum", {}),
                     ("adagrad", {}), ("adadelta", {})]:
        weights = []
        for ctx in (mx.cpu(), mx.gpu(0)):
            opt = mx.optimizer.create(name, learning_rate=0.05, wd=0.01, **kw)
            w = mx.nd.array(w0, ctx=ctx)
            state = opt.create_state(0, w)
            for g in grads:
                opt.update(0, w, mx.nd.array(g, ctx=ctx), state)
            weights.append(w)
        close(weights[1], weights[0], "float32", name)


# ---------------------------------------------------------------------------------------
# Layers through executors: forward, then backward with a random output gradient.

def run(sym, inputs: dict, ctx, is_train=True, seed=0, grad_req="write"):
    ex = sym.simple_bind(ctx, grad_req=grad_req,
                         type_dict={k: v.dtype for k, v in inputs.items()},
                         **{k: v.shape for k, v in inputs.items()})
    for k, v in inputs.items():
        ex.arg_dict[k][:] = mx.nd.array(v, dtype=v.dtype)
    outs = ex.forward(is_train=is_train)
    og = np.random.default_rng(seed).uniform(-1, 1, outs[0].shape).astype(outs[0].dtype)
    if is_train:
        # With an `add` request the second pass adds to what the first wrote.
        adds = isinstance(grad_req, dict) and "add" in grad_req.values()
        for _ in range(2 if adds else 1):
            ex.backward(mx.nd.array(og, ctx=ctx, dtype=og.dtype))
    return ex, [o.copyto(mx.cpu()) for o in outs], og


def both(sym, inputs, **kw):
    return run(sym, inputs, mx.cpu(), **kw), run(sym, inputs, mx.gpu(0), **kw)


def compare(sym, inputs, dtype, what, scale=1.0, grad_req="write"):
    (cex, couts, _), (gex, gouts, _) = both(sym, inputs, grad_req=grad_req)
    close(gouts[0], couts[0], dtype, f"{what} forward", scale)
    for k in inputs:
        if grad_req == "write" or (isinstance(grad_req, dict) and grad_req.get(k) != "null"):
            close(gex.grad_dict[k], cex.grad_dict[k], dtype, f"{what} d{k}", scale)


def data(shape, dtype, seed, low=-3.0, high=3.0):
    x = np.random.default_rng(seed).uniform(low, high, shape)
    x.reshape(-1)[::7] = 0
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_activations_and_their_gradients_match_the_cpu(dtype):
    x = mx.sym.Variable("x")
    for n, shape in enumerate([(1,), (33,), (4, 257), (100003,)]):
        inputs = {"x": data(shape, dtype, n)}
        for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
            compare(mx.sym.Activation(x, act_type=act), inputs, dtype, act)
        for kind in ("leaky", "elu", "selu", "gelu"):
            compare(mx.sym.LeakyReLU(x, act_type=kind, slope=0.2), inputs, dtype, kind)


def test_relu_keeps_nan_on_the_gpu_as_on_the_cpu():
    x = mx.sym.Variable("x")
    inputs = {"x": np.array([np.nan, -1.0, 0.0, 2.0], np.float32)}
    compare(mx.sym.Activation(x, act_type="relu"), inputs, "float32", "relu nan")
    compare(mx.sym.relu(x), inputs, "float32", "relu op nan")
    g = mx.nd.array(inputs["x"], ctx=mx.gpu(0))
    for y in (mx.nd.relu(g), mx.nd.Activation(g, act_type="relu")):
        np.testing.assert_array_equal(y.asnumpy(), [np.nan, 0, 0, 2])


@pytest.mark.parametrize("dtype", FLOATS)
def test_prelu_and_its_gamma_gradient_match_the_cpu(dtype):
    x, gamma = mx.sym.Variable("x"), mx.sym.Variable("gamma")
    y = mx.sym.LeakyReLU(data=x, gamma=gamma, act_type="prelu")
    for shape, gshape in [((8, 3, 5), (3,)), ((6, 4), (1,)), ((2, 16, 33, 17), (16,)),
                          ((1, 2, 50000), (2,))]:
        inputs = {"x": data(shape, dtype, 1), "gamma": data(gshape, dtype, 2, 0.05, 0.5)}
        count = np.prod(shape) / np.prod(gshape)
        scale = 1.0 if dtype == "float64" else np.sqrt(count)
        compare(y, inputs, dtype, f"prelu {shape}", scale=scale)
        # The gamma gradient is a block reduction in a fixed order: runs agree bit for bit.
        (g1, _, _), (g2, _, _) = (run(y, inputs, mx.gpu(0)) for _ in range(2))
        bits(g1.grad_dict["gamma"], g2.grad_dict["gamma"], "deterministic gamma gradient")


def test_rrelu_slopes_lie_in_their_bounds_and_the_gradient_uses_them():
    x = mx.sym.Variable("x")
    y = mx.sym.LeakyReLU(x, act_type="rrelu", lower_bound=0.1, upper_bound=0.3)
    inputs = {"x": np.random.default_rng(4).uniform(-3.0, -0.5, 20000).astype(np.float32)}
    ex, outs, og = run(y, inputs, mx.gpu(0))
    slopes = outs[0].asnumpy() / inputs["x"]
    assert slopes.min() >= 0.1 - 1e-6 and slopes.max() <= 0.3 + 1e-6
    assert abs(slopes.mean() - 0.2) < 0.005 and slopes.std() > 0.05
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), og * slopes, rtol=1e-5)
    # Outside training the slope is the bounds' mean, as on the CPU.
    got = mx.nd.LeakyReLU(mx.nd.array(inputs["x"], ctx=mx.gpu(0)), act_type="rrelu",
                          lower_bound=0.1, upper_bound=0.3)
    want = mx.nd.LeakyReLU(mx.nd.array(inputs["x"]), act_type="rrelu", lower_bound=0.1,
                           upper_bound=0.3)
    close(got, want, "float32")


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_keeps_its_fraction_and_its_gradient_follows_the_mask(dtype):
    x = mx.sym.Variable("x")
    inputs = {"x": np.random.default_rng(5).uniform(0.5, 2.0, (200, 501)).astype(dtype)}
    for p in (0.2, 0.5):
        ex, outs, og = run(mx.sym.Dropout(x, p=p), inputs, mx.gpu(0), seed=1)
        y = outs[0].asnumpy()
        kept = y != 0
        assert abs(kept.mean() - (1 - p)) < 0.01, (p, kept.mean())
        # Kept elements are scaled by the mask's 1/(1-p), rounded to the dtype.
        scale = np.dtype(dtype).type(1 / (1 - p))
        close(y, np.where(kept, inputs["x"] * scale, 0).astype(dtype), dtype, "output")
        close(ex.grad_dict["x"], np.where(kept, og * scale, 0).astype(dtype), dtype, "grad")
    # Two forward passes draw different masks.
    ex = mx.sym.Dropout(x, p=0.5).simple_bind(mx.gpu(0), x=(1000,))
    ex.arg_dict["x"][:] = 1
    a = ex.forward(is_train=True)[0].asnumpy().copy()
    b = ex.forward(is_train=True)[0].asnumpy()
    assert (a != b).any()
    # Inference passes through; mode=always drops also there; axes share a draw.
    ones = mx.nd.ones((64, 30), ctx=mx.gpu(0), dtype=dtype)
    assert (mx.nd.Dropout(ones, p=0.5).asnumpy() == 1).all()
    got = mx.nd.Dropout(ones, p=0.5, mode="always").asnumpy()
    assert np.isin(got, [0, 2]).all() and (got == 0).any()
    got = mx.nd.Dropout(ones, p=0.5, mode="always", axes=(1,)).asnumpy()
    assert (got == got[:, :1]).all() and (got[:, 0] == 0).any() and (got[:, 0] == 2).any()


def test_dropout_runs_in_place_of_its_input_in_a_graph():
    x = mx.sym.Variable("x")
    y = mx.sym.Dropout(mx.sym.Activation(x, act_type="relu"), p=0.3) * 2
    inputs = {"x": np.random.default_rng(6).uniform(0.5, 1.0, (50, 40)).astype(np.float32)}
    ex, outs, og = run(y, inputs, mx.gpu(0))
    kept = outs[0].asnumpy() != 0
    np.testing.assert_allclose(outs[0].asnumpy()[kept],
                               2 * inputs["x"][kept] / np.float32(0.7), rtol=1e-5)
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(),
                               np.where(kept, 2 * og / np.float32(0.7), 0), rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS + ["int32", "uint8", "int8", "int64"])
def test_add_n_matches_the_cpu(dtype):
    rng = np.random.default_rng(8)
    for n in (1, 257, 100003):
        for count in (1, 2, 9, 20):
            if np.issubdtype(np.dtype(dtype), np.integer):
                xs = [rng.integers(-100, 100, n).astype(dtype) for _ in range(count)]
            else:
                xs = [rng.uniform(-3, 3, n).astype(dtype) for _ in range(count)]
            want = mx.nd.add_n(*[mx.nd.array(x, dtype=dtype) for x in xs])
            gs = [mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype) for x in xs]
            bits(mx.nd.add_n(*gs), want, f"add_n of {count}")
            # The output given as one of the inputs; added to an output.
            out = gs[0].copy()
            mx.nd.add_n(out, *gs[1:], out=out)
            bits(out, want, "add_n into its first input")


def test_gradients_of_a_shared_input_are_summed_by_add_n():
    x = mx.sym.Variable("x")
    y = mx.sym.sin(x) * mx.sym.exp(x) + mx.sym.square(x) + x
    compare(y, {"x": data((1000,), "float32", 9)}, "float32", "shared input")
    z = mx.sym.add_n(x, x * 2, mx.sym.relu(x))
    compare(z, {"x": data((1000,), "float64", 9)}, "float64", "add_n backward")


UNARY = ["abs", "sqrt", "rsqrt", "cbrt", "rcbrt", "square", "reciprocal", "exp", "expm1", "log",
         "log1p", "log2", "log10", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
         "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "degrees", "radians", "sigmoid",
         "softsign", "relu", "negative", "_copy", "floor"]
DOMAIN = {"sqrt": (0.2, 3), "rsqrt": (0.2, 3), "cbrt": (0.2, 3), "rcbrt": (0.2, 3),
          "reciprocal": (0.2, 3), "log": (0.2, 3), "log1p": (-0.5, 3), "log2": (0.2, 3),
          "log10": (0.2, 3), "arcsin": (-0.9, 0.9), "arccos": (-0.9, 0.9),
          "arctanh": (-0.9, 0.9), "arccosh": (1.2, 3), "tan": (-1.2, 1.2)}


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_scalar_and_clip_gradients_match_the_cpu(dtype):
    x = mx.sym.Variable("x")
    for i, name in enumerate(UNARY):
        lo, hi = DOMAIN.get(name, (-3, 3))
        inputs = {"x": np.random.default_rng(i).uniform(lo, hi, (3, 37)).astype(dtype)}
        f = getattr(mx.sym._internal if name.startswith("_") else mx.sym, name)
        compare(f(x), inputs, dtype, name)
    inputs = {"x": np.random.default_rng(1).uniform(0.5, 2.5, (257,)).astype(dtype)}
    compare(mx.sym.clip(x, a_min=1.0, a_max=2.0), inputs, dtype, "clip")
    for name in ("_rdiv_scalar", "_rmod_scalar", "_power_scalar", "_rpower_scalar",
                 "_maximum_scalar", "_minimum_scalar", "_hypot_scalar", "_mul_scalar",
                 "_div_scalar", "_rminus_scalar", "_plus_scalar"):
        y = getattr(mx.sym._internal, name)(x, scalar=1.5)
        compare(y, inputs, dtype, name)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lshape, rshape", [((257,), (257,)), ((4, 1, 5), (1, 3, 5)),
                                            ((300, 40), (40,)), ((2, 1), (2, 700)),
                                            ((1,), (5, 6))])
def test_binary_gradients_match_the_cpu(dtype, lshape, rshape):
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    rng = np.random.default_rng(2)
    inputs = {"a": rng.uniform(0.5, 2.5, lshape).astype(dtype),
              "b": rng.uniform(0.5, 2.5, rshape).astype(dtype)}
    same = lshape == rshape
    ops = ["add", "sub", "mul", "div", "mod", "power", "maximum", "minimum", "hypot"]
    for name in ops:
        if same:
            f = {"add": mx.sym.elemwise_add, "sub": mx.sym.elemwise_sub,
                 "mul": mx.sym.elemwise_mul, "div": mx.sym.elemwise_div}.get(name)
            f = f or getattr(mx.sym._internal, f"_{name}")
        else:
            f = getattr(mx.sym, f"broadcast_{name}")
        # Broadcast sides sum many partials: the tolerance grows with their number.
        count = max(np.prod(np.broadcast_shapes(lshape, rshape)) / min(np.prod(lshape),
                                                                         np.prod(rshape)), 1)
        compare(f(a, b), inputs, dtype, name, scale=np.sqrt(count) * 4)
    # A gradient added to the one already there.
    compare(mx.sym.broadcast_mul(a, b), inputs, dtype, "add request",
            grad_req={"a": "add", "b": "write"})

"""mx.autograd: recording, backward and grad, variables, views, Function, and errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import rsmx as mx
from rsmx import autograd as ag


def _var(data, grad_req="write", ctx=None) -> mx.nd.NDArray:
    x = mx.nd.array(np.asarray(data, dtype=np.float32), ctx=ctx)
    x.attach_grad(grad_req)
    return x


def test_gradients_sum_over_every_path(ctx) -> None:
    v = np.array([1.0, 2.0, -0.5], dtype=np.float32)
    x = _var(v, ctx=ctx)
    with ag.record():
        y = x * x + mx.nd.exp(x) + x / 2
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * v + np.exp(v) + 0.5, rtol=1e-5)
    assert x.grad.context == ctx


def test_switches_and_scopes_nest_and_restore() -> None:
    assert not ag.is_recording() and not ag.is_training()
    with ag.record():
        assert ag.is_recording() and ag.is_training()
        with ag.pause():
            assert not ag.is_recording() and not ag.is_training()
            with ag.train_mode():
                assert ag.is_training() and not ag.is_recording()
        with ag.predict_mode():
            assert ag.is_recording() and not ag.is_training()
    with ag.record(train_mode=False):
        assert ag.is_recording() and not ag.is_training()
    assert not ag.is_recording() and not ag.is_training()
    assert ag.set_recording(True) is False
    assert ag.set_recording(False) is True
    assert ag.set_training(True) is False
    assert ag.set_training(False) is True


def test_the_switches_are_per_thread() -> None:
    seen = []
    with ag.record():
        t = threading.Thread(target=lambda: seen.append((ag.is_recording(), ag.is_training())))
        t.start()
        t.join()
    assert seen == [(False, False)]


def test_training_mode_drives_dropout_and_the_mask_is_differentiated() -> None:
    x = _var(np.ones((4, 32)))
    with ag.record():
        y = mx.nd.Dropout(x, p=0.5)
    y.backward()
    out = y.asnumpy()
    assert set(np.unique(out)) == {0.0, 2.0}
    np.testing.assert_array_equal(x.grad.asnumpy(), out)
    with ag.record(train_mode=False):
        y = mx.nd.Dropout(x, p=0.5)
    np.testing.assert_array_equal(y.asnumpy(), np.ones((4, 32)))
    with ag.train_mode():
        y = mx.nd.Dropout(x, p=0.5)
    assert (y.asnumpy() == 0).any()


def test_batchnorm_uses_batch_statistics_when_training() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(8, 3, 2, 2)).astype(np.float32)
    x = _var(data)
    gamma, beta = _var(np.ones(3)), _var(np.zeros(3))
    mean, var = mx.nd.zeros(3), mx.nd.ones(3)
    with ag.record():
        y = mx.nd.BatchNorm(x, gamma, beta, mean, var, fix_gamma=False)
        loss = (y * y).sum()
    loss.backward()
    # Normalised with the batch's statistics: y has zero mean per channel.
    np.testing.assert_allclose(y.asnumpy().mean(axis=(0, 2, 3)), 0, atol=1e-5)
    # d sum(y²)/d beta = 2 sum(y) = 0; d/d gamma = 2 sum(y x̂) = 2 sum(x̂²).
    axes = (0, 2, 3)
    xhat = (data - data.mean(axis=axes, keepdims=True)) / np.sqrt(
        data.var(axis=axes, keepdims=True) + 1e-3
    )
    np.testing.assert_allclose(beta.grad.asnumpy(), 0, atol=1e-4)
    np.testing.assert_allclose(gamma.grad.asnumpy(), 2 * (xhat**2).sum(axis=axes), rtol=1e-4)


def test_matches_the_symbolic_executor() -> None:
    rng = np.random.default_rng(1)
    d = rng.normal(size=(4, 2, 6, 6)).astype(np.float32)
    w = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
    b = rng.normal(size=(3,)).astype(np.float32)
    fw = rng.normal(size=(5, 12)).astype(np.float32)
    x, cw, cb, fcw = _var(d), _var(w), _var(b), _var(fw)
    with ag.record():
        c = mx.nd.Convolution(x, cw, cb, kernel=(3, 3), num_filter=3, pad=(0, 0))
        p = mx.nd.Pooling(mx.nd.relu(c), kernel=(2, 2), stride=(2, 2), pool_type="max")
        out = mx.nd.FullyConnected(mx.nd.flatten(p), fcw, num_hidden=5, no_bias=True)
        loss = mx.nd.sum(mx.nd.tanh(out))
    loss.backward()

    s = mx.sym
    net = s.Convolution(s.var("x"), s.var("cw"), s.var("cb"), kernel=(3, 3), num_filter=3)
    net = s.Pooling(s.relu(net), kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = s.FullyConnected(s.flatten(net), s.var("fcw"), num_hidden=5, no_bias=True)
    net = s.MakeLoss(s.sum(s.tanh(net)))
    args = {"x": mx.nd.array(d), "cw": mx.nd.array(w), "cb": mx.nd.array(b), "fcw": mx.nd.array(fw)}
    grads = {k: mx.nd.zeros(v.shape) for k, v in args.items()}
    exe = net.bind(mx.cpu(), args, args_grad=grads)
    exe.forward(is_train=True)
    exe.backward()
    for name, arr in [("x", x), ("cw", cw), ("cb", cb), ("fcw", fcw)]:
        np.testing.assert_allclose(arr.grad.asnumpy(), grads[name].asnumpy(), rtol=1e-4, atol=1e-5)


def test_max_pooling_computes_its_index_only_while_recording() -> None:
    """Outside recording the hidden index of max pooling is skipped, with the same values;
    recorded, the pooling still routes each window's gradient to its maximum."""
    rng = np.random.default_rng(3)
    d = rng.normal(size=(2, 3, 9, 11)).astype(np.float32)
    kw = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")
    plain = mx.nd.Pooling(mx.nd.array(d), **kw).asnumpy()
    x = _var(d)
    with ag.record():
        y = mx.nd.Pooling(x, **kw)
    y.backward(mx.nd.ones(y.shape))

    padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ref = np.empty((2, 3, 5, 6), np.float32)
    grad = np.zeros_like(padded)
    for i in range(5):
        for j in range(6):
            win = padded[:, :, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3].reshape(2, 3, 9)
            ref[:, :, i, j] = win.max(axis=2)
            at = win.argmax(axis=2)
            for n in range(2):
                for c in range(3):
                    grad[n, c, 2 * i + at[n, c] // 3, 2 * j + at[n, c] % 3] += 1
    np.testing.assert_array_equal(plain, ref)
    np.testing.assert_array_equal(y.asnumpy(), ref)
    np.testing.assert_array_equal(x.grad.asnumpy(), grad[:, :, 1:-1, 1:-1])


def test_head_gradients_and_several_heads() -> None:
    x = _var([1.0, 2.0])
    with ag.record():
        a = x * 2
        b = x * x
    ag.backward([a, b], [mx.nd.array([1.0, 10.0]), None])
    np.testing.assert_allclose(x.grad.asnumpy(), [2 + 2, 20 + 4])
    with ag.record():
        a = x * 3
    a.backward(mx.nd.array([0.5, 1.0]))
    np.testing.assert_allclose(x.grad.asnumpy(), [1.5, 3.0])


def test_grad_req_add_accumulates_and_null_skips() -> None:
    x = _var([1.0, 2.0], grad_req="add")
    n = _var([5.0, 5.0], grad_req="null")
    for _ in range(3):
        with ag.record():
            y = x * n
        y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [15.0, 15.0])
    np.testing.assert_allclose(n.grad.asnumpy(), [0.0, 0.0])


def test_a_graph_is_released_after_backward_unless_retained() -> None:
    x = _var([3.0])
    with ag.record():
        y = mx.nd.square(x)
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [6.0])
    with pytest.raises(mx.MXNetError, match="retain_graph=True"):
        y.backward()


def test_grad_returns_new_arrays_and_leaves_the_buffers() -> None:
    x = _var([1.0, 2.0])
    other = _var([7.0])
    with ag.record():
        y = mx.nd.sum(x * x)
    gx, go = ag.grad(y, [x, other], retain_graph=True)
    np.testing.assert_allclose(gx.asnumpy(), [2.0, 4.0])
    np.testing.assert_allclose(go.asnumpy(), [0.0])
    np.testing.assert_allclose(x.grad.asnumpy(), [0.0, 0.0])
    # A single variable still gives a list, as in MXNet.
    (single,) = ag.grad(y, x)
    np.testing.assert_allclose(single.asnumpy(), [2.0, 4.0])
    with pytest.raises(mx.MXNetError, match="empty"):
        ag.grad(y, [])


def test_a_constant_gradient_has_a_zero_gradient() -> None:
    x = _var([1.0, 2.0])
    with ag.record():
        y = mx.nd.radians(x)
        (g1,) = ag.grad(y, x, create_graph=True, retain_graph=True)
        (g2,) = ag.grad(g1, x)
    np.testing.assert_allclose(g1.asnumpy(), [np.pi / 180] * 2, rtol=1e-6)
    np.testing.assert_allclose(g2.asnumpy(), [0.0, 0.0])


def test_clip_passes_the_gradient_inside_its_bounds_to_any_order() -> None:
    x = _var([-2.0, 0.5, 3.0])
    with ag.record():
        y = mx.nd.clip(x * x, 0.0, 4.0)
        (g1,) = ag.grad(y, x, create_graph=True, retain_graph=True)
    g1.backward()
    np.testing.assert_allclose(g1.asnumpy(), [-4.0, 1.0, 0.0])
    np.testing.assert_allclose(x.grad.asnumpy(), [2.0, 2.0, 0.0])


def test_create_graph_records_the_gradient() -> None:
    x = _var([1.0])
    with ag.record():
        z = mx.nd.elemwise_add(mx.nd.exp(x), x)
    dx = ag.grad(z, [x], create_graph=True)[0]
    np.testing.assert_allclose(dx.asnumpy(), [np.e + 1], rtol=1e-6)
    assert not ag.is_recording()
    dx.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [np.e], rtol=1e-6)


_SECOND_ORDER = {
    "sin": (mx.nd.sin, lambda x: -np.sin(x)),
    "cos": (mx.nd.cos, lambda x: -np.cos(x)),
    "tan": (mx.nd.tan, lambda x: 2 * np.tan(x) / np.cos(x) ** 2),
    "tanh": (mx.nd.tanh, lambda x: -2 * np.tanh(x) / np.cosh(x) ** 2),
    "log": (mx.nd.log, lambda x: -1 / x**2),
    "log2": (mx.nd.log2, lambda x: -1 / (x**2 * np.log(2))),
    "sqrt": (mx.nd.sqrt, lambda x: -0.25 * x**-1.5),
    "sigmoid": (mx.nd.sigmoid, lambda x: (s := 1 / (1 + np.exp(-x))) * (1 - s) * (1 - 2 * s)),
    "reciprocal": (mx.nd.reciprocal, lambda x: 2 / x**3),
    "arctan": (mx.nd.arctan, lambda x: -2 * x / (1 + x**2) ** 2),
    "square": (mx.nd.square, lambda x: 2 * np.ones_like(x)),
    "relu": (mx.nd.relu, lambda x: np.zeros_like(x)),
}


@pytest.mark.parametrize("name", sorted(_SECOND_ORDER))
def test_second_order_gradients_of_unary_functions(name) -> None:
    op, want = _SECOND_ORDER[name]
    v = np.array([0.3, 0.7, 1.2], dtype=np.float32)
    x = _var(v)
    h1, h2 = mx.nd.array([1.0, -2.0, 0.5]), mx.nd.array([0.7, 1.5, -1.0])
    with ag.record():
        y = op(x)
        (g1,) = ag.grad(y, x, head_grads=h1, create_graph=True, retain_graph=True)
        (g2,) = ag.grad(g1, x, head_grads=h2, create_graph=True, retain_graph=True)
    expected = want(v.astype(np.float64)) * h1.asnumpy() * h2.asnumpy()
    np.testing.assert_allclose(g2.asnumpy(), expected, rtol=1e-4, atol=1e-6)


def test_third_order_through_products() -> None:
    x = _var([0.5, 2.0])
    with ag.record():
        y = x * x * x * x  # x⁴
        (d1,) = ag.grad(y, x, create_graph=True, retain_graph=True)
        (d2,) = ag.grad(d1, x, create_graph=True, retain_graph=True)
    d2.backward()
    np.testing.assert_allclose(d1.asnumpy(), [4 * 0.5**3, 4 * 8.0])
    np.testing.assert_allclose(d2.asnumpy(), [12 * 0.25, 12 * 4.0])
    np.testing.assert_allclose(x.grad.asnumpy(), [24 * 0.5, 24 * 2.0])


def test_views_are_recorded() -> None:
    a = mx.nd.arange(12).reshape((3, 4))
    a.attach_grad()
    with ag.record():
        b = (a[1] * 2).sum() + a.reshape((4, 3))[0:2].sum() * 3 + a[2][1:3].sum()
    b.backward()
    want = np.zeros((3, 4), np.float32)
    want[1] += 2
    want.reshape(-1)[:6] += 3
    want[2, 1:3] += 1
    np.testing.assert_allclose(a.grad.asnumpy(), want)


def test_copies_are_recorded_and_detach_cuts_the_graph() -> None:
    x = _var([1.0, 2.0])
    with ag.record():
        y = x.copy() * 3
        z = x.detach() * 5 + x
        out = mx.nd.zeros((2,))
        x.copyto(out)
        w = out * 7
    ag.backward([y, z, w])
    np.testing.assert_allclose(x.grad.asnumpy(), [3 + 1 + 7] * 2)


def test_fresh_grad_is_set_by_backward() -> None:
    x = mx.nd.ones((2,))
    dx = mx.nd.zeros((2,))
    ag.mark_variables([x], [dx])
    assert x._fresh_grad is False
    with ag.record():
        y = x * 4
    y.backward()
    assert x._fresh_grad is True
    np.testing.assert_allclose(dx.asnumpy(), [4.0, 4.0])
    x._fresh_grad = False
    assert x._fresh_grad is False


def test_overwriting_an_array_in_the_graph_while_recording_fails_and_keeps_it() -> None:
    x = _var([1.0, 2.0])
    with ag.record():
        with pytest.raises(mx.MXNetError, match="already in a computational graph"):
            x += 1
        with pytest.raises(mx.MXNetError, match="already in a computational graph"):
            mx.nd.relu(x, out=x)
    np.testing.assert_allclose(x.asnumpy(), [1.0, 2.0])
    x += 1  # outside a record scope this is allowed
    np.testing.assert_allclose(x.asnumpy(), [2.0, 3.0])


def test_errors_say_what_is_missing() -> None:
    x = _var([1.0])
    y = x * 2  # not recorded
    with pytest.raises(mx.MXNetError, match="not in a computational graph"):
        y.backward()
    plain = mx.nd.ones((1,))
    with ag.record():
        z = plain * 2 + mx.nd.ones((1,))
    with pytest.raises(mx.MXNetError, match="require gradients"):
        z.backward()
    n = _var([1.0], grad_req="null")
    with ag.record():
        z = n * 2
    with pytest.raises(mx.MXNetError, match="require gradients"):
        z.backward()
    with ag.record():
        z = x * 2
    with pytest.raises(mx.MXNetError, match="head gradient"):
        z.backward(mx.nd.ones((3,)))
    with pytest.raises(mx.MXNetError, match="same length"):
        ag.backward([z], [mx.nd.ones((1,)), mx.nd.ones((1,))])
    with pytest.raises(mx.MXNetError, match="grad_req"):
        x.attach_grad("sometimes")
    with pytest.raises(mx.MXNetError, match="shape and dtype"):
        ag.mark_variables([x], [mx.nd.zeros((2,))])
    # The graph is still there after the failed calls.
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [2.0])


class _Sigmoid(ag.Function):
    def forward(self, x):
        y = 1 / (1 + mx.nd.exp(-x))
        self.save_for_backward(y)
        return y

    def backward(self, dy):
        (y,) = self.saved_tensors
        return dy * y * (1 - y)


def test_function_gives_its_own_gradient() -> None:
    v = np.array([-1.0, 0.0, 2.0], dtype=np.float32)
    x = _var(v)
    f = _Sigmoid()
    with ag.record():
        y = f(x) * 2
    y.backward()
    s = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * s * (1 - s), rtol=1e-5)
    with pytest.raises(mx.MXNetError, match="only be called once"):
        f(x)
    # Outside record, a Function is a plain computation.
    np.testing.assert_allclose(_Sigmoid()(x).asnumpy(), s, rtol=1e-6)


class _Wrong(ag.Function):
    def forward(self, a, b):
        return a + b

    def backward(self, dy):
        return dy


def test_function_backward_with_the_wrong_count_fails_clearly() -> None:
    a, b = _var([1.0]), _var([2.0])
    with ag.record():
        y = _Wrong()(a, b)
    with pytest.raises(mx.MXNetError, match="Expecting 2 got 1"):
        y.backward()


def test_star_import_gives_what_mxnet_scripts_use() -> None:
    ns: dict = {}
    exec("from rsmx.autograd import *", ns)
    for name in ["record", "pause", "backward", "grad", "mark_variables", "Function", "NDArray"]:
        assert name in ns

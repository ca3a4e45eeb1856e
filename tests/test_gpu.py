"""Arrays on GPUs: creation, element-wise operators, copies between every pair of
devices, the engine's stream ordering and host waits, the GPU pool and errors. Runs on
real GPUs, and in CI on fake ones (``RSMX_FAKE_GPU=2``), which run the same kernels on the
host under the real engine."""

from __future__ import annotations

import os

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError

pytestmark = pytest.mark.gpu

SIZES = [0, 1, 31, 257, 100003]
FLOATS = ["float32", "float64", "float16"]
NUMERIC = FLOATS + ["uint8", "int8", "int32", "int64"]
NAIVE = os.environ.get("MXNET_ENGINE_TYPE", os.environ.get("RSMX_ENGINE_TYPE", "")) == "NaiveEngine"


def stats() -> dict:
    from rsmx.cuda import stats as cuda_stats

    return cuda_stats()


def gpus() -> list:
    return [mx.gpu(i) for i in range(mx.context.num_gpus())]


def random(shape, dtype, rng, low=-3.0, high=3.0) -> np.ndarray:
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -50), min(info.max, 50), size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def tol(dtype) -> float:
    return {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0)


def same(gpu_result, cpu_result, dtype) -> None:
    got, want = gpu_result.asnumpy(), cpu_result.asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    if tol(dtype):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol(dtype), atol=tol(dtype), equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_creation_matches_the_cpu(dtype):
    for ctx in gpus():
        for n in SIZES:
            for make in (mx.nd.zeros, mx.nd.ones):
                a = make((n,), ctx=ctx, dtype=dtype)
                assert a.context == ctx
                same(a, make((n,), dtype=dtype), dtype)
            same(mx.nd.full((n,), 7, ctx=ctx, dtype=dtype), mx.nd.full((n,), 7, dtype=dtype), dtype)
        same(mx.nd.arange(2, 40, 3, repeat=2, ctx=ctx, dtype=dtype),
             mx.nd.arange(2, 40, 3, repeat=2, dtype=dtype), dtype)
        eye = mx.nd._internal._eye
        same(eye(N=5, M=7, k=2, ctx=ctx, dtype=dtype), eye(N=5, M=7, k=2, dtype=dtype), dtype)


UNARY = ["exp", "log", "sqrt", "tanh", "relu", "sigmoid", "abs", "negative", "square",
         "sin", "floor", "round", "reciprocal", "log1p", "expm1", "sign", "rsqrt"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", UNARY)
def test_unary_operators_match_the_cpu(op, dtype):
    rng = np.random.default_rng(len(op))
    low = 0.1 if op in ("log", "sqrt", "rsqrt", "reciprocal", "log1p") else -3.0
    for n in SIZES:
        x = random((n,), dtype, rng, low=low)
        want = getattr(mx.nd, op)(mx.nd.array(x, dtype=dtype))
        got = getattr(mx.nd, op)(mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype))
        same(got, want, dtype)
    x = mx.nd.array(random((33,), dtype, rng), ctx=mx.gpu(0), dtype=dtype)
    same(mx.nd.clip(x, -1, 2), mx.nd.clip(x.copyto(mx.cpu()), -1, 2), dtype)


BINARY = ["__add__", "__sub__", "__mul__", "__truediv__", "__mod__", "__pow__", "__eq__",
          "__gt__", "__le__"]


@pytest.mark.parametrize("dtype", NUMERIC)
def test_binary_and_scalar_operators_match_the_cpu(dtype):
    rng = np.random.default_rng(3)
    for n in (1, 33, 100003):
        a, b = random((n,), dtype, rng), random((n,), dtype, rng)
        if dtype in FLOATS:
            b = np.where(np.abs(b) < 0.5, 1.5, b).astype(dtype)
            a = np.abs(a).astype(dtype)
        ca, cb = mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype)
        ga, gb = ca.copyto(mx.gpu(0)), cb.copyto(mx.gpu(0))
        for op in BINARY:
            if op == "__pow__" and dtype not in FLOATS:
                continue
            same(getattr(ga, op)(gb), getattr(ca, op)(cb), dtype)
        for op in ("__add__", "__rsub__", "__mul__", "__rtruediv__", "__gt__"):
            same(getattr(ga, op)(3), getattr(ca, op)(3), dtype)
        same(mx.nd.maximum(ga, gb), mx.nd.maximum(ca, cb), dtype)
        same(mx.nd.minimum(ga, 2), mx.nd.minimum(ca, 2), dtype)



@pytest.mark.parametrize("dtype", NUMERIC)
def test_binary_operators_on_views_at_every_alignment_match_the_cpu(dtype):
    # A view starting k elements in is 16-byte aligned only for some k: the kernels take
    # wide loads for those and single elements for the rest, with the same results.
    rng = np.random.default_rng(11)
    n = 1027
    a, b = random((n + 8,), dtype, rng), random((n + 8,), dtype, rng)
    ca, cb = mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype)
    ga, gb = ca.copyto(mx.gpu(0)), cb.copyto(mx.gpu(0))
    for k in range(8):
        for j in (k, 7 - k):
            same(ga[k:k + n] * gb[j:j + n] + ga[k:k + n], ca[k:k + n] * cb[j:j + n] + ca[k:k + n],
                 dtype)
        same(ga[k:k + n] - 2, ca[k:k + n] - 2, dtype)
        out = ga.copy()
        out[k:k + n] += gb[k:k + n]
        want = ca.copy()
        want[k:k + n] += cb[k:k + n]
        same(out, want, dtype)

@pytest.mark.parametrize("lhs, rhs", [((2, 3), (3,)), ((4, 1, 5), (1, 6, 1)), ((7, 1), (1, 9)),
                                      ((3, 1, 2, 1), (5, 1, 4))])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_broadcasting_matches_the_cpu(lhs, rhs, dtype):
    rng = np.random.default_rng(5)
    a, b = random(lhs, dtype, rng), random(rhs, dtype, rng)
    ca, cb = mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype)
    ga, gb = ca.copyto(mx.gpu(0)), cb.copyto(mx.gpu(0))
    for name in ("broadcast_add", "broadcast_mul", "broadcast_maximum", "broadcast_greater"):
        same(getattr(mx.nd, name)(ga, gb), getattr(mx.nd, name)(ca, cb), dtype)


def test_in_place_updates_and_outputs_given():
    x = mx.nd.array(np.arange(10, dtype=np.float32), ctx=mx.gpu(0))
    y = mx.nd.ones((10,), ctx=mx.gpu(0))
    x += y
    x *= 2
    out = mx.nd.empty((10,), ctx=mx.gpu(0))
    mx.nd.elemwise_add(x, y, out=out)
    np.testing.assert_array_equal(out.asnumpy(), (np.arange(10) + 1) * 2 + 1)
    np.testing.assert_array_equal(x.asnumpy(), (np.arange(10) + 1) * 2)


def test_copies_between_every_pair_of_devices():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((37, 5)).astype(np.float32)
    devices = [mx.cpu(0), *gpus()]
    for src in devices:
        a = mx.nd.array(x, ctx=src)
        for dst in devices:
            b = a.copyto(dst)
            assert b.context == dst
            np.testing.assert_array_equal(b.asnumpy(), x)
            c = mx.nd.zeros((37, 5), ctx=dst)
            a.copyto(c)
            np.testing.assert_array_equal(c.asnumpy(), x)
    g = mx.nd.array(x, ctx=mx.gpu(0))
    np.testing.assert_array_equal(g.as_in_context(mx.cpu()).asnumpy(), x)
    g[:] = 3.0
    np.testing.assert_array_equal(g.asnumpy(), np.full_like(x, 3.0))


@pytest.mark.parametrize("n", [0, 1, 4 << 20, (3 << 20) + 12345])
def test_host_copies_through_pinned_blocks_keep_every_byte(n):
    # Sizes around the 4 MiB staging piece (in float32s: 4, 16 and 12 MiB and a tail).
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    a = mx.nd.array(x)
    g = a.copyto(mx.gpu(0))
    a[:] = 7.0  # the source changes as soon as the copy has completed in the engine
    np.testing.assert_array_equal(g.asnumpy(), x)
    np.testing.assert_array_equal((g + 1).as_in_context(mx.cpu()).asnumpy(), x + 1)


def test_a_copy_to_a_gpu_makes_no_host_wait():
    x = np.arange(1 << 20, dtype=np.float32)
    mx.nd.waitall()
    before = stats()
    arrays = [mx.nd.array(x + i, ctx=mx.gpu(0)) for i in range(20)]
    host = mx.nd.array(x)
    arrays += [host.copyto(mx.gpu(0)) for _ in range(20)]
    for a in arrays:
        a.wait_to_read()
    after = stats()
    if not NAIVE:
        # Waiting to read a GPU array waits for its writer's event; a copy waits only for
        # a pinned staging block, and only when the device has pinned all it may (which
        # depends on how far the device lags, so it is counted apart).
        syncs = after["host_syncs"] - before["host_syncs"]
        staging = after["staging_waits"] - before["staging_waits"]
        assert syncs - staging <= len(arrays)
    for i, a in enumerate(arrays):
        np.testing.assert_array_equal(a.asnumpy(), x + (i if i < 20 else 0))


def test_a_dependent_chain_makes_no_host_wait_until_it_is_read():
    x = mx.nd.zeros((1,), ctx=mx.gpu(0))
    mx.nd.waitall()
    before = stats()
    for _ in range(1000):
        x = x + 1
    assert x.asnumpy()[0] == 1000.0
    after = stats()
    assert after["launches"] - before["launches"] == 1000
    if not NAIVE:
        # Only the copy to the host waits for the device: its stream, maybe its event.
        assert after["host_syncs"] - before["host_syncs"] <= 2


def test_work_on_two_devices_stays_ordered():
    if len(gpus()) < 2:
        pytest.skip("needs two GPUs")
    a = mx.nd.ones((1000,), ctx=mx.gpu(0))
    for _ in range(50):
        a = a * 1.01
        b = a.copyto(mx.gpu(1)) + 1
        a = b.copyto(mx.gpu(0)) - 1
    np.testing.assert_allclose(a.asnumpy(), np.full(1000, 1.01 ** 50, np.float32), rtol=1e-4)


def test_a_steady_loop_allocates_no_device_memory():
    w = mx.nd.ones((256, 64), ctx=mx.gpu(0))
    g = mx.nd.full((256, 64), 0.5, ctx=mx.gpu(0))
    tmp = mx.nd.empty((256, 64), ctx=mx.gpu(0))
    for step in range(20):
        mx.nd._internal._mul_scalar(g, scalar=0.1, out=tmp)
        w -= tmp
        if step == 1:
            mx.nd.waitall()
            allocs = stats()["allocs"]
    mx.nd.waitall()
    assert stats()["allocs"] == allocs
    np.testing.assert_allclose(w.asnumpy(), np.full((256, 64), 1 - 20 * 0.05), atol=1e-5)
    s = mx.storage.stats(mx.gpu(0))
    assert s["bytes_in_use"] > 0 and s["peak_bytes_in_use"] >= s["bytes_in_use"]


def test_waitall_and_wait_to_read():
    xs = [mx.nd.full((1000,), i, ctx=mx.gpu(0)) * 2 for i in range(20)]
    mx.nd.waitall()
    for i, x in enumerate(xs):
        x.wait_to_read()
        assert x.asnumpy()[0] == 2 * i


def test_save_and_load_gpu_arrays(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = str(tmp_path / "a.params")
    mx.nd.save(path, {"w": mx.nd.array(x, ctx=mx.gpu(0))})
    back = mx.nd.load(path)
    np.testing.assert_array_equal(back["w"].asnumpy(), x)
    np.testing.assert_array_equal(back["w"].as_in_context(mx.gpu(0)).asnumpy(), x)


def test_arrays_on_different_devices_are_refused():
    with pytest.raises(MXNetError, match=r"cpu\(0\).*gpu\(0\)|gpu\(0\).*cpu\(0\)"):
        mx.nd.ones((2,), ctx=mx.gpu(0)) + mx.nd.ones((2,))


def test_a_kernel_error_surfaces_at_the_next_wait_and_the_engine_goes_on():
    x = mx.nd.ones((4,), ctx=mx.gpu(0), dtype="bool")
    y = mx.nd.exp(x)
    with pytest.raises(MXNetError, match="exp"):
        y.asnumpy()
    z = mx.nd.ones((4,), ctx=mx.gpu(0)) * 3
    assert z.asnumpy().tolist() == [3.0] * 4


def test_out_of_memory_is_a_clean_error():
    with pytest.raises(MXNetError, match="(?i)memory"):
        mx.nd.zeros((1 << 42,), ctx=mx.gpu(0), dtype="uint8").wait_to_read()
    keep = mx.nd.ones((1000,), ctx=mx.gpu(0))
    assert (keep * 2).asnumpy()[0] == 2.0


@pytest.mark.parametrize("dtype", FLOATS)
def test_matrix_products_match_the_cpu(dtype):
    rng = np.random.default_rng(11)
    rtol = {"float16": 3e-2, "float32": 1e-4, "float64": 1e-10}[dtype]
    cases = [((7, 5), (5, 3), False, False), ((5, 7), (5, 3), True, False),
             ((7, 5), (3, 5), False, True), ((2, 3, 4), (4, 6), False, False), ((1, 0), (0, 4), False, False)]
    for ls, rs, ta, tb in cases:
        a, b = random(ls, dtype, rng, -1, 1), random(rs, dtype, rng, -1, 1)
        want = mx.nd.dot(mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype), transpose_a=ta,
                         transpose_b=tb).asnumpy()
        got = mx.nd.dot(mx.nd.array(a, ctx=mx.gpu(0), dtype=dtype),
                        mx.nd.array(b, ctx=mx.gpu(0), dtype=dtype), transpose_a=ta, transpose_b=tb)
        np.testing.assert_allclose(got.asnumpy().astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=rtol)
    a, b = random((4, 3, 5), dtype, rng, -1, 1), random((4, 5, 2), dtype, rng, -1, 1)
    want = mx.nd.batch_dot(mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype)).asnumpy()
    got = mx.nd.batch_dot(mx.nd.array(a, ctx=mx.gpu(0), dtype=dtype),
                          mx.nd.array(b, ctx=mx.gpu(0), dtype=dtype)).asnumpy()
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("no_bias", [False, True])
def test_fully_connected_forward_and_backward_match_the_cpu(no_bias):
    rng = np.random.default_rng(12)
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=6, no_bias=no_bias, name="fc")
    shapes = {"data": (5, 2, 4)}
    values = {}
    results = []
    for ctx in (mx.cpu(), mx.gpu(0)):
        ex = net.simple_bind(ctx, **shapes)
        for name, arr in ex.arg_dict.items():
            if name not in values:
                values[name] = rng.uniform(-1, 1, arr.shape).astype(np.float32)
            arr[:] = values[name]
        out = ex.forward(is_train=True)[0]
        head = np.linspace(-1, 1, out.size, dtype=np.float32).reshape(out.shape)
        ex.backward(mx.nd.array(head, ctx=ctx))
        results.append((out.asnumpy(), {k: v.asnumpy() for k, v in ex.grad_dict.items()}))
    (cpu_out, cpu_grads), (gpu_out, gpu_grads) = results
    np.testing.assert_allclose(gpu_out, cpu_out, rtol=1e-5, atol=1e-5)
    assert cpu_grads.keys() == gpu_grads.keys()
    for k in cpu_grads:
        np.testing.assert_allclose(gpu_grads[k], cpu_grads[k], rtol=1e-5, atol=1e-5, err_msg=k)


def test_random_draws_on_the_gpu_follow_the_seed():
    mx.random.seed(42)
    a = mx.nd.random.uniform(-1, 1, shape=(10000,), ctx=mx.gpu(0)).asnumpy()
    mx.random.seed(42)
    b = mx.nd.random.uniform(-1, 1, shape=(10000,), ctx=mx.gpu(0)).asnumpy()
    np.testing.assert_array_equal(a, b)
    assert a.min() >= -1 and a.max() <= 1 and abs(a.mean()) < 0.05
    n = mx.nd.random.normal(2, 3, shape=(20000,), ctx=mx.gpu(0), dtype="float64").asnumpy()
    assert abs(n.mean() - 2) < 0.1 and abs(n.std() - 3) < 0.1
    w = mx.nd.zeros((64, 32), ctx=mx.gpu(0))
    mx.init.Xavier()(mx.init.InitDesc("fc_weight"), w)
    assert np.abs(w.asnumpy()).max() > 0


def test_a_failed_launch_is_an_error_at_the_next_wait_naming_the_operator():
    if not stats()["fake"]:
        pytest.skip("launch failures are injected through the fake driver")
    from rsmx import _core

    x = mx.nd.ones((8,), ctx=mx.gpu(0))
    mx.nd.waitall()
    _core._cuda_fake_fail_next_launch()
    y = mx.nd.exp(x)
    with pytest.raises(MXNetError, match=r"exp.*CUDA_ERROR_LAUNCH_FAILED"):
        y.asnumpy()
    np.testing.assert_allclose(mx.nd.exp(x).asnumpy(), np.full(8, np.e, np.float32), rtol=1e-6)


@pytest.mark.parametrize("n_gpus", [1, 2])
def test_module_fit_of_the_mlp_on_gpus(n_gpus):
    if len(gpus()) < n_gpus:
        pytest.skip(f"needs {n_gpus} GPUs")
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.RandomState(0).permutation(len(digits.data))
    x = (digits.data / 16).astype(np.float32)[order]
    y = digits.target.astype(np.float32)[order]
    mx.random.seed(1)
    np.random.seed(1)
    net = mx.sym.Variable("data")
    net = mx.sym.Activation(mx.sym.FullyConnected(net, num_hidden=128, name="fc1"), act_type="relu")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(net, num_hidden=10, name="fc2"), name="softmax")
    train = mx.io.NDArrayIter(x[:1437], y[:1437], batch_size=32, shuffle=True)
    val = mx.io.NDArrayIter(x[1437:], y[1437:], batch_size=32)
    mod = mx.mod.Module(net, context=gpus()[:n_gpus])
    mod.fit(train, num_epoch=15, optimizer="sgd", kvstore="device",
            initializer=mx.init.Xavier(magnitude=2.0),
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4})
    acc = dict(mod.score(val, "acc"))["accuracy"]
    assert acc >= 0.95, acc
    assert mod.get_params()[0]["fc1_weight"].context == mx.cpu()

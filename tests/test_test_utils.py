"""mx.test_utils: comparisons, random data, numeric gradient checks, symbol checks,
environment settings and MNIST files read from local copies."""

from __future__ import annotations

import gzip
import os
import struct

import numpy as np
import pytest
import rsmx as mx
from rsmx import test_utils as tu


def test_tolerances_follow_the_element_type():
    assert tu.get_rtol() == 1e-5 and tu.get_atol(0.5) == 0.5
    assert tu.get_tols(np.zeros(2, np.float16), np.zeros(2, np.float64), None, None) == (1e-2, 1e-1)
    assert tu.get_tols(np.zeros(2, np.float32), np.zeros(2, np.float32), 1e-7, {np.dtype(np.float32): 0.0}) == (1e-7, 0.0)
    assert tu.default_numeric_eps()[np.dtype(np.float32)] == 2.0**-9


def test_assert_almost_equal_takes_ndarrays_and_says_where_they_differ():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    tu.assert_almost_equal(mx.nd.array(a), a + 1e-5)
    b = a.copy()
    b[1, 2] += 1
    with pytest.raises(AssertionError, match=r"Location of maximum error: \(1, 2\), x=5.00000000, y=6.00000000"):
        tu.assert_almost_equal(a, mx.nd.array(b), names=("x", "y"))
    with pytest.raises(AssertionError, match="shape"):
        tu.assert_almost_equal(a, a[:1], use_broadcast=False)
    assert tu.almost_equal(a, a * (1 + 1e-7)) and not tu.almost_equal(a, b)
    assert tu.same(mx.nd.array(a), a)
    tu.assert_almost_equal_ignore_nan(np.array([np.nan, 1.0]), np.array([5.0, 1.0]))
    tu.assert_almost_equal_with_err(a, b, etol=0.2)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal_with_err(a, b, etol=0.1)


def test_assert_exception_and_retry():
    tu.assert_exception(mx.nd.ones((2, 3)).reshape, mx.MXNetError, (4, 4))
    with pytest.raises(AssertionError, match="did not raise"):
        tu.assert_exception(lambda: None, ValueError)
    calls = []

    @tu.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) == 3

    flaky()
    assert len(calls) == 3


def test_random_shapes_and_arrays():
    np.random.seed(3)
    for _ in range(20):
        s = tu.rand_shape_nd(4, dim=5)
        assert len(s) == 4 and all(1 <= d <= 5 for d in s)
        assert all(0 <= d <= 3 for d in tu.rand_shape_2d(3, 3, allow_zero_size=True))
    arr = tu.rand_ndarray((3, 4), dtype="float64")
    assert arr.shape == (3, 4) and arr.dtype == np.float64 and arr.context == tu.default_context()
    with pytest.raises(mx.MXNetError, match="csr"):
        tu.rand_ndarray((3, 4), stype="csr")
    x = np.random.rand(2, 3, 4)
    np.testing.assert_allclose(tu.np_reduce(x, (0, 2), True, np.sum), x.sum(axis=(0, 2), keepdims=True))


def test_symbol_forward_and_backward_checks():
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    lhs, rhs = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0], [7.0, 8.0]])
    tu.check_symbolic_forward(mx.sym.dot(a, b), [lhs, rhs], [lhs @ rhs])
    with pytest.raises(AssertionError, match="EXPECTED_dot"):
        tu.check_symbolic_forward(mx.sym.dot(a, b), {"a": lhs, "b": rhs}, [lhs @ rhs + 1])
    ograd = np.ones((2, 2))
    tu.check_symbolic_backward(a * b, [lhs, rhs], [ograd], [rhs, lhs])
    tu.check_symbolic_backward(a * b, [lhs, rhs], [ograd], {"a": rhs, "b": lhs}, grad_req="add")
    tu.check_symbolic_backward(a * b, [lhs, rhs], [ograd], {"a": rhs, "b": lhs}, grad_req={"a": "write", "b": "null"})
    with pytest.raises(ValueError, match="do not match"):
        tu.check_symbolic_forward(a * b, {"a": lhs}, [lhs])
    np.testing.assert_allclose(tu.simple_forward(a + b, a=lhs, b=rhs), lhs + rhs)


def test_numeric_gradient_check_passes_right_gradients_and_catches_wrong_ones():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    net = mx.sym.Activation(net, act_type="tanh")
    loc = {"data": np.random.rand(2, 4), "fc_weight": np.random.rand(3, 4) - 0.5, "fc_bias": np.random.rand(3)}
    tu.check_numeric_gradient(net, loc, numeric_eps=1e-3, rtol=1e-2, atol=1e-3, dtype=np.float64)
    tu.check_numeric_gradient(net, loc, grad_nodes={"fc_weight": "add", "data": "write"}, rtol=1e-2, atol=1e-2)
    # BlockGrad's gradient is zero, which the finite differences contradict.
    with pytest.raises(AssertionError, match="NUMERICAL_x"):
        x = mx.sym.Variable("x")
        tu.check_numeric_gradient(mx.sym.BlockGrad(x) * x, [np.random.rand(3) + 1], rtol=1e-2, atol=1e-3)


def test_check_consistency_across_types():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    ctx_list = [
        {"ctx": mx.cpu(0), "data": (2, 5), "type_dict": {"data": np.float64}},
        {"ctx": mx.cpu(0), "data": (2, 5), "type_dict": {"data": np.float32}},
    ]
    truth = tu.check_consistency(net, ctx_list)
    assert truth["fc_output"].shape == (2, 4) and truth["fc_weight"].shape == (4, 5)
    assert truth["fc_weight"].dtype == np.float64


def test_environment_sets_and_restores():
    os.environ.pop("RSMX_TEST_UTILS_VAR", None)
    with tu.environment("RSMX_TEST_UTILS_VAR", "1"):
        assert os.environ["RSMX_TEST_UTILS_VAR"] == "1"
        with tu.environment({"RSMX_TEST_UTILS_VAR": None}):
            assert "RSMX_TEST_UTILS_VAR" not in os.environ
        assert os.environ["RSMX_TEST_UTILS_VAR"] == "1"
    assert "RSMX_TEST_UTILS_VAR" not in os.environ
    assert list(tu.list_gpus()) == list(range(mx.context.num_gpus()))


def _write_idx(path, images, labels):
    with open(path + "-images", "wb") as f:
        f.write(struct.pack(">IIII", 2051, *images.shape) + images.tobytes())
    with gzip.open(path + "-labels.gz", "wb") as f:
        f.write(struct.pack(">II", 2049, len(labels)) + labels.tobytes())


def test_mnist_files_are_read_from_local_copies(tmp_path, monkeypatch):
    images = np.random.randint(0, 256, size=(10, 28, 28), dtype=np.uint8)
    labels = np.arange(10, dtype=np.uint8)
    _write_idx(str(tmp_path / "m"), images, labels)
    np.testing.assert_array_equal(tu.read_mnist_images(str(tmp_path / "m-images")), images)
    np.testing.assert_array_equal(tu.read_mnist_labels(str(tmp_path / "m-labels.gz")), labels)
    with pytest.raises(mx.MXNetError, match="not an MNIST image file"):
        tu.read_mnist_images(str(tmp_path / "m-labels.gz"))
    # get_mnist_iterator finds the four files in data/ and downloads nothing.
    monkeypatch.chdir(tmp_path)
    os.makedirs("data")
    for split in ("train", "t10k"):
        with open(f"data/{split}-images-idx3-ubyte", "wb") as f:
            f.write(struct.pack(">IIII", 2051, 10, 28, 28) + images.tobytes())
        with open(f"data/{split}-labels-idx1-ubyte", "wb") as f:
            f.write(struct.pack(">II", 2049, 10) + labels.tobytes())
    train, val = tu.get_mnist_iterator(5, (1, 28, 28), num_parts=2, part_index=1)
    batch = next(iter(val))
    assert batch.data[0].shape == (5, 1, 28, 28)
    got = batch.label[0].asnumpy().astype(int)
    assert sorted(got) == [5, 6, 7, 8, 9]
    np.testing.assert_allclose(batch.data[0].asnumpy()[0, 0], images[got[0]] / 256.0, rtol=1e-6)
    flat, _ = tu.get_mnist_iterator(5, (784,))
    assert next(iter(flat)).data[0].shape == (5, 784)
    # A file already there is not fetched again.
    assert tu.download("http://invalid.invalid/train-labels-idx1-ubyte", dirname="data") == os.path.join(
        "data", "train-labels-idx1-ubyte"
    )

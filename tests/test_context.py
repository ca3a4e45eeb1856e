"""Contexts, the package surface and the error classes."""

from __future__ import annotations

import pytest
import rsmx as mx


def test_package_surface():
    assert isinstance(mx.__version__, str)
    assert mx.cpu(1) == mx.Context("cpu", 1)
    assert mx.cpu(0) != mx.cpu(1)
    assert str(mx.cpu(2)) == "cpu(2)"
    assert repr(mx.gpu(1)) == "gpu(1)"
    assert mx.cpu(3).device_type == "cpu" and mx.cpu(3).device_id == 3
    assert mx.context.num_gpus() == 0
    assert mx.current_context() == mx.cpu(0)
    assert hash(mx.cpu(1)) == hash(mx.Context(mx.cpu(1)))


def test_with_context_sets_the_default():
    with mx.Context("cpu", 2):
        assert mx.current_context() == mx.cpu(2)
        a = mx.nd.zeros((2,))
        with mx.cpu(3):
            assert mx.nd.ones((1,)).context == mx.cpu(3)
        assert mx.current_context() == mx.cpu(2)
    assert a.context == mx.cpu(2)
    assert mx.current_context() == mx.cpu(0)


def test_gpu_without_support_is_a_clear_error():
    if mx.context.num_gpus() > 0:
        pytest.skip("a GPU was found")
    msg = r"gpu\(0\): rsmx was not given a GPU: no CUDA driver found"
    with pytest.raises(mx.MXNetError, match=msg):
        mx.nd.zeros((2, 2), ctx=mx.gpu(0))
    with pytest.raises(mx.MXNetError, match=msg):
        mx.nd.array([1, 2]).copyto(mx.gpu(0))
    with pytest.raises(mx.MXNetError, match=msg):
        mx.nd.ones((2,), ctx=mx.gpu(0)) + 1
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=2)
    with pytest.raises(mx.MXNetError, match=msg):
        net.simple_bind(mx.gpu(0), data=(1, 3))
    # What is missing is named: here the driver library.
    with pytest.raises(mx.MXNetError, match="libcuda"):
        mx.nd.zeros((1,), ctx=mx.gpu(1))


def test_error_classes():
    from rsmx import base

    for cls, builtin in [
        (base.MXNetValueError, ValueError),
        (base.MXNetTypeError, TypeError),
        (base.MXNetIndexError, IndexError),
        (base.MXNetNotImplementedError, NotImplementedError),
    ]:
        assert issubclass(cls, base.MXNetError) and issubclass(cls, builtin)
    assert issubclass(base.MXNetError, RuntimeError)
    with pytest.raises(mx.MXNetError):
        mx.Context("tpu", 0)

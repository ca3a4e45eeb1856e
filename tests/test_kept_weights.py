"""Executors outside training keep what a convolution derives from its weights alone
(Winograd's transformed weights) from one forward pass to the next: every way of
writing the weights between passes must show in the next output."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import rsmx as mx

SHAPE = (2, 16, 12, 12)
WEIGHT = (16, 16, 3, 3)


def _net(fused: bool):
    data = mx.sym.Variable("data")
    y = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=16, no_bias=True, name="conv")
    if fused:
        y = mx.sym.BatchNorm(y, fix_gamma=False, name="bn")
        y = mx.sym.Activation(y, act_type="relu")
    return y


def _reference(ex, fused: bool) -> np.ndarray:
    """The output by imperative operators, from the executor's current arrays."""
    args = ex.arg_dict
    y = mx.nd.Convolution(args["data"], args["conv_weight"], kernel=(3, 3), pad=(1, 1),
                          num_filter=16, no_bias=True)
    if fused:
        aux = ex.aux_dict
        y = mx.nd.BatchNorm(y, args["bn_gamma"], args["bn_beta"], aux["bn_moving_mean"],
                            aux["bn_moving_var"], fix_gamma=False, use_global_stats=True)
        y = mx.nd.relu(y)
    return y.asnumpy()


def _bind(fused: bool):
    rng = np.random.default_rng(3)
    ex = _net(fused).simple_bind(mx.cpu(), data=SHAPE, grad_req="null")
    for name, arr in {**ex.arg_dict, **ex.aux_dict}.items():
        values = rng.uniform(-1, 1, arr.shape)
        if name.endswith("var"):
            values = np.abs(values) + 0.5
        arr[:] = values.astype(np.float32)
    return ex


def _writes():
    """Each way of writing the weights between two forward passes, as a function of the
    executor."""
    rng = np.random.default_rng(11)

    def fresh():
        return rng.uniform(-1, 1, WEIGHT).astype(np.float32)

    def from_numpy(ex):
        ex.arg_dict["conv_weight"][:] = fresh()

    def from_array(ex):
        ex.arg_dict["conv_weight"][:] = mx.nd.array(fresh())

    def in_place_op(ex):
        ex.arg_dict["conv_weight"][:] *= 2

    def out_argument(ex):
        w = ex.arg_dict["conv_weight"]
        mx.nd.elemwise_add(w, mx.nd.array(fresh()), out=w)

    def one_filter(ex):
        ex.arg_dict["conv_weight"][3] = 0.25

    def copy_params(ex):
        ex.copy_params_from({"conv_weight": mx.nd.array(fresh())}, allow_extra_params=True)

    def copyto(ex):
        mx.nd.array(fresh()).copyto(ex.arg_dict["conv_weight"])

    def through_dlpack(ex):
        # Another library writing memory it shares over DLPack, without the engine.
        shared = np.from_dlpack(ex.arg_dict["conv_weight"])
        new = fresh()
        ctypes.memmove(shared.ctypes.data, new.ctypes.data, new.nbytes)

    return [from_numpy, from_array, in_place_op, out_argument, one_filter, copy_params, copyto,
            through_dlpack]


@pytest.mark.parametrize("fused", [False, True], ids=["conv", "fused"])
@pytest.mark.parametrize("write", _writes(), ids=lambda f: f.__name__)
def test_a_write_between_passes_shows_in_the_next_output(fused, write):
    ex = _bind(fused)
    for _ in range(2):
        first = ex.forward(is_train=False)[0].asnumpy()
    np.testing.assert_allclose(first, _reference(ex, fused), rtol=1e-4, atol=1e-4)
    write(ex)
    second = ex.forward(is_train=False)[0].asnumpy()
    want = _reference(ex, fused)
    assert not np.allclose(second, first)
    np.testing.assert_allclose(second, want, rtol=1e-4, atol=1e-4)
    # And the pass after that, from what was kept of the new weights.
    np.testing.assert_array_equal(ex.forward(is_train=False)[0].asnumpy(), second)


def test_repeated_passes_give_the_same_bits_and_match_a_training_pass():
    ex = _bind(False)
    outs = [ex.forward(is_train=False)[0].asnumpy() for _ in range(3)]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    # A training pass transforms the weights afresh: the same products, the same bits.
    np.testing.assert_array_equal(ex.forward(is_train=True)[0].asnumpy(), outs[0])

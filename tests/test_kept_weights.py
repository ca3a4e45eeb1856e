"""Executors outside training keep what a convolution derives from its weights alone
(Winograd's transformed weights, or weights packed for a small pass) from one forward
pass to the next: every way of writing the weights between passes must show in the next
output."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import rsmx as mx

# Each layer as (data shape, weight shape, convolution arguments): a 3×3 layer by
# Winograd's method, and a strided one small enough for a packed product.
LAYERS = {
    "winograd": ((2, 16, 12, 12), (16, 16, 3, 3), dict(kernel=(3, 3), pad=(1, 1))),
    "packed": ((1, 128, 8, 8), (64, 128, 3, 3), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1))),
}


def _net(fused: bool, layer: str):
    _, weight, conv = LAYERS[layer]
    data = mx.sym.Variable("data")
    y = mx.sym.Convolution(data, num_filter=weight[0], no_bias=True, name="conv", **conv)
    if fused:
        y = mx.sym.BatchNorm(y, fix_gamma=False, name="bn")
        y = mx.sym.Activation(y, act_type="relu")
    return y


def _reference(ex, fused: bool, layer: str) -> np.ndarray:
    """The output by imperative operators, from the executor's current arrays."""
    _, weight, conv = LAYERS[layer]
    args = ex.arg_dict
    y = mx.nd.Convolution(args["data"], args["conv_weight"], num_filter=weight[0], no_bias=True,
                          **conv)
    if fused:
        aux = ex.aux_dict
        y = mx.nd.BatchNorm(y, args["bn_gamma"], args["bn_beta"], aux["bn_moving_mean"],
                            aux["bn_moving_var"], fix_gamma=False, use_global_stats=True)
        y = mx.nd.relu(y)
    return y.asnumpy()


def _bind(fused: bool, layer: str):
    rng = np.random.default_rng(3)
    ex = _net(fused, layer).simple_bind(mx.cpu(), data=LAYERS[layer][0], grad_req="null")
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

    def fresh(ex):
        return rng.uniform(-1, 1, ex.arg_dict["conv_weight"].shape).astype(np.float32)

    def from_numpy(ex):
        ex.arg_dict["conv_weight"][:] = fresh(ex)

    def from_array(ex):
        ex.arg_dict["conv_weight"][:] = mx.nd.array(fresh(ex))

    def in_place_op(ex):
        ex.arg_dict["conv_weight"][:] *= 2

    def out_argument(ex):
        w = ex.arg_dict["conv_weight"]
        mx.nd.elemwise_add(w, mx.nd.array(fresh(ex)), out=w)

    def one_filter(ex):
        ex.arg_dict["conv_weight"][3] = 0.25

    def copy_params(ex):
        ex.copy_params_from({"conv_weight": mx.nd.array(fresh(ex))}, allow_extra_params=True)

    def copyto(ex):
        mx.nd.array(fresh(ex)).copyto(ex.arg_dict["conv_weight"])

    def through_dlpack(ex):
        # Another library writing memory it shares over DLPack, without the engine.
        shared = np.from_dlpack(ex.arg_dict["conv_weight"])
        new = fresh(ex)
        ctypes.memmove(shared.ctypes.data, new.ctypes.data, new.nbytes)

    return [from_numpy, from_array, in_place_op, out_argument, one_filter, copy_params, copyto,
            through_dlpack]


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("fused", [False, True], ids=["conv", "fused"])
@pytest.mark.parametrize("write", _writes(), ids=lambda f: f.__name__)
def test_a_write_between_passes_shows_in_the_next_output(fused, write, layer):
    ex = _bind(fused, layer)
    for _ in range(2):
        first = ex.forward(is_train=False)[0].asnumpy()
    np.testing.assert_allclose(first, _reference(ex, fused, layer), rtol=1e-4, atol=1e-4)
    write(ex)
    second = ex.forward(is_train=False)[0].asnumpy()
    want = _reference(ex, fused, layer)
    assert not np.allclose(second, first)
    np.testing.assert_allclose(second, want, rtol=1e-4, atol=1e-4)
    # And the pass after that, from what was kept of the new weights.
    np.testing.assert_array_equal(ex.forward(is_train=False)[0].asnumpy(), second)


@pytest.mark.parametrize("layer", list(LAYERS))
def test_repeated_passes_give_the_same_bits_and_match_a_training_pass(layer):
    ex = _bind(False, layer)
    outs = [ex.forward(is_train=False)[0].asnumpy() for _ in range(3)]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    train = ex.forward(is_train=True)[0].asnumpy()
    if layer == "winograd":
        # A training pass transforms the weights afresh: the same products, the same bits.
        np.testing.assert_array_equal(train, outs[0])
    else:
        # A training pass goes by the general product, which sums in another order.
        np.testing.assert_allclose(train, outs[0], rtol=1e-5, atol=1e-5)


def test_a_packed_pass_fused_with_a_residual_matches_the_plain_operators():
    shape, weight, conv = LAYERS["packed"]
    data, skip = mx.sym.Variable("data"), mx.sym.Variable("skip")
    y = mx.sym.Convolution(data, num_filter=weight[0], no_bias=True, name="conv", **conv)
    y = mx.sym.BatchNorm(y, fix_gamma=False, name="bn")
    y = mx.sym.Activation(y + skip, act_type="relu")
    out_shape = (shape[0], weight[0], shape[2] // 2, shape[3] // 2)
    ex = y.simple_bind(mx.cpu(), data=shape, skip=out_shape, grad_req="null")
    rng = np.random.default_rng(5)
    for name, arr in {**ex.arg_dict, **ex.aux_dict}.items():
        values = rng.uniform(-1, 1, arr.shape)
        if name.endswith("var"):
            values = np.abs(values) + 0.5
        arr[:] = values.astype(np.float32)
    got = [ex.forward(is_train=False)[0].asnumpy() for _ in range(2)]
    np.testing.assert_array_equal(got[1], got[0])
    args, aux = ex.arg_dict, ex.aux_dict
    z = mx.nd.Convolution(args["data"], args["conv_weight"], num_filter=weight[0], no_bias=True,
                          **conv)
    z = mx.nd.BatchNorm(z, args["bn_gamma"], args["bn_beta"], aux["bn_moving_mean"],
                        aux["bn_moving_var"], fix_gamma=False, use_global_stats=True)
    want = np.maximum(z.asnumpy() + args["skip"].asnumpy(), 0)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)

"""Checkpoints written by MXNet 1.9.1 load, predict MXNet's outputs, give its gradients,
and are written back byte for byte (fixtures from fixtures/checkpoints/make_checkpoints.py)."""

import pathlib

import numpy as np
import pytest
import rsmx as mx

HERE = pathlib.Path(__file__).parent / "fixtures" / "checkpoints"


def load(name):
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(HERE / name), 3)
    io = mx.nd.load(str(HERE / f"{name}-io.params"))
    return sym, arg_params, aux_params, io


# MXNet computed the ResNet's output with its oneDNN kernels, its convolutions fused with
# BatchNorm and ReLU: float32 rounding differs more than in the small nets.
TOLERANCE = {"mlp": (1e-5, 1e-6), "convnet": (1e-5, 1e-6), "resnet": (1e-4, 1e-5)}


@pytest.mark.parametrize("name", ["mlp", "convnet", "resnet"])
def test_predicts_mxnet_outputs(name, ctx):
    sym, arg_params, aux_params, io = load(name)
    data = io["data"]
    ex = sym.simple_bind(ctx, data=data.shape, grad_req="null")
    ex.copy_params_from(arg_params, aux_params)
    out = ex.forward(is_train=False, data=data)[0].asnumpy()
    rtol, atol = TOLERANCE[name]
    np.testing.assert_allclose(out, io["output"].asnumpy(), rtol=rtol, atol=atol)
    again = ex.forward(is_train=False, data=data)[0].asnumpy()
    assert again.tobytes() == out.tobytes(), "a second forward pass gave other bits"


def test_mlp_gradients_match_mxnet(ctx):
    sym, arg_params, aux_params, io = load("mlp")
    ex = sym.simple_bind(ctx, data=io["data"].shape)
    ex.copy_params_from(arg_params, aux_params)
    ex.forward(is_train=True, data=io["data"], softmax_label=io["label"])
    ex.backward()
    for key, want in io.items():
        if key.startswith("grad:"):
            got = ex.grad_dict[key[5:]].asnumpy()
            np.testing.assert_allclose(got, want.asnumpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["mlp", "convnet", "resnet"])
def test_writes_identical_files(name, tmp_path):
    sym, arg_params, aux_params, _ = load(name)
    prefix = str(tmp_path / name)
    mx.model.save_checkpoint(prefix, 3, sym, arg_params, aux_params)
    for suffix in ["-symbol.json", "-0003.params"]:
        assert (tmp_path / f"{name}{suffix}").read_bytes() == (HERE / f"{name}{suffix}").read_bytes()


def test_built_symbol_json_matches_mxnet():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, name="fc1", num_hidden=16)
    net = mx.sym.Activation(net, name="relu1", act_type="relu")
    net = mx.sym.FullyConnected(net, name="fc2", num_hidden=5)
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    assert net.tojson() == (HERE / "mlp-symbol.json").read_text()


def test_missing_checkpoint_is_an_error(tmp_path):
    with pytest.raises(mx.MXNetError):
        mx.model.load_checkpoint(str(tmp_path / "nothing"), 1)

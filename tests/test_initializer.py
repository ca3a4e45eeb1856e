"""mx.initializer: name dispatch and deterministic rules against MXNet 1.9.1, random rules
by their statistics, create/dumps, Load and Mixed."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError, MXNetTypeError, MXNetValueError

FIXTURES = Path(__file__).parent / "fixtures" / "training"
REF = json.loads((FIXTURES / "init.json").read_text())

# Running statistics: MXNet's symbols give them an '__init__' attribute, and without one its
# InitDesc path raises; rsmx falls back to the values that attribute would give.
_MOVING = {"bn_moving_mean": 0.0, "bn_moving_var": 1.0, "bn_moving_inv_var": 0.0, "bn_moving_avg": 0.0}


def _run(init, desc, shape, *, ctx) -> dict:
    arr = mx.nd.full(shape, -5.0, ctx=ctx)
    try:
        init(desc, arr)
    except MXNetError as e:
        return {"error": e}
    return {"value": arr.asnumpy()}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("case", REF["dispatch"], ids=lambda c: f"{c['name']}-{c['mode']}")
def test_dispatch_by_name_matches_mxnet(case: dict, ctx) -> None:
    name, shape = case["name"], tuple(case["shape"])
    desc = mx.init.InitDesc(name) if case["mode"] == "desc" else name
    got = _run(mx.init.Constant(7.0), desc, shape, ctx=ctx)
    if case["mode"] == "desc" and name in _MOVING:
        assert case["error"] == "ValueError"
        np.testing.assert_array_equal(got["value"], np.full(shape, _MOVING[name], np.float32))
    elif "error" in case:
        assert isinstance(got.get("error"), ValueError), got
        assert name in str(got["error"])
    elif case.get("random"):
        values = got["value"]
        assert np.all(values == values.flat[0]) and -127 <= values.flat[0] < 127
    else:
        np.testing.assert_array_equal(got["value"], np.array(case["value"], np.float32))


@pytest.mark.parametrize("case", REF["attrs"], ids=lambda c: c["attr"])
def test_init_attribute_overrides_name(case: dict, ctx) -> None:
    desc = mx.init.InitDesc("bn_moving_mean", attrs={"__init__": case["attr"]})
    got = _run(mx.init.Uniform(), desc, tuple(case["shape"]), ctx=ctx)
    np.testing.assert_array_equal(got["value"], np.array(case["value"], np.float32))


def test_dumps_and_create_round_trip(ctx) -> None:
    inits = {
        "zero": mx.init.Zero(), "one": mx.init.One(), "constant": mx.init.Constant(0.5),
        "constant_array": mx.init.Constant(np.array([[1.0, 2.0]])),
        "uniform": mx.init.Uniform(0.2), "normal": mx.init.Normal(), "xavier": mx.init.Xavier(),
        "xavier_args": mx.init.Xavier("gaussian", "in", 2), "msraprelu": mx.init.MSRAPrelu(slope=0.1),
        "orthogonal": mx.init.Orthogonal(), "bilinear": mx.init.Bilinear(), "lstmbias": mx.init.LSTMBias(2.0),
    }
    for key, init in inits.items():
        text = init.dumps()
        assert text == REF["dumps"][key], key
        if key not in ("msraprelu", "constant_array"):
            assert mx.init.create(text) == init, key
    made = mx.init.create(inits["msraprelu"].dumps())
    assert type(made) is mx.init.MSRAPrelu and made.magnitude == 2.0 / 1.01
    assert mx.init.Constant(mx.nd.array([3.0, 4.0], ctx=ctx)).dumps() == '["constant", {"value": [3.0, 4.0]}]'


def test_create_names() -> None:
    for name, cls in {"zeros": mx.init.Zero, "ZERO": mx.init.Zero, "ones": mx.init.One,
                      "one": mx.init.One, "xavier": mx.init.Xavier, "msraprelu": mx.init.MSRAPrelu,
                      "lstmbias": mx.init.LSTMBias, "bilinear": mx.init.Bilinear}.items():
        assert type(mx.init.create(name)) is cls, name
    assert mx.init.create("uniform", 0.3).scale == 0.3
    x = mx.init.Xavier()
    assert mx.init.create(x) is x
    assert mx.initializer is mx.init
    assert mx.init.Xavier() == mx.init.Xavier() and mx.init.Xavier() != mx.init.Xavier(magnitude=2)
    with pytest.raises(MXNetValueError, match="unknown initializer 'glorot'"):
        mx.init.create("glorot")
    with pytest.raises(MXNetTypeError):
        mx.init.create(3)


@pytest.mark.parametrize("shape", [(1, 1, 4, 4), (2, 3, 3, 5), (1, 2, 1, 7)])
def test_bilinear_matches_mxnet(shape: tuple, ctx) -> None:
    arr = mx.nd.zeros(shape, ctx=ctx)
    mx.init.Bilinear()(mx.init.InitDesc("up_weight"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.array(REF["bilinear"][str(shape)], np.float32))


@pytest.mark.parametrize("n", [4, 8, 10])
def test_lstm_bias_matches_mxnet(n: int, ctx) -> None:
    arr = mx.nd.full((n,), 9.0, ctx=ctx)
    mx.init.LSTMBias(2.0)(mx.init.InitDesc("lstm_i2h_weight"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.array(REF["lstm"][str(n)], np.float32))


def _draw(init, shape, name="fc_weight", dtype="float32", *, ctx) -> np.ndarray:
    arr = mx.nd.zeros(shape, ctx=ctx, dtype=dtype)
    init(mx.init.InitDesc(name), arr)
    assert arr.dtype == np.dtype(dtype)
    return arr.asnumpy().astype(np.float64)


def test_uniform_and_normal_statistics(ctx) -> None:
    mx.random.seed(11)
    u = _draw(mx.init.Uniform(0.2), (400, 500), ctx=ctx)
    assert u.min() >= -0.2 and u.max() < 0.2 and u.max() > 0.199 and u.min() < -0.199
    assert abs(u.mean()) < 2e-3 and u.std() == pytest.approx(0.2 / math.sqrt(3), rel=0.01)
    n = _draw(mx.init.Normal(0.5), (400, 500), ctx=ctx)
    assert abs(n.mean()) < 5e-3 and n.std() == pytest.approx(0.5, rel=0.01)
    d = _draw(mx.init.Normal(2.0), (300, 300), dtype="float64", ctx=ctx)
    assert d.std() == pytest.approx(2.0, rel=0.02)


@pytest.mark.parametrize(
    ("init", "scale", "uniform"),
    [
        (mx.init.Xavier(), math.sqrt(3 / ((40 * 9 + 30 * 9) / 2)), True),
        (mx.init.Xavier(factor_type="in", magnitude=2), math.sqrt(2 / (40 * 9)), True),
        (mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=6), math.sqrt(6 / (30 * 9)), False),
        (mx.init.MSRAPrelu(slope=0.5), math.sqrt(2 / 1.25 / ((40 * 9 + 30 * 9) / 2)), False),
        (mx.init.MSRAPrelu(factor_type="in", slope=0.0), math.sqrt(2 / (40 * 9)), False),
    ],
)
def test_xavier_scales(init, scale: float, uniform: bool, ctx) -> None:
    mx.random.seed(5)
    w = _draw(init, (30, 40, 3, 3), name="conv_weight", ctx=ctx)
    if uniform:
        assert np.abs(w).max() <= scale and np.abs(w).max() > 0.999 * scale
        assert w.std() == pytest.approx(scale / math.sqrt(3), rel=0.02)
    else:
        assert w.std() == pytest.approx(scale, rel=0.02)
        assert np.abs(w).max() > 3 * scale
    assert abs(w.mean()) < 0.02 * scale


def test_random_rules_follow_seed(ctx) -> None:
    for init in (mx.init.Uniform(), mx.init.Normal(), mx.init.Xavier(), mx.init.Orthogonal()):
        mx.random.seed(42)
        a = _draw(init, (8, 6), ctx=ctx)
        mx.random.seed(42)
        b = _draw(init, (8, 6), ctx=ctx)
        c = _draw(init, (8, 6), ctx=ctx)
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(b, c)


@pytest.mark.parametrize("shape", [(6, 20), (20, 6), (4, 3, 2, 2)])
@pytest.mark.parametrize("rand_type", ["uniform", "normal"])
def test_orthogonal(shape: tuple, rand_type: str, ctx) -> None:
    w = _draw(mx.init.Orthogonal(scale=2.0, rand_type=rand_type), shape, ctx=ctx).reshape(shape[0], -1)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=1e-5)


def test_xavier_errors(ctx) -> None:
    with pytest.raises(MXNetValueError, match="vector fc_weight"):
        mx.init.Xavier()(mx.init.InitDesc("fc_weight"), mx.nd.zeros((5,), ctx=ctx))
    with pytest.raises(MXNetValueError, match="factor type"):
        mx.init.Xavier(factor_type="sum")(mx.init.InitDesc("fc_weight"), mx.nd.zeros((5, 5), ctx=ctx))
    with pytest.raises(MXNetValueError, match="random type"):
        mx.init.Xavier(rnd_type="cauchy")(mx.init.InitDesc("fc_weight"), mx.nd.zeros((5, 5), ctx=ctx))


def test_global_init_and_custom_registration(ctx) -> None:
    @mx.init.register
    class HalfRsmx(mx.init.Initializer):
        def _init_weight(self, name, arr) -> None:
            arr[:] = 0.5

    desc = mx.init.InitDesc("w_weight")
    init = HalfRsmx()
    arr = mx.nd.zeros((2, 2), ctx=ctx)
    init(desc, arr)
    assert desc.global_init is init
    assert arr.asnumpy().tolist() == [[0.5, 0.5], [0.5, 0.5]]
    via_attr = mx.init.InitDesc("anything", attrs={"__init__": '["halfrsmx", {}]'})
    mx.init.Zero()(via_attr, arr)
    assert arr.asnumpy().tolist() == [[0.5, 0.5], [0.5, 0.5]]
    with pytest.raises(MXNetError, match="does not define"):
        mx.init.Initializer()(mx.init.InitDesc("x_weight"), arr)


def test_legacy_call_warns_and_checks_types(ctx) -> None:
    arr = mx.nd.zeros((2, 2), ctx=ctx)
    with pytest.warns(DeprecationWarning):
        mx.init.One()("fc_weight", arr)
    assert arr.asnumpy().sum() == 4
    with pytest.warns(DeprecationWarning), pytest.raises(MXNetTypeError, match="NDArray"):
        mx.init.One()("fc_weight", np.zeros((2, 2)))
    with pytest.warns(DeprecationWarning), pytest.raises(MXNetValueError, match="6 values"):
        mx.init.One()("stn_loc_bias", mx.nd.zeros((4,), ctx=ctx))


def test_load(tmp_path: Path, ctx) -> None:
    params = {"arg:fc_weight": mx.nd.array([[1.0, 2.0]], ctx=ctx), "aux:bn_moving_var": mx.nd.array([3.0], ctx=ctx), "plain": mx.nd.array([4.0], ctx=ctx)}
    path = tmp_path / "m.params"
    mx.nd.save(str(path), params)
    for source in (params, str(path)):
        init = mx.init.Load(source, default_init=mx.init.Constant(9.0))
        assert sorted(init.param) == ["bn_moving_var", "fc_weight", "plain"]
        arr = mx.nd.zeros((1, 2), ctx=ctx)
        init(mx.init.InitDesc("fc_weight"), arr)
        assert arr.asnumpy().tolist() == [[1.0, 2.0]]
        other = mx.nd.zeros((3,), ctx=ctx)
        init(mx.init.InitDesc("new_weight"), other)
        assert other.asnumpy().tolist() == [9.0] * 3
    with pytest.raises(MXNetValueError, match=r"fc_weight .*target \(2, 2\) vs loaded \(1, 2\)"):
        mx.init.Load(params)(mx.init.InitDesc("fc_weight"), mx.nd.zeros((2, 2), ctx=ctx))
    with pytest.raises(MXNetValueError, match="new_weight"):
        mx.init.Load(params)(mx.init.InitDesc("new_weight"), mx.nd.zeros((2, 2), ctx=ctx))
    with pytest.raises(MXNetTypeError):
        mx.init.Load([mx.nd.zeros(1, ctx=ctx)])


def test_mixed(ctx) -> None:
    init = mx.init.Mixed(["bias$", "fc1_.*", ".*"], [mx.init.Zero(), mx.init.Constant(2.0), mx.init.One()])
    results = {}
    for name in ("fc1_bias", "fc1_weight", "fc2_weight"):
        arr = mx.nd.full((2,), -1.0, ctx=ctx)
        init(mx.init.InitDesc(name), arr)
        results[name] = arr.asnumpy().tolist()
    # re.match anchors at the start: 'bias$' does not match 'fc1_bias'.
    assert results == {"fc1_bias": [0.0, 0.0], "fc1_weight": [2.0, 2.0], "fc2_weight": [1.0, 1.0]}
    with pytest.raises(MXNetValueError, match="conv_weight did not match"):
        mx.init.Mixed(["fc.*"], [mx.init.One()])(mx.init.InitDesc("conv_weight"), mx.nd.zeros((1,), ctx=ctx))
    with pytest.raises(MXNetValueError, match="2 patterns but 1"):
        mx.init.Mixed(["a", "b"], [mx.init.One()])


def test_verbosity_logs(caplog: pytest.LogCaptureFixture, ctx) -> None:
    init = mx.init.One().set_verbosity(True)
    with caplog.at_level(logging.INFO):
        init(mx.init.InitDesc("fc_weight"), mx.nd.zeros((2, 2), ctx=ctx))
        init(mx.init.InitDesc("fc_bias"), mx.nd.zeros((2,), ctx=ctx))
    assert "Initialized fc_weight as weight: 1.0" in caplog.text
    assert "Initialized fc_bias as bias: 0.0" in caplog.text


def test_initdesc() -> None:
    d = mx.init.InitDesc("fc_weight", attrs={"lr_mult": "2"})
    assert d == "fc_weight" and isinstance(d, str)
    assert d.attrs == {"lr_mult": "2"} and d.global_init is None
    assert mx.init.InitDesc("x").attrs == {}

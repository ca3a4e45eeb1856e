"""mx.metric: values after each batch against MXNet 1.9.1, local/global statistics, create,
the registry and errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError, MXNetValueError

FIXTURES = Path(__file__).parent / "fixtures" / "training"
CASES = json.loads((FIXTURES / "metric.json").read_text())
INPUTS = np.load(FIXTURES / "metric_inputs.npz")


def accuracy_f32(label: np.ndarray, pred: np.ndarray) -> np.float32:
    """A custom metric returning a float32 value."""
    return (label.ravel() == pred.argmax(1)).mean().astype(np.float32)


def sq_err(label: np.ndarray, pred: np.ndarray) -> tuple:
    """A custom metric returning a (float32 sum, count) pair."""
    return ((pred[:, 0] - label.ravel()) ** 2).sum(), label.size


def _make(name, kwargs: dict) -> mx.metric.EvalMetric:
    if name == "custom_f32":
        return mx.metric.np(accuracy_f32)
    if name == "custom_tuple":
        return mx.metric.create(sq_err)
    if isinstance(name, list):
        return mx.metric.CompositeEvalMetric([name[0], name[1], mx.metric.TopKAccuracy(3)])
    return mx.metric.create(name, **kwargs)


def _same(got: list, want: list) -> None:
    assert [n for n, _ in got] == [n for n, _ in want]
    for (_, g), (_, w) in zip(got, want, strict=True):
        if isinstance(w, float) and math.isnan(w):
            assert math.isnan(g)
        else:
            assert g == pytest.approx(w, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("ci", range(len(CASES)), ids=lambda i: f"{CASES[i]['name']}-{CASES[i]['kind']}-{i}")
def test_metric_matches_mxnet(ci: int, ctx) -> None:
    case = CASES[ci]
    metric = _make(case["name"], case["kwargs"])
    for bi, step in enumerate(case["steps"]):
        labels = [mx.nd.array(INPUTS[f"c{ci}_b{bi}_l{i}"], ctx=ctx) for i in range(step["n_labels"])]
        preds = [mx.nd.array(INPUTS[f"c{ci}_b{bi}_p{i}"], ctx=ctx) for i in range(step["n_preds"])]
        metric.update(labels, preds)
        _same(metric.get_name_value(), step["get"])
        _same(metric.get_global_name_value(), step["get_global"])
        assert float(getattr(metric, "num_inst", -1)) == step["num_inst"]
        assert float(getattr(metric, "global_num_inst", -1)) == step["global_num_inst"]
        if step.get("reset_local"):
            metric.reset_local()
    want = case["str"]
    assert str(metric).split(":")[0] == want.split(":")[0]
    metric.reset()
    for _, value in metric.get_global_name_value():
        assert math.isnan(value)


def test_accumulation_is_double_precision(ctx) -> None:
    # float32 per-batch values summed in float32 would drift from the float64 sum.
    metric = mx.metric.MAE()
    rng = np.random.default_rng(0)
    expected = 0.0
    for _ in range(300):
        label = rng.standard_normal(7).astype(np.float32)
        pred = rng.standard_normal((7, 1)).astype(np.float32)
        expected += float(np.abs(label.reshape(7, 1) - pred).mean())
        metric.update([mx.nd.array(label, ctx=ctx)], [mx.nd.array(pred, ctx=ctx)])
    assert type(metric.sum_metric) is float
    assert metric.sum_metric == expected
    assert metric.get()[1] == expected / 300


def test_per_batch_versus_per_example_averaging(ctx) -> None:
    mae = mx.metric.MAE()
    mae.update([mx.nd.array([0.0], ctx=ctx)], [mx.nd.array([[1.0]], ctx=ctx)])
    mae.update([mx.nd.array([0.0, 0.0, 0.0], ctx=ctx)], [mx.nd.array([[3.0], [3.0], [3.0]], ctx=ctx)])
    assert mae.get() == ("mae", 2.0)  # mean of the batch means 1 and 3
    acc = mx.metric.Accuracy()
    acc.update([mx.nd.array([1], ctx=ctx)], [mx.nd.array([[0.0, 1.0]], ctx=ctx)])
    acc.update([mx.nd.array([1, 1, 1], ctx=ctx)], [mx.nd.array([[1.0, 0.0]] * 3, ctx=ctx)])
    assert acc.get() == ("accuracy", 0.25)  # per example


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_accuracy_argmax_is_the_operators(dtype: str, axis: int, ctx) -> None:
    # ties, NaNs and a row of equal scores: the first maximum (or the first NaN) counts,
    # whether the argmax is taken on the host (float32/float64) or by the operator
    scores = np.array([[0.1, 0.7, 0.7, 0.2], [np.nan, 0.3, np.nan, 0.9],
                       [0.5, 0.5, 0.5, 0.5], [0.2, 0.9, 0.1, np.nan],
                       [0.4, 0.1, 0.8, 0.8]], dtype=dtype)
    if axis == 0:
        scores = scores.T.copy()
    pred = mx.nd.array(scores, dtype=dtype, ctx=ctx)
    want = mx.nd.argmax(pred, axis=axis).asnumpy().astype("int32")
    assert list(want) == [1, 0, 0, 3, 2]
    for labels, hits in (([1, 0, 0, 3, 2], 5), ([1, 2, 0, 0, 2], 3), ([0, 1, 1, 0, 0], 0)):
        acc = mx.metric.Accuracy(axis=axis)
        acc.update([mx.nd.array(labels, ctx=ctx)], [pred])
        assert (acc.sum_metric, acc.num_inst) == (hits, 5)


def test_local_and_global(ctx) -> None:
    acc = mx.metric.create("acc")
    acc.update([mx.nd.array([0, 1], ctx=ctx)], [mx.nd.array([0, 1], ctx=ctx)])
    acc.reset_local()
    assert math.isnan(acc.get()[1])
    assert acc.get_global() == ("accuracy", 1.0)
    acc.update([mx.nd.array([0, 1], ctx=ctx)], [mx.nd.array([1, 1], ctx=ctx)])
    assert acc.get() == ("accuracy", 0.5)
    assert acc.get_global() == ("accuracy", 0.75)
    assert (acc.num_inst, acc.global_num_inst, acc.sum_metric, acc.global_sum_metric) == (2, 4, 1.0, 3.0)
    assert str(acc) == "EvalMetric: {'accuracy': 0.5}"


def test_update_dict_and_names(ctx) -> None:
    acc = mx.metric.Accuracy(output_names=["out"], label_names=["lab"])
    acc.update_dict({"lab": mx.nd.array([1, 0], ctx=ctx), "other": mx.nd.array([5, 5], ctx=ctx)},
                    {"x": mx.nd.array([0, 0], ctx=ctx), "out": mx.nd.array([1, 1], ctx=ctx)})
    assert acc.get() == ("accuracy", 0.5)
    with pytest.raises(MXNetValueError, match="'lab'"):
        acc.update_dict({}, {"out": mx.nd.array([1], ctx=ctx)})
    comp = mx.metric.CompositeEvalMetric(["acc", "mse"], label_names=["lab"])
    comp.update_dict({"lab": mx.nd.array([1.0, 0.0], ctx=ctx), "z": mx.nd.array([7.0, 7.0], ctx=ctx)},
                     {"out": mx.nd.array([1.0, 1.0], ctx=ctx)})
    assert comp.get() == (["accuracy", "mse"], [0.5, 0.5])
    assert comp.get_name_value() == [("accuracy", 0.5), ("mse", 0.5)]
    assert comp.get_metric(1).name == "mse"
    with pytest.raises(MXNetValueError, match="out of range"):
        comp.get_metric(5)


def test_create_names_and_aliases() -> None:
    expect = {
        "acc": mx.metric.Accuracy, "accuracy": mx.metric.Accuracy, "ACC": mx.metric.Accuracy,
        "ce": mx.metric.CrossEntropy, "crossentropy": mx.metric.CrossEntropy,
        "nll_loss": mx.metric.NegativeLogLikelihood, "mae": mx.metric.MAE, "mse": mx.metric.MSE,
        "rmse": mx.metric.RMSE, "f1": mx.metric.F1, "mcc": mx.metric.MCC, "loss": mx.metric.Loss,
        "pearsonr": mx.metric.PearsonCorrelation, "pcc": mx.metric.PCC, "torch": mx.metric.Torch,
        "caffe": mx.metric.Caffe, "composite": mx.metric.CompositeEvalMetric,
    }
    for name, cls in expect.items():
        assert type(mx.metric.create(name)) is cls, name
    top = mx.metric.create("top_k_accuracy", top_k=5)
    assert type(top) is mx.metric.TopKAccuracy and top.name == "top_k_accuracy_5"
    assert mx.metric.create("top_k_acc", 2).top_k == 2
    assert mx.metric.create("perplexity", None).name == "perplexity"
    acc = mx.metric.Accuracy()
    assert mx.metric.create(acc) is acc
    comp = mx.metric.create(["acc", "mse", mx.metric.MAE()])
    assert [m.name for m in comp.metrics] == ["accuracy", "mse", "mae"]
    assert mx.metric.create('["accuracy", {"axis": 2}]').axis == 2
    assert mx.metric.create({"metric": "ce", "eps": 0.5}).eps == 0.5
    custom = mx.metric.create(lambda label, pred: 1.0)
    assert type(custom) is mx.metric.CustomMetric and custom.name == "custom(<lambda>)"
    cfg = mx.metric.CrossEntropy(eps=0.25, name="xent").get_config()
    assert cfg == {"eps": 0.25, "metric": "CrossEntropy", "name": "xent", "output_names": None, "label_names": None}
    assert type(mx.metric.create(cfg)) is mx.metric.CrossEntropy


def test_register_and_alias() -> None:
    @mx.metric.register
    @mx.metric.alias("always_one_rsmx")
    class AlwaysOne(mx.metric.EvalMetric):
        def __init__(self) -> None:
            super().__init__("one")

        def update(self, labels, preds) -> None:
            self.sum_metric += 1
            self.num_inst += 1

    m = mx.metric.create("Always_One_RSMX")
    assert isinstance(m, AlwaysOne)
    m.update([], [])
    assert m.get() == ("one", 1.0) and m.get_global() == ("one", 1.0)
    assert isinstance(mx.metric.create("alwaysone"), AlwaysOne)
    with pytest.raises(MXNetError):
        mx.metric.register(int)


def test_custom_metric_and_np(ctx) -> None:
    def err(label, pred):
        return np.abs(label - pred).sum(), label.size

    m = mx.metric.np(err)
    assert m.name == "err"
    m.update([mx.nd.array([1.0, 2.0], ctx=ctx)], [mx.nd.array([1.5, 2.0], ctx=ctx)])
    assert m.get() == ("err", 0.25)
    extra = mx.metric.CustomMetric(lambda label, pred: 2.0, name="two", allow_extra_outputs=True)
    extra.update([mx.nd.array([1.0], ctx=ctx)], [mx.nd.array([1.0], ctx=ctx), mx.nd.array([3.0], ctx=ctx)])
    assert extra.get() == ("two", 2.0) and extra.num_inst == 1
    with pytest.raises(MXNetError, match="serialized"):
        m.get_config()
    bad = mx.metric.CustomMetric(lambda label, pred: (1, 2, 3), name="bad")
    with pytest.raises(MXNetValueError, match="tuple of 3"):
        bad.update([mx.nd.array([1.0], ctx=ctx)], [mx.nd.array([1.0], ctx=ctx)])


def test_bad_input(ctx) -> None:
    with pytest.raises(MXNetValueError, match="unknown metric 'no_such_metric'"):
        mx.metric.create("no_such_metric")
    with pytest.raises(ValueError, match="does not match"):
        mx.metric.Accuracy().update([mx.nd.array([1], ctx=ctx)], [mx.nd.array([1], ctx=ctx), mx.nd.array([2], ctx=ctx)])
    with pytest.raises(MXNetValueError, match=r"Shape of labels 3 does not match shape of predictions 2"):
        mx.metric.Accuracy().update([mx.nd.array([1, 0, 1], ctx=ctx)], [mx.nd.array([[0.0, 1.0], [1.0, 0.0]], ctx=ctx)])
    with pytest.raises(MXNetValueError, match=r"\(3,\) does not match shape of predictions \(2,\)"):
        mx.metric.check_label_shapes(mx.nd.ones((3,), ctx=ctx), mx.nd.ones((2,), ctx=ctx), shape=True)
    with pytest.raises(MXNetValueError, match="top_k"):
        mx.metric.TopKAccuracy(top_k=1)
    with pytest.raises(MXNetValueError, match="binary"):
        mx.metric.F1().update([mx.nd.array([0, 1, 2], ctx=ctx)], [mx.nd.ones((3, 2), ctx=ctx)])
    with pytest.raises(MXNetValueError, match="average"):
        mx.metric.F1(average="weighted")
    with pytest.raises(MXNetValueError, match="mismatch"):
        mx.metric.Perplexity(None).update([mx.nd.array([0, 1, 2], ctx=ctx)], [mx.nd.ones((2, 4), ctx=ctx)])
    with pytest.raises(MXNetValueError, match="labels for"):
        mx.metric.CrossEntropy().update([mx.nd.array([0, 1, 2], ctx=ctx)], [mx.nd.ones((2, 4), ctx=ctx)])
    with pytest.raises(MXNetError):
        mx.metric.EvalMetric("base").update([], [])


def test_check_label_shapes_wraps(ctx) -> None:
    a, b = mx.nd.ones((2,), ctx=ctx), mx.nd.ones((2,), ctx=ctx)
    labels, preds = mx.metric.check_label_shapes(a, b, wrap=True, shape=True)
    assert labels == [a] and preds == [b]

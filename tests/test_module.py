"""mx.mod.Module and BucketingModule: binding, parameters, forward with reshape, prediction,
scoring, checkpoints, buckets sharing memory, training (fit) against MXNet 1.9.1
(fixtures/module/make_module.py) on one and two devices, progress reporting, bad input."""

from __future__ import annotations

import importlib.util
import logging
import pathlib
import sys
import types
import warnings
from collections import namedtuple

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError
from rsmx.model import _create_kvstore

HERE = pathlib.Path(__file__).parent / "fixtures"
TWO = [mx.cpu(0), mx.cpu(1)]
Batch = namedtuple("Batch", ["data"])


def _cases():
    spec = importlib.util.spec_from_file_location("module_cases", HERE / "module" / "cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cases = _cases()


@pytest.fixture(scope="module")
def ref():
    with np.load(HERE / "module" / "module.npz") as f:
        return dict(f)


def fc_module(ctx=TWO, batch=4, **kwargs):
    data = mx.sym.Variable("data")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=3, name="fc"),
                               name="softmax")
    mod = mx.mod.Module(net, context=ctx, **kwargs)
    mod.bind([("data", (batch, 4))], [("softmax_label", (batch,))])
    rng = np.random.RandomState(0)
    mod.init_params(arg_params={"fc_weight": mx.nd.array(rng.randn(3, 4)),
                                "fc_bias": mx.nd.array(rng.randn(3))})
    return mod


# ---------------------------------------------------------------------- documented example
def test_forward_reshapes_for_a_new_batch_shape():
    data = mx.sym.Variable("data")
    mod = mx.mod.Module(symbol=data * 2, label_names=None)
    mod.bind(data_shapes=[("data", (1, 10))])
    mod.init_params(initializer=None, arg_params={}, allow_missing=True)
    mod.forward(Batch([mx.nd.ones((1, 10))]))
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.full((1, 10), 2.0))
    mod.forward(Batch([mx.nd.ones((3, 5))]))
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.full((3, 5), 2.0))
    assert mod.data_shapes[0].shape == (3, 5)
    assert mod.output_shapes == [(mod.output_names[0], (3, 5))]
    assert mod.label_shapes is None


# ---------------------------------------------------------------------- names, binding
def test_input_names_are_checked():
    data = mx.sym.Variable("data")
    with pytest.raises(ValueError, match=r"data_names=\['x'\].*Did you mean one of:\n\tdata"):
        mx.mod.Module(data * 2, data_names=["x"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = mx.mod.Module(data * 2, label_names=["lab"])
        mod.bind([("data", (2, 3))])
    messages = [str(w.message) for w in caught]
    assert any("label_names=['lab']" in m for m in messages)
    assert any("don't match names specified by label_names" in m for m in messages)
    mod = mx.mod.Module(data * 2, label_names=None)
    with pytest.raises(MXNetError, match="don't match names specified by data_names"):
        mod.bind([("dat", (2, 3))])
    with pytest.raises(MXNetError, match="work_load_list"):
        mx.mod.Module(data * 2, context=TWO, work_load_list=[1])


@pytest.mark.filterwarnings("ignore:Data provided by label_shapes")
def test_bind_once_then_force_rebind_keeps_parameters(caplog):
    mod = fc_module()
    before = mod.get_params()[0]["fc_weight"].asnumpy()
    with caplog.at_level(logging.WARNING):
        mod.bind([("data", (4, 4))], [("softmax_label", (4,))])
    assert "Already bound, ignoring bind()" in caplog.text
    mod.bind([("data", (2, 4))], None, for_training=False, force_rebind=True)
    assert not mod.for_training and mod.data_shapes[0].shape == (2, 4)
    np.testing.assert_array_equal(mod._exec_group.execs[1].arg_dict["fc_weight"].asnumpy(),
                                  before)
    with pytest.raises(MXNetError, match="inputs_need_grad"):
        mod.bind([("data", (2, 4))], None, for_training=False, inputs_need_grad=True,
                 force_rebind=True)


def test_parameters_init_set_get():
    mod = fc_module()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod.init_params()
    assert "init_params call ignored" in str(caught[0].message)
    with pytest.raises(RuntimeError, match="fc_bias is not presented"):
        mod.init_params(arg_params={"fc_weight": mx.nd.ones((3, 4))}, force_init=True)
    mod.init_params(initializer=None, arg_params={"fc_weight": mx.nd.ones((3, 4))},
                    allow_missing=True, force_init=True)
    # allow_missing puts the values straight on the devices and marks the copy dirty
    mod.set_params({"fc_weight": mx.nd.ones((3, 4)) * 2}, {}, allow_missing=True)
    assert mod._params_dirty
    arg, aux = mod.get_params()
    assert not mod._params_dirty and aux == {}
    np.testing.assert_array_equal(arg["fc_weight"].asnumpy(), 2)
    assert arg["fc_weight"].context == mx.cpu()
    # names the module does not have are ignored
    mod.set_params({"fc_weight": mx.nd.ones((3, 4)), "fc_bias": mx.nd.ones(3),
                    "other": mx.nd.ones(2)}, {})
    np.testing.assert_array_equal(mod.predict(mx.nd.zeros((4, 4))).asnumpy(),
                                  np.full((4, 3), 1 / 3, np.float32))


def test_save_and_load_params(tmp_path):
    mod = fc_module()
    mod.save_params(str(tmp_path / "p.params"))
    saved = mx.nd.load(str(tmp_path / "p.params"))
    assert sorted(saved) == ["arg:fc_bias", "arg:fc_weight"]
    other = fc_module(ctx=[mx.cpu()])
    other.load_params(str(tmp_path / "p.params"))
    for name in ("fc_weight", "fc_bias"):
        np.testing.assert_array_equal(other.get_params()[0][name].asnumpy(),
                                      mod.get_params()[0][name].asnumpy())
    mx.nd.save(str(tmp_path / "bad.params"), {"xyz:fc_bias": mx.nd.ones(3)})
    with pytest.raises(ValueError, match="Invalid param file"):
        other.load_params(str(tmp_path / "bad.params"))


def test_save_checkpoint_and_module_load(tmp_path):
    mod = fc_module()
    prefix = str(tmp_path / "fc")
    mod.save_checkpoint(prefix, 7)
    sym, arg, _ = mx.model.load_checkpoint(prefix, 7)
    assert sym.list_arguments() == mod.symbol.list_arguments()
    loaded = mx.mod.Module.load(prefix, 7, context=TWO)
    assert loaded.params_initialized and not loaded.binded
    loaded.bind([("data", (4, 4))], [("softmax_label", (4,))], for_training=False)
    x = mx.nd.array(np.random.RandomState(4).randn(4, 4))
    np.testing.assert_allclose(loaded.predict(x).asnumpy(), mod.predict(x).asnumpy(),
                               rtol=1e-6)


# ---------------------------------------------------------------------- MXNet checkpoints
@pytest.mark.filterwarnings("ignore:Data provided by label_shapes")
def test_mxnet_checkpoint_predicts_the_same_on_two_devices():
    prefix = str(HERE / "checkpoints" / "convnet")
    io = mx.nd.load(str(HERE / "checkpoints" / "convnet-io.params"))
    mod = mx.mod.Module.load(prefix, 3, context=TWO)
    mod.bind([("data", io["data"].shape)], for_training=False)
    np.testing.assert_allclose(mod.predict(io["data"]).asnumpy(), io["output"].asnumpy(),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("n_ctx", [1, 2])
def test_mxnet_checkpoint_gradients_summed_over_devices(n_ctx):
    io = mx.nd.load(str(HERE / "checkpoints" / "mlp-io.params"))
    mod = mx.mod.Module.load(str(HERE / "checkpoints" / "mlp"), 3, context=TWO[:n_ctx])
    mod.bind([("data", io["data"].shape)], [("softmax_label", io["label"].shape)],
             inputs_need_grad=True)
    mod.forward_backward(mx.io.DataBatch([io["data"]], [io["label"]]))
    np.testing.assert_allclose(mod.get_input_grads()[0].asnumpy(),
                               io["grad:data"].asnumpy(), rtol=1e-4, atol=1e-6)
    group = mod._exec_group
    for name, grads in zip(group.param_names, group.grad_arrays, strict=True):
        total = sum(g.asnumpy() for g in grads)
        np.testing.assert_allclose(total, io[f"grad:{name}"].asnumpy(), rtol=1e-4, atol=1e-6)
    per_device = mod.get_input_grads(merge_multi_context=False)[0]
    assert len(per_device) == n_ctx


# ---------------------------------------------------------------------- prediction, scoring
def test_predict_merges_batches_and_drops_padding():
    mod = fc_module(batch=2)
    x = np.random.RandomState(5).randn(5, 4).astype(np.float32)
    it = mx.io.NDArrayIter(x, np.zeros(5), batch_size=2)
    full = mod.predict(it)
    assert full.shape == (5, 3)
    parts = mod.predict(it, merge_batches=False)
    assert [len(p) for p in parts] == [1, 1, 1] and parts[-1][0].shape == (1, 3)
    np.testing.assert_allclose(np.concatenate([p[0].asnumpy() for p in parts]), full.asnumpy())
    assert isinstance(mod.predict(it, always_output_list=True), list)
    assert mod.predict(it, num_batch=2).shape == (4, 3)
    np.testing.assert_allclose(mod.predict(x[:2]).asnumpy(), full.asnumpy()[:2], rtol=1e-6)
    seen = [(i, out[0].shape, batch.pad) for out, i, batch in mod.iter_predict(it)]
    assert seen == [(0, (2, 3), 0), (1, (2, 3), 0), (2, (1, 3), 1)]
    with pytest.raises(ValueError, match="eval_data must be of type NDArray or DataIter"):
        mod.predict([1, 2])


def test_predict_with_several_outputs():
    data = mx.sym.Variable("data")
    net = mx.sym.Group([data * 2, mx.sym.sum(data, axis=1)])
    mod = mx.mod.Module(net, label_names=None, context=TWO)
    mod.bind([("data", (2, 3))], for_training=False)
    mod.init_params(initializer=None, arg_params={}, allow_missing=True)
    it = mx.io.NDArrayIter(np.arange(9, dtype=np.float32).reshape(3, 3), batch_size=2)
    doubled, sums = mod.predict(it)
    np.testing.assert_array_equal(doubled.asnumpy(), np.arange(9).reshape(3, 3) * 2)
    np.testing.assert_array_equal(sums.asnumpy(), [3, 12, 21])


def test_score_and_its_callbacks():
    mod = fc_module(batch=2)
    x = np.random.RandomState(6).randn(6, 4).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2], np.float32)
    it = mx.io.NDArrayIter(x, y, batch_size=2)
    seen, ends = [], []
    res = mod.score(it, ["acc", "ce"], batch_end_callback=lambda p: seen.append(p.nbatch),
                    score_end_callback=lambda p: ends.append((p.epoch, p.nbatch)), epoch=4)
    probs = mod.predict(it).asnumpy()
    acc = float((probs.argmax(axis=1) == y).mean())
    ce = float(-np.log(probs[np.arange(6), y.astype(int)]).mean())
    assert res[0][0] == "accuracy" and res[0][1] == pytest.approx(acc)
    assert res[1][0] == "cross-entropy" and res[1][1] == pytest.approx(ce, rel=1e-5)
    assert seen == [0, 1, 2] and ends == [(4, 3)]
    assert mod.score(it, "acc", num_batch=1)[0][1] == pytest.approx(
        float((probs[:2].argmax(axis=1) == y[:2]).mean()))


def test_update_metric_and_per_device_batches():
    mod = fc_module(batch=4)
    x = np.random.RandomState(7).randn(4, 4).astype(np.float32)
    y = mx.nd.array([0, 1, 2, 1])
    mod.forward(mx.io.DataBatch([mx.nd.array(x)], [y]), is_train=False)
    whole = mod.get_outputs()[0].asnumpy()
    acc = mx.metric.Accuracy()
    mod.update_metric(acc, [y])
    assert acc.get()[1] == pytest.approx(float((whole.argmax(1) == y.asnumpy()).mean()))
    parts = [mx.io.DataBatch([mx.nd.array(x[:2])], [y[0:2]]),
             mx.io.DataBatch([mx.nd.array(x[2:])], [y[2:4]])]
    mod.forward(parts, is_train=False)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), whole, rtol=1e-6)
    pre = mx.metric.Accuracy()
    mod.update_metric(pre, [b.label for b in parts], pre_sliced=True)
    assert pre.get() == acc.get()


def test_states_and_monitor():
    data = mx.sym.Variable("data")
    state = mx.sym.Variable("state")
    net = mx.sym.FullyConnected(data, num_hidden=2, name="fc") + state
    mod = mx.mod.Module(net, label_names=None, state_names=["state"], context=TWO)
    mod.bind([("data", (4, 3))], for_training=False)
    mod.init_params(initializer=None, arg_params={"fc_weight": mx.nd.zeros((2, 3)),
                                                  "fc_bias": mx.nd.zeros(2)})
    mod.set_states(value=2)
    mon = mx.mon.Monitor(1, pattern="fc_output")
    mod.install_monitor(mon)
    mon.tic()
    mod.forward(Batch([mx.nd.ones((4, 3))]))
    assert len(mon.toc()) == 2
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), 2)
    assert len(mod.get_states(merge_multi_context=False)[0]) == 2


def test_progress_knows_the_number_of_batches():
    from rsmx.module._progress import _num_batches

    x = np.zeros((10, 2), np.float32)
    counts = {h: _num_batches(mx.io.NDArrayIter(x, batch_size=4, last_batch_handle=h))
              for h in ("pad", "discard", "roll_over")}
    assert counts == {"pad": 3, "discard": 2, "roll_over": None}
    for handle in ("pad", "discard"):
        it = mx.io.NDArrayIter(x, batch_size=4, last_batch_handle=handle)
        assert sum(1 for _ in it) == counts[handle]


# ---------------------------------------------------------------------- kvstore choice
def test_create_kvstore_as_mxnet(monkeypatch):
    params = {"w": mx.nd.zeros((2, 2))}
    assert _create_kvstore("local", 1, params) == (None, False)
    assert _create_kvstore(None, 2, params) == (None, False)
    kv, on_kv = _create_kvstore("local", 2, params)
    assert kv.type == "local" and on_kv
    kv, on_kv = _create_kvstore("device", 2, params)
    assert kv.type == "device" and on_kv
    store = mx.kv.create("local")
    assert _create_kvstore(store, 1, params) == (store, True)
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    assert _create_kvstore("local", 2, params)[1] is False
    with pytest.raises(TypeError):
        _create_kvstore(3, 2, params)


# ---------------------------------------------------------------------- buckets
def _bucket_batch(key, n=4, seed=0):
    rng = np.random.RandomState(seed)
    return mx.io.DataBatch([mx.nd.array(rng.randn(n, key, 4))],
                           [mx.nd.array(rng.randint(0, 3, n))], bucket_key=key,
                           provide_data=[mx.io.DataDesc("data", (n, key, 4))],
                           provide_label=[mx.io.DataDesc("softmax_label", (n,))])


def _bucketing_module(ctx=TWO):
    mod = mx.mod.BucketingModule(cases.bucket_sym_gen(mx), default_bucket_key=5, context=ctx)
    assert mod.data_names == ("data",) and mod.output_names == ["softmax_output"]
    mod.bind([("data", (4, 5, 4))], [("softmax_label", (4,))])
    mod.init_params(initializer=None, arg_params={"fc_weight": mx.nd.ones((3, 4)) * 0.1,
                                                  "fc_bias": mx.nd.zeros(3)})
    return mod


def test_buckets_share_parameters_and_memory(caplog):
    mod = _bucketing_module()
    default = mod._curr_module
    mod.forward(_bucket_batch(3), is_train=True)
    small = mod._curr_module
    assert small is not default and sorted(mod._buckets) == [3, 5]
    assert mod.symbol is small.symbol
    # one set of parameters and gradients for all buckets, the input memory reused
    small._exec_group.param_arrays[0][1][:] = 0.5
    np.testing.assert_array_equal(default._exec_group.param_arrays[0][1].asnumpy(), 0.5)
    mod.backward()
    grad = small._exec_group.grad_arrays[0][0].asnumpy()
    np.testing.assert_array_equal(default._exec_group.grad_arrays[0][0].asnumpy(), grad)
    small._exec_group.execs[0].arg_dict["data"][:] = 9
    np.testing.assert_array_equal(
        default._exec_group.execs[0].arg_dict["data"].asnumpy().ravel()[:2 * 3 * 4], 9)
    with caplog.at_level(logging.WARNING):
        mod.forward(_bucket_batch(8), is_train=False)
    assert "larger than already allocated" in caplog.text
    assert mod.get_outputs()[0].shape == (4, 3)
    # prepare binds the next bucket but stays on the current one
    mod.prepare(_bucket_batch(2))
    assert sorted(mod._buckets) == [2, 3, 5, 8] and mod._curr_bucket_key == 8


def test_bucketing_outputs_match_a_plain_module():
    mod = _bucketing_module()
    batch = _bucket_batch(3, seed=2)
    mod.forward(batch, is_train=False)
    sym, _, _ = cases.bucket_sym_gen(mx)(3)
    plain = mx.mod.Module(sym, context=[mx.cpu()])
    plain.bind(batch.provide_data, batch.provide_label, for_training=False)
    plain.init_params(initializer=None, arg_params=mod.get_params()[0])
    plain.forward(batch)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(),
                               plain.get_outputs()[0].asnumpy(), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:Data provided by label_shapes")
def test_bucketing_checkpoint_monitor_and_rebind(tmp_path):
    mod = _bucketing_module()
    mon = mx.mon.Monitor(1, pattern="fc_output")
    mod.install_monitor(mon)
    mon.tic()
    mod.forward(_bucket_batch(3), is_train=False)  # a new bucket gets the monitor too
    assert len(mon.toc()) == 2
    prefix = str(tmp_path / "bucket")
    mod.save_checkpoint(prefix, 2)
    loaded = mx.mod.BucketingModule.load(prefix, 2, sym_gen=cases.bucket_sym_gen(mx),
                                         default_bucket_key=5, context=TWO)
    assert sorted(loaded._buckets) == [3, 5]
    loaded.bind([("data", (4, 5, 4))], [("softmax_label", (4,))], for_training=False)
    np.testing.assert_allclose(loaded.get_params()[0]["fc_weight"].asnumpy(), 0.1)
    mod.bind([("data", (4, 5, 4))], None, for_training=False, force_rebind=True)
    assert list(mod._buckets) == [5] and not mod.for_training
    np.testing.assert_allclose(mod.get_params()[0]["fc_weight"].asnumpy(), 0.1)
    with pytest.raises(MXNetError, match="shared_module"):
        mod.bind([("data", (4, 5, 4))], None, force_rebind=True, shared_module=mod)
    with pytest.raises(MXNetError, match="default_bucket_key"):
        mx.mod.BucketingModule(cases.bucket_sym_gen(mx))


# ---------------------------------------------------------------------- training
@pytest.mark.parametrize("case", list(cases.FIT_CASES))
def test_fit_matches_mxnet(ref, case):
    got = cases.fit_mlp(mx, *cases.FIT_CASES[case])
    for key, value in got.items():
        np.testing.assert_allclose(value, ref[f"{case}/{key}"], rtol=1e-4, atol=1e-5,
                                   err_msg=key)


def test_fit_with_batchnorm_averages_auxiliary_states(ref):
    got = cases.fit_bn(mx, 2)
    for key, value in got.items():
        np.testing.assert_allclose(value, ref[f"fit_bn_2ctx/{key}"], rtol=1e-4, atol=1e-5,
                                   err_msg=key)


@pytest.mark.parametrize("n_ctx", [1, 2])
def test_bucketing_training_matches_mxnet(ref, n_ctx):
    got = cases.bucketing(mx, n_ctx)
    for key, value in got.items():
        np.testing.assert_allclose(value, ref[f"bucketing_{n_ctx}ctx/{key}"], rtol=1e-4,
                                   atol=1e-5, err_msg=key)


def test_init_optimizer_choices(monkeypatch):
    mod = fc_module(ctx=[mx.cpu()])
    mod.init_optimizer(kvstore="local", optimizer="sgd")
    assert mod._kvstore is None and not mod._update_on_kvstore and mod._updater is not None
    assert mod._optimizer.rescale_grad == pytest.approx(1 / 4)
    mod = fc_module()
    mod.init_optimizer(kvstore="local", optimizer_params={"rescale_grad": 0.5})
    assert mod._kvstore.type == "local" and mod._update_on_kvstore and mod._updater is None
    assert mod._optimizer.rescale_grad == 0.5
    assert mod._optimizer.idx2name == {0: "fc_weight", 1: "fc_bias"}
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    mod = fc_module()
    store = mx.kv.create("device")
    opt = mx.optimizer.create("sgd", learning_rate=0.1)
    with pytest.warns(UserWarning, match="rescale_grad"):
        mod.init_optimizer(kvstore=store, optimizer=opt)
    assert mod._kvstore is store and not mod._update_on_kvstore
    assert opt.idx2name == {0: "fc_weight", 2: "fc_bias", 1: "fc_weight", 3: "fc_bias"}


class _PerKeyStore(mx.kvstore.KVStore):
    """A store of another type, which Module updates one parameter at a time."""


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_update_on_kvstore_in_one_call_matches_one_per_key(monkeypatch, optimizer):
    # rsmx's own store gets every parameter in one pushpull: the same weights as a store
    # updated key by key, with weight decay and a learning-rate schedule
    rng = np.random.RandomState(3)
    batches = [mx.io.DataBatch([mx.nd.array(rng.randn(4, 4))],
                               [mx.nd.array(rng.randint(0, 3, 4))]) for _ in range(4)]
    calls = []
    pushpull = mx.kvstore.KVStore.pushpull

    def counted(self, *args, **kwargs):
        calls.append(type(self))
        pushpull(self, *args, **kwargs)

    monkeypatch.setattr(mx.kvstore.KVStore, "pushpull", counted)
    results = []
    for store in (mx.kv.create("local"), _PerKeyStore()):
        mod = fc_module()
        params = {"learning_rate": 0.1, "wd": 0.01,
                  "lr_scheduler": mx.lr_scheduler.FactorScheduler(step=2, factor=0.5)}
        if optimizer == "sgd":
            params["momentum"] = 0.9
        mod.init_optimizer(kvstore=store, optimizer=optimizer, optimizer_params=params)
        assert mod._update_on_kvstore
        for batch in batches:
            mod.forward_backward(batch)
            mod.update()
        results.append({k: v.asnumpy() for k, v in mod.get_params()[0].items()})
    assert calls.count(mx.kvstore.KVStore) == len(batches)  # one call per update
    assert calls.count(_PerKeyStore) == 2 * len(batches)  # one per parameter
    for name in ("fc_weight", "fc_bias"):
        np.testing.assert_array_equal(results[0][name], results[1][name], err_msg=name)


@pytest.mark.parametrize("kvstore", [None, "local"])
def test_optimizer_states_round_trip(tmp_path, kvstore):
    x = np.random.RandomState(8).randn(4, 4).astype(np.float32)
    batch = mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array([0, 1, 2, 1])])
    mod = fc_module()
    mod.init_optimizer(kvstore=kvstore, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    mod.forward_backward(batch)
    mod.update()
    prefix = str(tmp_path / "m")
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    # without a kvstore each device took its own step: continue from their average, as
    # the checkpoint does (the momentum stays per device in both)
    mod.set_params(*mod.get_params())
    again = mx.mod.Module.load(prefix, 1, load_optimizer_states=True, context=TWO)
    again.bind([("data", (4, 4))], [("softmax_label", (4,))])
    again.init_optimizer(kvstore=kvstore, optimizer="sgd",
                         optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    for m in (mod, again):
        m.forward_backward(batch)
        m.update()
    for name in ("fc_weight", "fc_bias"):
        np.testing.assert_allclose(again.get_params()[0][name].asnumpy(),
                                   mod.get_params()[0][name].asnumpy(), rtol=1e-6)


def test_fit_callbacks_validation_and_resume(caplog):
    x, y = cases.train_set(12)
    train = mx.io.NDArrayIter(x, y, batch_size=4)
    val = mx.io.NDArrayIter(x[:8], y[:8], batch_size=4)
    mod = mx.mod.Module(cases.mlp(mx), context=TWO)
    epochs, batches, val_batches, val_ends = [], [], [], []
    with caplog.at_level(logging.INFO):
        mod.fit(train, eval_data=val, num_epoch=3, begin_epoch=1, eval_metric="acc",
                validation_metric="ce", arg_params=cases.nd_dict(mx, cases.mlp_params()),
                epoch_end_callback=lambda e, s, a, b: epochs.append((e, sorted(a))),
                batch_end_callback=[lambda p: batches.append((p.epoch, p.nbatch))],
                eval_batch_end_callback=lambda p: val_batches.append(p.nbatch),
                eval_end_callback=lambda p: val_ends.append(p.eval_metric.get()[0]))
    assert epochs == [(1, ["fc1_bias", "fc1_weight", "fc2_bias", "fc2_weight"]),
                      (2, ["fc1_bias", "fc1_weight", "fc2_bias", "fc2_weight"])]
    assert batches == [(e, b) for e in (1, 2) for b in range(3)]
    assert val_batches == [0, 1, 0, 1] and val_ends == ["cross-entropy"] * 2
    assert "Epoch[2] Train-accuracy=" in caplog.text
    assert "Epoch[2] Validation-cross-entropy=" in caplog.text
    assert "Epoch[1] Time cost=" in caplog.text
    with pytest.raises(MXNetError, match="number of epochs"):
        mod.fit(train)


def test_fit_progress_bar_only_on_a_terminal(monkeypatch, caplog):

    bars = []

    class FakeBar:
        def __init__(self, total=None, desc=None, unit=None, leave=None):
            self.total, self.desc, self.n, self.postfix, self.closed = total, desc, 0, {}, False
            bars.append(self)

        def set_postfix(self, postfix, refresh=True):
            self.postfix = dict(postfix)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    x, y = cases.train_set(12)
    train = mx.io.NDArrayIter(x, y, batch_size=4)
    params = cases.nd_dict(mx, cases.mlp_params())
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    mx.mod.Module(cases.mlp(mx)).fit(train, num_epoch=2, arg_params=params)
    assert [(b.desc, b.total, b.n, b.closed) for b in bars] == [("Epoch 0", 3, 3, True),
                                                                 ("Epoch 1", 3, 3, True)]
    assert set(bars[0].postfix) == {"accuracy", "samples/s"}
    # Without tqdm, or with stderr not a terminal: no bar and no log lines of its own.
    for tqdm, tty in ((None, True), (types.SimpleNamespace(tqdm=FakeBar), False)):
        monkeypatch.setitem(sys.modules, "tqdm", tqdm)
        monkeypatch.setattr(sys.stderr, "isatty", lambda tty=tty: tty, raising=False)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            mx.mod.Module(cases.mlp(mx)).fit(train, num_epoch=1, arg_params=params)
        assert len(bars) == 2
        assert not [r for r in caplog.records if "Speed" in r.getMessage() or "Batch [" in r.getMessage()]
        assert "Epoch[0] Time cost=" in caplog.text


def test_fit_with_speedometer_and_monitor(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    x, y = cases.train_set(12)
    train = mx.io.NDArrayIter(x, y, batch_size=2)
    mon = mx.mon.Monitor(2, pattern="fc2_output")
    with caplog.at_level(logging.INFO):
        mx.mod.Module(cases.mlp(mx), context=TWO).fit(
            train, num_epoch=1, arg_params=cases.nd_dict(mx, cases.mlp_params()),
            batch_end_callback=mx.callback.Speedometer(2, frequent=2), monitor=mon)
    messages = [r.getMessage() for r in caplog.records]
    speed = [m for m in messages if "samples/sec" in m and "Batch [" in m]
    assert len(speed) == 2 and speed[1].startswith("Epoch[0] Batch [2-4]\tSpeed: ")
    stats = [m for m in messages if m.startswith("Batch:") and "fc2_output" in m]
    assert len(stats) == 6  # every second batch, one line per device


def test_input_grads_follow_data_names_order():
    a, b, c = (mx.sym.Variable(n, __layout__="NC") for n in "abc")
    mod = mx.mod.Module(a + 2 * b + 3 * c, data_names=["b", "c", "a"], label_names=None,
                        context=TWO)
    mod.bind(data_shapes=[("b", (4, 3)), ("c", (4, 3)), ("a", (4, 3))], inputs_need_grad=True)
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones((4, 3))] * 3))
    mod.backward(out_grads=[mx.nd.ones((4, 3))])
    assert [g.asnumpy()[0, 0] for g in mod.get_input_grads()] == [2, 3, 1]


def test_store_updater_states_as_mxnet_exposes_them():
    mod = fc_module()
    mod.init_optimizer(kvstore="local", optimizer="sgd",
                       optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    x = np.random.RandomState(2).randn(4, 4).astype(np.float32)
    mod.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array([0, 1, 2, 1])]))
    mod.update()
    states = mod._kvstore._updater.states
    assert sorted(states) == ["fc_bias", "fc_weight"]
    assert states["fc_weight"].shape == mod.get_params()[0]["fc_weight"].shape
    assert float(abs(states["fc_weight"]).sum().asscalar()) > 0
    store = mx.kv.create("local")
    assert store._updater is None
    store._set_updater(lambda key, grad, weight: None)
    assert callable(store._updater)

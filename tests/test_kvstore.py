"""KVStore: the specification's examples with their printed numbers, updaters, device
stores, string keys and bad input."""

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError

SHAPE = (2, 3)
DEVICES = [mx.cpu(i) for i in range(4)]


def test_tutorial_sequence():
    kv = mx.kv.create("local")
    kv.init(3, mx.nd.ones(SHAPE) * 2)
    a = mx.nd.zeros(SHAPE)
    kv.pull(3, out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.full(SHAPE, 2.0))

    kv.push(3, mx.nd.ones(SHAPE) * 8)
    kv.pull(3, out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.full(SHAPE, 8.0))

    b = [mx.nd.ones(SHAPE, d) for d in DEVICES]
    kv.push(3, b)
    kv.pull(3, out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.full(SHAPE, 4.0))

    seen = []

    def update(key, value, stored):
        seen.append(key)
        stored += value * 2

    kv._set_updater(update)
    kv.pull(3, out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.full(SHAPE, 4.0))
    kv.push(3, mx.nd.ones(SHAPE))
    assert seen == [3]
    kv.pull(3, out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.full(SHAPE, 6.0))

    b = [mx.nd.ones(SHAPE, d) for d in DEVICES]
    kv.pull(3, out=b)
    np.testing.assert_array_equal(b[1].asnumpy(), np.full(SHAPE, 6.0))
    assert b[1].context == DEVICES[1]

    keys = [5, 7, 9]
    kv.init(keys, [mx.nd.ones(SHAPE)] * len(keys))
    kv.push(keys, [mx.nd.ones(SHAPE)] * len(keys))
    assert seen[1:] == [5, 7, 9]
    b = [mx.nd.zeros(SHAPE)] * len(keys)
    kv.pull(keys, out=b)
    np.testing.assert_array_equal(b[1].asnumpy(), np.full(SHAPE, 3.0))

    b = [[mx.nd.ones(SHAPE, d) for d in DEVICES]] * len(keys)
    kv.push(keys, b)
    assert seen[4:] == [5, 7, 9]
    kv.pull(keys, out=b)
    np.testing.assert_array_equal(b[1][1].asnumpy(), np.full(SHAPE, 11.0))


def test_reference_examples_with_the_default_update():
    kv = mx.kv.create("local")
    keys = [5, 7, 9]
    kv.init(keys, [mx.nd.ones(SHAPE)] * len(keys))
    kv.push(keys, [mx.nd.ones(SHAPE)] * len(keys))
    b = [mx.nd.zeros(SHAPE)] * len(keys)
    kv.pull(keys, out=b)
    np.testing.assert_array_equal(b[1].asnumpy(), np.full(SHAPE, 1.0))
    b = [[mx.nd.ones(SHAPE, d) for d in DEVICES]] * len(keys)
    kv.push(keys, b)
    kv.pull(keys, out=b)
    np.testing.assert_array_equal(b[1][1].asnumpy(), np.full(SHAPE, 4.0))


@pytest.mark.parametrize("kind", ["local", "device", "local_allreduce_cpu", "local_allreduce_device", "local_update_cpu"])
def test_every_type_sums_and_broadcasts(kind):
    kv = mx.kv.create(kind)
    assert kv.type == kind and kv.rank == 0 and kv.num_workers == 1
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((4, 5)).astype(np.float32) for _ in DEVICES]
    kv.init("w", mx.nd.zeros((4, 5)))
    kv.push("w", [mx.nd.array(x, ctx=d) for x, d in zip(data, DEVICES, strict=True)])
    outs = [mx.nd.zeros((4, 5), ctx=d) for d in DEVICES]
    kv.pull("w", out=outs)
    for o in outs:
        np.testing.assert_allclose(o.asnumpy(), sum(data), rtol=1e-6, atol=1e-6)


def test_push_from_more_devices_than_the_first_push():
    kv = mx.kv.create("device")
    kv.init(0, mx.nd.zeros(SHAPE))
    for n in (1, 2, 4, 3):
        kv.push(0, [mx.nd.ones(SHAPE, d) for d in DEVICES[:n]])
        out = mx.nd.zeros(SHAPE)
        kv.pull(0, out=out)
        np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, float(n)))


def test_string_keys_reach_the_updater_in_init_order():
    kv = mx.kv.create("local")
    names = ["fc1_weight", "fc1_bias", "fc2_weight"]
    kv.init(names, [mx.nd.ones(SHAPE)] * 3)
    seen = []
    kv._set_updater(lambda k, v, s: seen.append(k))
    kv.push(list(reversed(names)), [mx.nd.ones(SHAPE)] * 3)
    assert seen == names


def test_duplicate_keys_in_one_push_are_summed():
    kv = mx.kv.create("local")
    kv.init(1, mx.nd.zeros(SHAPE))
    kv.push([1, 1], [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE) * 2])
    out = mx.nd.zeros(SHAPE)
    kv.pull(1, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 3.0))


def test_pushpull_and_broadcast():
    kv = mx.kv.create("local")
    kv.init(4, mx.nd.zeros(SHAPE))
    vals = [mx.nd.ones(SHAPE, d) * (i + 1) for i, d in enumerate(DEVICES[:2])]
    kv.pushpull(4, vals)
    for v in vals:
        np.testing.assert_array_equal(v.asnumpy(), np.full(SHAPE, 3.0))
    out = [mx.nd.zeros(SHAPE, d) for d in DEVICES[:2]]
    kv.broadcast(5, mx.nd.ones(SHAPE) * 2, out=out)
    for o in out:
        np.testing.assert_array_equal(o.asnumpy(), np.full(SHAPE, 2.0))


@pytest.mark.parametrize("kind", ["local", "device"])
def test_pushpull_into_other_outputs_with_each_updater(kind):
    kv = mx.kv.create(kind)
    kv.init(["a", "b"], [mx.nd.zeros(SHAPE)] * 2)
    vals = [[mx.nd.ones(SHAPE, d) * (i + 1) for i, d in enumerate(DEVICES[:3])] for _ in range(2)]
    outs = [[mx.nd.zeros(SHAPE, d) for d in DEVICES[1:3]] for _ in range(2)]
    kv.pushpull(["a", "b"], vals, out=outs, priority=[0, -1])
    for o in outs[0] + outs[1]:
        np.testing.assert_array_equal(o.asnumpy(), np.full(SHAPE, 6.0))
    np.testing.assert_array_equal(vals[0][2].asnumpy(), np.full(SHAPE, 3.0))

    def update(key, value, stored):
        stored += value * 2

    kv._set_updater(update)
    kv.pushpull("a", vals[0], out=outs[0])
    np.testing.assert_array_equal(outs[0][1].asnumpy(), np.full(SHAPE, 18.0))
    kv.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.5, rescale_grad=1.0))
    kv.pushpull("b", vals[1])
    for v in vals[1]:
        np.testing.assert_array_equal(v.asnumpy(), np.full(SHAPE, 3.0))


def test_bad_pushpull_and_broadcast_change_nothing():
    kv = mx.kv.create("local")
    kv.init(1, mx.nd.ones(SHAPE) * 7)
    with pytest.raises(MXNetError, match=r"\(1, 3\).*\(2, 3\)"):
        kv.pushpull(1, mx.nd.ones(SHAPE), out=mx.nd.zeros((1, 3)))
    with pytest.raises(MXNetError, match=r"\(3, 3\).*\(2, 3\)"):
        kv.pushpull(1, mx.nd.ones((3, 3)), out=mx.nd.zeros(SHAPE))
    with pytest.raises(MXNetError, match=r"\(3, 3\).*\(2, 3\)"):
        kv.broadcast(2, mx.nd.ones(SHAPE), out=mx.nd.zeros((3, 3)))
    with pytest.raises(MXNetError, match="duplicate init"):
        kv.broadcast(1, mx.nd.ones(SHAPE), out=mx.nd.zeros(SHAPE))
    out = mx.nd.zeros(SHAPE)
    kv.pull(1, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 7.0))
    kv.broadcast(2, mx.nd.ones(SHAPE) * 4, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 4.0))


def test_single_machine_cluster_and_distributed_types():
    kv = mx.kv.create("device")
    assert (kv.rank, kv.num_workers) == (0, 1)
    kv._barrier()
    with pytest.raises(MXNetError, match="2-bit gradient compression runs on distributed stores"):
        kv.set_gradient_compression({"type": "2bit"})
    with pytest.raises(MXNetError, match="unknown type '1bit'"):
        kv.set_gradient_compression({"type": "1bit"})


def test_a_distributed_type_outside_a_launched_job_names_what_is_missing(monkeypatch):
    for name in ("DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("dist_sync", "dist_async", "dist_device_sync"):
        with pytest.raises(MXNetError, match="DMLC_ROLE is not set"):
            mx.kv.create(name)


def test_priorities_and_many_keys_stay_ordered():
    kv = mx.kv.create("local")
    keys = list(range(20))
    kv.init(keys, [mx.nd.zeros((1000,))] * len(keys))
    for step in range(5):
        kv.push(keys, [mx.nd.ones((1000,)) * step] * len(keys), priority=-step)
    outs = [mx.nd.zeros((1000,)) for _ in keys]
    kv.pull(keys, out=outs, priority=-1)
    for o in outs:
        assert float(o.asnumpy().min()) == 4.0 and float(o.asnumpy().max()) == 4.0


def test_bad_input_leaves_values_unchanged():
    kv = mx.kv.create("local")
    kv.init(1, mx.nd.ones(SHAPE) * 7)
    with pytest.raises(MXNetError, match="key 2 has not been initialized"):
        kv.push([1, 2], [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE)])
    with pytest.raises(MXNetError, match="key 2 has not been initialized"):
        kv.pull(2, out=mx.nd.zeros(SHAPE))
    with pytest.raises(MXNetError, match=r"\(3, 3\).*\(2, 3\)"):
        kv.push(1, mx.nd.ones((3, 3)))
    with pytest.raises(MXNetError, match=r"\(1, 3\).*\(2, 3\)"):
        kv.pull(1, out=mx.nd.zeros((1, 3)))
    with pytest.raises(MXNetError, match="dtype"):
        kv.push(1, mx.nd.ones(SHAPE, dtype="float64"))
    with pytest.raises(MXNetError, match="2 key"):
        kv.push([1, 1], [mx.nd.ones(SHAPE)])
    with pytest.raises(MXNetError, match="inconsistent types of keys"):
        kv.push([1, "a"], [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE)])
    with pytest.raises(MXNetError, match="duplicate init"):
        kv.init(1, mx.nd.zeros(SHAPE))
    with pytest.raises(MXNetError, match="unknown KVStore type 'nonsense'"):
        mx.kv.create("nonsense")
    with pytest.raises(TypeError):
        mx.kv.create(3)
    out = mx.nd.zeros(SHAPE)
    kv.pull(1, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 7.0))
    kv.push(1, mx.nd.ones(SHAPE))
    kv.pull(1, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 1.0))


def test_registered_python_store():
    kv = mx.kv.create("teststore")
    assert kv.type == "teststore"
    vals = [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE) * 2]
    out = mx.nd.zeros(SHAPE)
    kv.pushpull(0, vals, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 3.0))


OPTIMIZERS = [
    ("sgd", {"momentum": 0.9, "wd": 1e-3}),
    ("sgd", {}),
    ("nag", {"momentum": 0.8}),
    ("adam", {"wd": 1e-3}),
    ("adagrad", {}),
    ("rmsprop", {"centered": True}),
    ("adadelta", {}),
    ("signum", {"momentum": 0.9}),
    ("ftrl", {}),
]


def _python_reference(name, params, steps, grads, init):
    opt = mx.optimizer.create(name, **params)
    updater = mx.optimizer.get_updater(opt)
    w = {k: mx.nd.array(v) for k, v in init.items()}
    for step in range(steps):
        for k in init:
            updater(k, mx.nd.array(sum(grads[step][k])), w[k])
    return {k: v.asnumpy() for k, v in w.items()}


@pytest.mark.parametrize("name,extra", OPTIMIZERS)
def test_built_in_optimizers_run_in_the_core_as_python_would(name, extra):
    rng = np.random.default_rng(3)
    init = {k: rng.standard_normal((3, 4)).astype(np.float32) for k in (0, 1)}
    steps = 4
    grads = [{k: [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2)] for k in init}
             for _ in range(steps)]
    params = dict(extra, learning_rate=0.05, rescale_grad=0.5,
                  lr_scheduler=mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=0.05))
    params.pop("learning_rate")
    kv = mx.kv.create("local")
    keys = list(init)
    kv.init(keys, [mx.nd.array(init[k]) for k in keys])
    opt = mx.optimizer.create(name, **params)
    opt.set_lr_mult({1: 0.5})
    kv.set_optimizer(opt)
    assert type(kv._state_keeper).__name__ == "FusedUpdater"
    for step in range(steps):
        kv.push(keys, [[mx.nd.array(g, ctx=DEVICES[i]) for i, g in enumerate(grads[step][k])]
                       for k in keys])
    outs = [mx.nd.zeros((3, 4)) for _ in keys]
    kv.pull(keys, out=outs)
    ref_params = dict(params, lr_scheduler=mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=0.05))
    ref_opt = mx.optimizer.create(name, **ref_params)
    ref_opt.set_lr_mult({1: 0.5})
    updater = mx.optimizer.get_updater(ref_opt)
    w = {k: mx.nd.array(v) for k, v in init.items()}
    for step in range(steps):
        for k in keys:
            updater(k, mx.nd.array(sum(grads[step][k])), w[k])
    for k, o in zip(keys, outs, strict=True):
        np.testing.assert_allclose(o.asnumpy(), w[k].asnumpy(), rtol=1e-5, atol=1e-6)


class _Halving(mx.optimizer.Optimizer):
    def create_state(self, index, weight):
        return None

    def update(self, index, weight, grad, state):
        weight[:] = weight * 0.5 + grad


def test_a_custom_optimizer_runs_as_a_python_updater():
    kv = mx.kv.create("local")
    kv.init(0, mx.nd.ones(SHAPE) * 4)
    kv.set_optimizer(_Halving())
    assert type(kv._state_keeper).__name__ == "Updater"
    kv.push(0, [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE)])
    out = mx.nd.zeros(SHAPE)
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 4.0))


@pytest.mark.parametrize("dump", [False, True])
def test_optimizer_states_round_trip_and_load_into_python_updaters(tmp_path, dump):
    def make_opt():
        return mx.optimizer.create("adam", learning_rate=0.01,
                                   lr_scheduler=mx.lr_scheduler.FactorScheduler(step=1, factor=0.9, base_lr=0.01))

    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((5,)).astype(np.float32)
    grads = [rng.standard_normal((5,)).astype(np.float32) for _ in range(6)]
    kv = mx.kv.create("local")
    kv.init("w", mx.nd.array(w0))
    kv.set_optimizer(make_opt())
    for g in grads[:3]:
        kv.push("w", mx.nd.array(g))
    fname = str(tmp_path / "kv.states")
    kv.save_optimizer_states(fname, dump_optimizer=dump)
    mid = mx.nd.zeros((5,))
    kv.pull("w", out=mid)

    resumed = mx.kv.create("local")
    resumed.init("w", mid.copy())
    resumed.set_optimizer(make_opt())
    resumed.load_optimizer_states(fname)
    python = mx.optimizer.get_updater(make_opt())
    with open(fname, "rb") as f:
        python.set_states(f.read())
    w_py = mid.copy()
    for g in grads[3:]:
        kv.push("w", mx.nd.array(g))
        resumed.push("w", mx.nd.array(g))
        python("w", mx.nd.array(g), w_py)
    a, b = mx.nd.zeros((5,)), mx.nd.zeros((5,))
    kv.pull("w", out=a)
    resumed.pull("w", out=b)
    # States alone restart the schedule and the update counts, as MXNet's do; a dumped
    # optimizer carries them, so the resumed store continues exactly.
    np.testing.assert_allclose(b.asnumpy(), w_py.asnumpy(), rtol=1e-5, atol=1e-6)
    if dump:
        np.testing.assert_allclose(b.asnumpy(), a.asnumpy(), rtol=1e-6, atol=1e-7)
    else:
        assert not np.allclose(b.asnumpy(), a.asnumpy(), rtol=1e-4)


def test_saving_states_without_an_optimizer_is_an_error(tmp_path):
    kv = mx.kv.create("local")
    with pytest.raises(MXNetError, match="no optimizer"):
        kv.save_optimizer_states(str(tmp_path / "x"))


def test_multi_precision_float16_weights():
    kv = mx.kv.create("local")
    w0 = np.linspace(-1, 1, 8).astype(np.float16)
    kv.init(0, mx.nd.array(w0, dtype="float16"))
    kv.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9, multi_precision=True))
    g = np.full(8, 0.01, dtype=np.float16)
    for _ in range(3):
        kv.push(0, mx.nd.array(g, dtype="float16"))
    out = mx.nd.zeros((8,), dtype="float16")
    kv.pull(0, out=out)
    ref = mx.nd.array(w0, dtype="float16")
    upd = mx.optimizer.get_updater(mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9, multi_precision=True))
    for _ in range(3):
        upd(0, mx.nd.array(g, dtype="float16"), ref)
    np.testing.assert_array_equal(out.asnumpy(), ref.asnumpy())


def test_one_priority_per_key():
    kv = mx.kv.create("local")
    kv.init([0, 1], [mx.nd.zeros(SHAPE), mx.nd.zeros(SHAPE)])
    kv.pushpull([0, 1], [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE) * 2], priority=[0, -1])
    outs = [mx.nd.zeros(SHAPE), mx.nd.zeros(SHAPE)]
    kv.pull([0, 1], out=outs, priority=[-1, 0])
    assert [float(o.asnumpy()[0, 0]) for o in outs] == [1.0, 2.0]
    with pytest.raises(MXNetError, match="2 key.*1 priorities"):
        kv.push([0, 1], [mx.nd.ones(SHAPE)] * 2, priority=[0])


def test_a_store_refuses_a_mix_of_int_and_str_keys_over_its_life():
    for first, second in ((3, "a"), ("a", 3)):
        kv = mx.kv.create("local")
        kv.init(first, mx.nd.ones((2,)))
        with pytest.raises(mx.MXNetError, match="Mixed key types"):
            kv.init(second, mx.nd.ones((2,)))
        with pytest.raises(mx.MXNetError, match="Mixed key types"):
            kv.push(second, mx.nd.ones((2,)))
        out = mx.nd.zeros((2,))
        kv.pull(first, out=out)
        assert out.asnumpy().tolist() == [1.0, 1.0]

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
    kv.broadcast("b", mx.nd.ones(SHAPE) * 2, out=out)
    for o in out:
        np.testing.assert_array_equal(o.asnumpy(), np.full(SHAPE, 2.0))


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

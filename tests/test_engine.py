"""The dependency engine as seen from Python: ordering, parallel contexts, waits."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import rsmx as mx


def test_engine_type_follows_the_environment():
    want = os.environ.get("RSMX_ENGINE_TYPE") or os.environ.get("MXNET_ENGINE_TYPE") or "ThreadedEnginePerDevice"
    assert mx.engine.engine_type() == want
    code = "import rsmx as mx; print(mx.engine.engine_type())"
    for name in ["NaiveEngine", "ThreadedEngine", "ThreadedEnginePerDevice"]:
        env = {k: v for k, v in os.environ.items() if k not in ("RSMX_ENGINE_TYPE",)}
        env["MXNET_ENGINE_TYPE"] = name
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == name


# A new thread takes its name once it runs, so the count is read until it is the one
# wanted (argv[1:]) or a few seconds have passed.
_COUNT_THREADS = """
import os, sys, time, rsmx as mx
a = mx.nd.ones((256, 256))
mx.nd.dot(a, a).wait_to_read()
want, deadline = tuple(int(n) for n in sys.argv[1:]), time.monotonic() + 10
while True:
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    got = (sum(n.startswith("rsmx-kernel") for n in names), sum(n.startswith("rsmx-cpu") for n in names))
    if got == want or time.monotonic() > deadline:
        break
    time.sleep(0.05)
print(*got)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
@pytest.mark.parametrize(
    ("settings", "want"),
    [
        ({}, (len(os.sched_getaffinity(0)),) * 2),
        ({"OMP_NUM_THREADS": "1"}, (1, 1)),
        ({"OMP_NUM_THREADS": "1", "RSMX_CPU_WORKER_NTHREADS": "2"}, (1, 2)),
        ({"OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": "3"}, (3, 1)),
    ],
)
def test_omp_num_threads_sizes_the_compute_threads(settings, want):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "RSMX_CPU_WORKER_NTHREADS",
                        "MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE")}
    env.update(settings, RSMX_ENGINE_TYPE="ThreadedEnginePerDevice")
    out = subprocess.run([sys.executable, "-c", _COUNT_THREADS, *map(str, want)], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    assert tuple(int(n) for n in out.stdout.split()) == want


def test_writes_and_reads_are_ordered_per_array():
    x = mx.nd.zeros((1000,))
    snapshots = []
    for _ in range(1, 51):
        x += 1
        snapshots.append(x * 1)  # a read between writes sees exactly the writes before it
    for i, s in enumerate(snapshots, start=1):
        assert s.asnumpy()[0] == i
    assert x.asnumpy()[0] == 50


def test_views_are_ordered_with_their_parent():
    x = mx.nd.zeros((4, 100))
    for _ in range(20):
        x[1] += 1
        x += 1
        x[2:4] *= 2
    got = x.asnumpy()
    want = np.zeros((4, 100))
    for _ in range(20):
        want[1] += 1
        want += 1
        want[2:4] *= 2
    np.testing.assert_array_equal(got, want)


def test_independent_chains_on_several_contexts():
    chains = []
    for i in range(4):
        x = mx.nd.full((256,), 0.1 * i, ctx=mx.cpu(i))
        for _ in range(100):
            x = mx.nd.tanh(x) + 0.01
        chains.append(x)
    mx.nd.waitall()
    for i, x in enumerate(chains):
        v = np.full(256, 0.1 * i, dtype=np.float32)
        for _ in range(100):
            v = np.tanh(v) + np.float32(0.01)
        np.testing.assert_allclose(x.asnumpy(), v, rtol=1e-5)


def test_waits_from_several_python_threads():
    errors = []

    def work(k: int) -> None:
        try:
            x = mx.nd.ones((100,)) * k
            for _ in range(50):
                x = x + 1
            assert x.asnumpy()[0] == k + 50
            mx.nd.waitall()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert not any(t.is_alive() for t in threads)


@pytest.mark.timeout(120)
def test_stress_many_small_ops_match_numpy():
    rng = np.random.default_rng(1)
    arrays = [mx.nd.array(rng.standard_normal(64)) for _ in range(8)]
    mirror = [a.asnumpy().copy() for a in arrays]
    for _ in range(2000):
        i, j, k = rng.integers(0, 8, size=3)
        op = rng.integers(0, 3)
        if op == 0:
            arrays[k] = arrays[i] + arrays[j]
            mirror[k] = mirror[i] + mirror[j]
        elif op == 1:
            arrays[k] = mx.nd.tanh(arrays[i]) * 0.5
            mirror[k] = np.tanh(mirror[i]) * np.float32(0.5)
        else:
            arrays[k] += arrays[i] * 0.1
            mirror[k] = mirror[k] + mirror[i] * np.float32(0.1)
    for a, m in zip(arrays, mirror, strict=True):
        np.testing.assert_allclose(a.asnumpy(), m, rtol=1e-4, atol=1e-5)


@pytest.mark.timeout(120)
def test_memory_of_a_dropped_array_is_reused_only_after_its_readers(ctx):
    # A slow op still reads `small` when it is dropped; the outputs made next take its
    # memory, and must not write it before that op has read it.
    big = mx.nd.ones((800, 800), ctx=ctx)
    for step in range(10):
        small = mx.nd.full((1,), float(step), ctx=ctx)
        total = mx.nd.sum(mx.nd.broadcast_add(mx.nd.dot(big, big), small))
        del small
        later = [mx.nd.full((1,), -1.0, ctx=ctx) * 3 for _ in range(4)]
        # Had `small` been overwritten first, the sum would be off by 800 * 800 * 3.
        assert total.asscalar() == pytest.approx(800.0 * 800 * (800 + step), rel=1e-5)
        assert all(a.asscalar() == -3.0 for a in later)


def test_an_error_stays_with_the_array_whose_op_failed():
    a = mx.nd.ones((3,))
    outside = mx.nd.array([7])
    for _ in range(30):
        bad = mx.nd.take(a, outside, mode="raise")
        follows = bad + 1
        del bad
        # Outputs of the failed one's size, made after it was dropped, are clean.
        fine = [mx.nd.ones((1,)) * 2 for _ in range(3)]
        assert [f.asscalar() for f in fine] == [2.0, 2.0, 2.0]
        with pytest.raises(mx.MXNetError, match="take: indices out of bounds"):
            follows.asnumpy()
        mx.nd.waitall()

"""A worker of a loopback cluster: runs the distributed KVStore checks with rsmx, or with
MXNet 1.9.1 when ``DIST_TEST_IMPL=mxnet``, and prints ``CHECKS PASSED <rank> <count>``.

The cluster comes from the launcher's variables (``DMLC_*``); the store type from
``DIST_TEST_KV`` (default ``dist_sync``); ``DIST_TEST_KEYS=str`` names every key with a
string (a store takes one kind of key). With ``DIST_TEST_OUT`` set, the weights the
server-side SGD gave are saved there as ``sgd-<rank>.npy``, for comparison across sides.
"""

from __future__ import annotations

import os
import sys

import numpy as np

if os.environ.get("DIST_TEST_IMPL") == "mxnet":
    import mxnet as mx
else:
    import rsmx as mx

checks = 0


def check(cond: bool, what: str) -> None:
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def close(got, want, what: str, rtol: float = 1e-6) -> None:
    got = got.asnumpy() if hasattr(got, "asnumpy") else np.asarray(got)
    check(np.allclose(got, want, rtol=rtol, atol=1e-6), f"{what}: got {got.ravel()[:5]}, want {np.ravel(want)[:5]}")


def key(i: int):
    """Key ``i``, an int or (``DIST_TEST_KEYS=str``) a string."""
    return f"key{i}" if os.environ.get("DIST_TEST_KEYS") == "str" else i


kv_type = os.environ.get("DIST_TEST_KV", "dist_sync")
kv = mx.kv.create(kv_type)
rank, n = kv.rank, kv.num_workers
expected_workers = int(os.environ["DMLC_NUM_WORKER"])
check(kv.type == kv_type, f"type {kv.type}")
check(n == expected_workers, f"num_workers {n}")
check(0 <= rank < n, f"rank {rank}")
total = n * (n + 1) / 2  # the sum of every worker's rank + 1: distinct ranks sum to it
shape = (2, 3)

# init: rank 0's value wins; a barrier follows.
kv.init(key(3), mx.nd.ones(shape) * (rank + 10))
out = mx.nd.zeros(shape)
kv.pull(key(3), out=out)
close(out, 10, "init from rank 0")

# Pushes of one round are summed over the workers; the sum replaces the value.
kv.push(key(3), mx.nd.ones(shape) * (rank + 1))
kv.pull(key(3), out=out)
close(out, total, "pushes summed (distinct ranks)")
kv.push(key(3), mx.nd.ones(shape) * 2)
kv.pull(key(3), out=out)
close(out, 2 * n, "a second round replaces the value")
kv._barrier()

# Several devices: each worker's values are summed locally first.
devs = [mx.cpu(0), mx.cpu(1)]
kv.init(key(5), mx.nd.zeros(shape))
kv.push(key(5), [mx.nd.ones(shape, ctx=d) * (rank + 1) for d in devs])
outs = [mx.nd.zeros(shape, ctx=d) for d in devs]
kv.pull(key(5), out=outs)
for o in outs:
    close(o, 2 * total, "multi-device push and pull")

# Lists of keys.
keys = [key(30), key(31)]
kv.init(keys, [mx.nd.ones(shape), mx.nd.ones(shape) * 2])
kv.push(keys, [mx.nd.ones(shape) * (rank + 1), mx.nd.ones(shape) * 3])
pulled = [mx.nd.zeros(shape), mx.nd.zeros(shape)]
kv.pull(keys, out=pulled)
close(pulled[0], total, "list of keys: first")
close(pulled[1], 3 * n, "list of keys: second")

# A big array, split over every server.
big = 1_000_003
kv.init(key(7), mx.nd.zeros((big,)))
grad = np.arange(big, dtype=np.float32) % 97
kv.push(key(7), mx.nd.array(grad * (rank + 1)))
out_big = mx.nd.zeros((big,))
kv.pull(key(7), out=out_big)
close(out_big, grad * total, "1,000,003-element key")

# Other types.
for k, dtype in ((key(11), np.float64), (key(12), np.float16)):
    kv.init(k, mx.nd.zeros(shape, dtype=dtype))
    kv.push(k, mx.nd.ones(shape, dtype=dtype) * (rank + 1))
    o = mx.nd.zeros(shape, dtype=dtype)
    kv.pull(k, out=o)
    check(o.dtype == dtype, f"{dtype} kept")
    close(o, total, f"{np.dtype(dtype).name} key", rtol=1e-3)

# Server-side SGD with momentum.
lr, momentum, wd = 0.1, 0.9, 1e-4
w0 = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
kv.init(key(20), mx.nd.array(w0))
kv.set_optimizer(mx.optimizer.SGD(learning_rate=lr, momentum=momentum, wd=wd))
kv._barrier()
weight, mom = w0.astype(np.float64), np.zeros_like(w0, dtype=np.float64)
w = mx.nd.zeros((3, 4))
for step in range(3):
    g = np.full((3, 4), 0.5 * (step + 1), dtype=np.float32) + np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    kv.push(key(20), mx.nd.array(g * (rank + 1)))
    kv.pull(key(20), out=w)
    merged = g.astype(np.float64) * total
    mom = momentum * mom - lr * wd * weight - lr * merged
    weight = weight + mom
    close(w, weight, f"server-side SGD, round {step + 1}", rtol=1e-5)
if os.environ.get("DIST_TEST_OUT"):
    np.save(os.path.join(os.environ["DIST_TEST_OUT"], f"sgd-{rank}.npy"), w.asnumpy())

mx.nd.waitall()
print(f"CHECKS PASSED {rank} {checks}", flush=True)
sys.stdout.flush()

"""A worker training float16 keys with a server-side optimizer under multi-precision
(rsmx, or MXNet 1.9.1 when ``DIST_TEST_IMPL=mxnet``): SGD with momentum and Adam, each
with ``multi_precision=True``, so the servers keep float32 copies (kSetMultiPrecision).
Three rounds on a small key and on a key split over the servers; the values pulled after
each round are saved as ``fp16-<rank>.npy`` under ``DIST_TEST_OUT``. Prints
``FP16 PASSED``."""

from __future__ import annotations

import os

import numpy as np

if os.environ.get("DIST_TEST_IMPL") == "mxnet":
    import mxnet as mx
else:
    import rsmx as mx

name = os.environ.get("DIST_TEST_OPTIMIZER", "sgd")
kv = mx.kv.create("dist_sync")
if name == "sgd":
    opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-4, multi_precision=True)
else:
    opt = mx.optimizer.Adam(learning_rate=0.01, multi_precision=True)
kv.set_optimizer(opt)
rank = kv.rank
sizes = {5: 7, 6: 300_001}
for k, n in sizes.items():
    kv.init(k, mx.nd.array(np.linspace(-2, 2, n), dtype="float16"))
pulled = []
for step in range(3):
    for k, n in sizes.items():
        grad = np.cos(np.arange(n) * 0.01 + step) * (rank + 1) * 1e-3
        kv.push(k, mx.nd.array(grad, dtype="float16"))
    for k, n in sizes.items():
        out = mx.nd.zeros((n,), dtype="float16")
        kv.pull(k, out=out)
        pulled.append(out.asnumpy())
got = np.concatenate(pulled)
assert got.dtype == np.float16, got.dtype
np.save(os.path.join(os.environ["DIST_TEST_OUT"], f"fp16-{rank}.npy"), got)
print("FP16 PASSED", flush=True)

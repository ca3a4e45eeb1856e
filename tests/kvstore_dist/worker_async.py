"""A worker of a ``dist_async`` job: every push is applied by itself. Without an optimizer
an rsmx server stores each push as it comes; with SGD, every worker's every push lands.
Prints ``ASYNC PASSED <rank>``."""

from __future__ import annotations

import os

import numpy as np

if os.environ.get("DIST_TEST_IMPL") == "mxnet":
    import mxnet as mx
else:
    import rsmx as mx

kv = mx.kv.create("dist_async")
rank, n = kv.rank, kv.num_workers
shape = (4,)
out = mx.nd.zeros(shape)
if os.environ.get("DIST_TEST_NO_OPTIMIZER"):
    kv.init(1, mx.nd.zeros(shape))
    kv.push(1, mx.nd.ones(shape) * (rank + 1))
    kv.pull(1, out=out)
    # This worker's push was applied at once: the value is its own or a later one's.
    assert set(out.asnumpy()) <= {float(r + 1) for r in range(n)}, out.asnumpy()
else:
    kv.init(2, mx.nd.ones(shape) * 100)
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.5))
    kv._barrier()
    for _ in range(5):
        kv.push(2, mx.nd.ones(shape) * (rank + 1))
    kv.pull(2, out=out)
    out.wait_to_read()
    kv._barrier()
    kv.pull(2, out=out)
    want = 100 - 0.5 * 5 * n * (n + 1) / 2
    assert np.allclose(out.asnumpy(), want), (out.asnumpy(), want)
print(f"ASYNC PASSED {rank}", flush=True)

"""A worker pushing under 2-bit gradient compression (rsmx, or MXNet 1.9.1 when
``DIST_TEST_IMPL=mxnet``): three rounds on a small key and on a key split over the
servers; the values pulled after each round are saved as ``2bit-<rank>.npy`` under
``DIST_TEST_OUT``, to be compared bit for bit across sides. Prints ``2BIT PASSED``."""

from __future__ import annotations

import os

import numpy as np

if os.environ.get("DIST_TEST_IMPL") == "mxnet":
    import mxnet as mx
else:
    import rsmx as mx

kv = mx.kv.create("dist_sync")
kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
rank = kv.rank
sizes = {3: 10, 4: 1_000_003}
for k, n in sizes.items():
    kv.init(k, mx.nd.zeros((n,)))
pulled = []
for step in range(3):
    for k, n in sizes.items():
        grad = np.linspace(-1, 1, n, dtype=np.float32) * np.float32(0.4 * (rank + 1) + 0.1 * step)
        kv.push(k, mx.nd.array(grad))
    for k, n in sizes.items():
        out = mx.nd.zeros((n,))
        kv.pull(k, out=out)
        pulled.append(out.asnumpy())
np.save(os.path.join(os.environ["DIST_TEST_OUT"], f"2bit-{rank}.npy"), np.concatenate(pulled))
print("2BIT PASSED", flush=True)

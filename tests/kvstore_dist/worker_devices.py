"""A worker of ``dist_device_sync`` pushing from two GPUs (real, or fake under
``RSMX_FAKE_GPU=2``; two values on ``gpu(0)`` where there is one GPU) and pulling into
both: each key is summed on one of the GPUs, copied to the host and sent. Checks the
values of three rounds, a single-GPU push, a key split over the servers and a float16
key. Prints ``DEVICES PASSED``."""

from __future__ import annotations

import numpy as np
import rsmx as mx

kv = mx.kv.create("dist_device_sync")
assert kv.type == "dist_device_sync"
rank, n = kv.rank, kv.num_workers
gpus = [mx.gpu(0), mx.gpu(1 if mx.context.num_gpus() > 1 else 0)]
shapes = {3: (4, 5), 4: (1_000_003,), 5: (6,)}
dtypes = {3: "float32", 4: "float32", 5: "float16"}
for k, shape in shapes.items():
    kv.init(k, mx.nd.zeros(shape, dtype=dtypes[k]))
workers_sum = n * (n + 1) / 2  # the ranks plus one, summed over the workers
for round_ in range(1, 4):
    for k, shape in shapes.items():
        vals = [mx.nd.ones(shape, ctx=g, dtype=dtypes[k]) * (rank + 1) * round_ for g in gpus]
        outs = [mx.nd.zeros(shape, ctx=g, dtype=dtypes[k]) for g in gpus]
        kv.pushpull(k, vals, out=outs)
        for o in outs:
            assert o.context in gpus, o.context
            np.testing.assert_array_equal(o.asnumpy(), np.full(shape, 2 * workers_sum * round_))
# One GPU's value goes as it is.
out = mx.nd.zeros(shapes[3], ctx=gpus[1])
kv.pushpull(3, mx.nd.ones(shapes[3], ctx=gpus[1]) * (rank + 1), out=out)
np.testing.assert_array_equal(out.asnumpy(), np.full(shapes[3], workers_sum))
kv._barrier()
print("DEVICES PASSED", flush=True)

"""A worker that pushes and pulls in a loop until something fails (or 120 s pass): for the
fault tests. Prints ``LOOPING`` once every worker has passed its first round, and the
error it stopped on."""

from __future__ import annotations

import os
import sys
import time

if os.environ.get("DIST_TEST_IMPL") == "mxnet":
    import mxnet as mx
else:
    import rsmx as mx

kv = mx.kv.create("dist_sync")
kv.init(1, mx.nd.zeros((1000,)))
out = mx.nd.zeros((1000,))
deadline = time.monotonic() + 120
first = True
try:
    while time.monotonic() < deadline:
        kv.push(1, mx.nd.ones((1000,)))
        kv.pull(1, out=out)
        out.wait_to_read()
        if first:
            print("LOOPING", flush=True)
            first = False
        time.sleep(0.01)
except mx.base.MXNetError as e:
    print(f"FAILED: {e}", flush=True)
    sys.exit(3)
print("TIMED OUT", flush=True)
sys.exit(4)

"""rsmx demo: asynchronous NDArray work on several CPU contexts.

Each context runs its own chain of operators; the engine runs them in parallel and the
script only blocks when it reads a result.
"""

from __future__ import annotations

import time

import numpy as np
import rsmx as mx


def chain(x: mx.nd.NDArray, steps: int) -> mx.nd.NDArray:
    """A chain of dependent operators: each step reads the previous result."""
    for _ in range(steps):
        x = mx.nd.tanh(x * 0.5 + 0.1)
    return x


def main() -> None:
    print(f"rsmx {mx.__version__}, engine {mx.engine.engine_type()}")
    contexts = [mx.cpu(0), mx.cpu(1)]
    mx.random.seed(7)

    # One array per context; pushes return at once.
    start = time.perf_counter()
    inputs = [mx.nd.random.uniform(-1, 1, shape=(256, 256), ctx=c) for c in contexts]
    outputs = [chain(x, 200) for x in inputs]
    pushed = time.perf_counter() - start
    mx.nd.waitall()
    done = time.perf_counter() - start
    print(f"pushed {2 * 200 * 3} ops on {len(contexts)} contexts in {pushed * 1e3:.1f} ms, "
          f"all finished after {done * 1e3:.1f} ms")
    for c, y in zip(contexts, outputs, strict=True):
        print(f"  {c}: mean {y.mean().asscalar():+.6f}, shape {y.shape}, on {y.context}")

    # Matrix products and a reduction, checked against numpy.
    a = mx.nd.random.normal(0, 1, shape=(512, 512))
    b = mx.nd.random.normal(0, 1, shape=(512, 512))
    c = mx.nd.dot(a, b).sum(axis=1)
    expect = (a.asnumpy().astype(np.float64) @ b.asnumpy().astype(np.float64)).sum(axis=1)
    print(f"dot + sum on {c.context}: max |error| vs numpy {np.abs(c.asnumpy() - expect).max():.2e}")

    # Copies between contexts are ordered with the work on both sides.
    moved = outputs[0].copyto(mx.cpu(1)) + outputs[1]
    print(f"cross-context sum: {moved.sum().asscalar():+.4f} on {moved.context}")

    # Errors inside asynchronous work surface at the next wait; the engine keeps going.
    try:
        mx.nd.dot(mx.nd.ones((2, 3)), mx.nd.ones((4, 5))).wait_to_read()
    except mx.MXNetError as e:
        print(f"bad input is a clear error: {e}")
    print("pool:", mx.storage.stats(mx.cpu(0)))


if __name__ == "__main__":
    main()

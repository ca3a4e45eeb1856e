"""A short rsmx GPU workload for compute-sanitizer: element-wise ops on gpu(0) at odd sizes,
each checked against numpy through ``asnumpy``.

    compute-sanitizer --tool memcheck python sanitize_target.py

Exit status: 0 all checks passed, 1 a result differed, 2 no GPU or the ops are not there
yet (the message says which).
"""

from __future__ import annotations

import sys

import numpy as np

SIZES = (1, 33, 257, 100003)


def main() -> int:
    try:
        import rsmx as mx

        if mx.context.num_gpus() == 0:
            print("no GPU: rsmx.context.num_gpus() == 0")
            return 2
        ctx = mx.gpu(0)
        mx.nd.ones((1,), ctx=ctx).asnumpy()
    except Exception as e:
        print(f"not available yet: {type(e).__name__}: {e}")
        return 2

    rng = np.random.default_rng(0)
    failures = 0
    checks = 0
    cases = {
        "a + b": (lambda a, b: a + b, lambda a, b: a + b),
        "a - b": (lambda a, b: a - b, lambda a, b: a - b),
        "a * b + a": (lambda a, b: a * b + a, lambda a, b: a * b + a),
        "a / b": (lambda a, b: a / b, lambda a, b: a / b),
        "a * 3 - 1": (lambda a, b: a * 3 - 1, lambda a, b: a * np.float32(3) - np.float32(1)),
        "a + 1 (int32)": (None, None),
    }
    for n in SIZES:
        x = rng.uniform(-2, 2, n).astype(np.float32)
        y = rng.uniform(0.5, 2, n).astype(np.float32)
        for name, (op, ref) in cases.items():
            checks += 1
            try:
                if op is None:
                    xi = (x * 100).astype(np.int32)
                    got = (mx.nd.array(xi, ctx=ctx, dtype="int32") + 1).asnumpy()
                    want = xi + 1
                else:
                    a = mx.nd.array(x, ctx=ctx)
                    b = mx.nd.array(y, ctx=ctx)
                    got = op(a, b).asnumpy()
                    want = ref(x, y)
                if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-6):
                    failures += 1
                    err = np.max(np.abs(got.astype(np.float64) - want)) if got.shape == want.shape else "shape"
                    print(f"WRONG {name} n={n}: max abs err {err}")
            except Exception as e:
                failures += 1
                print(f"FAILED {name} n={n}: {type(e).__name__}: {e}")
    try:
        mx.nd.waitall()
    except Exception as e:
        failures += 1
        print(f"FAILED waitall: {type(e).__name__}: {e}")
    print(f"{checks - failures}/{checks} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

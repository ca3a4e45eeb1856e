"""KVStore workloads: a large push and pull over four CPU contexts, and the round trip
of one small key; with numpy summing the same data as the yardstick."""

from __future__ import annotations

import time
from typing import Any

KEYS = 50
SIZE = 1 << 20
DEVICES = 4
ROUNDS = 3
SMALL_TRIPS = 20000


def _pushed_bytes() -> int:
    return KEYS * DEVICES * SIZE * 4


def mx_kv_local(mx: Any, pull: bool = False) -> tuple[float, str, bool]:
    """GB/s pushed: every key pushed from four contexts (and, with ``pull``, pulled back
    to them in the same timed loop)."""
    kv = mx.kv.create("local")
    ctxs = [mx.cpu(i) for i in range(DEVICES)]
    keys = list(range(KEYS))
    kv.init(keys, [mx.nd.zeros((SIZE,)) for _ in keys])
    grads = [[mx.nd.ones((SIZE,), ctx=c) * (i + 1) for i, c in enumerate(ctxs)] for _ in keys]
    outs = [[mx.nd.zeros((SIZE,), ctx=c) for c in ctxs] for _ in keys]
    mx.nd.waitall()

    def run() -> float:
        t = time.perf_counter()
        for _ in range(ROUNDS):
            kv.push(keys, grads)
            if pull:
                kv.pull(keys, out=outs)
        mx.nd.waitall()
        return time.perf_counter() - t

    run()
    best = min(run() for _ in range(3))
    kv.pull(keys, out=outs)
    want = sum(range(1, DEVICES + 1))
    got = outs[-1][-1].asnumpy()
    if got.min() != want or got.max() != want:
        raise SystemExit(f"kv_local: wrong sum {got.min()}..{got.max()}, expected {want}")
    return ROUNDS * _pushed_bytes() / best / 1e9, "GB/s", True


def numpy_kv_local(np: Any) -> tuple[float, str, bool]:
    """GB/s numpy sums the same data at: four arrays per key into one."""
    grads = [[np.full(SIZE, i + 1, dtype=np.float32) for i in range(DEVICES)] for _ in range(KEYS)]
    outs = [np.zeros(SIZE, dtype=np.float32) for _ in range(KEYS)]

    def run() -> float:
        t = time.perf_counter()
        for _ in range(ROUNDS):
            for g, o in zip(grads, outs, strict=True):
                np.add(g[0], g[1], out=o)
                for x in g[2:]:
                    np.add(o, x, out=o)
        return time.perf_counter() - t

    run()
    best = min(run() for _ in range(3))
    return ROUNDS * _pushed_bytes() / best / 1e9, "GB/s", True


def mx_kv_small(mx: Any) -> tuple[float, str, bool]:
    """Microseconds per push and pull of one key of 10 floats, waiting for each pull."""
    kv = mx.kv.create("local")
    kv.init(7, mx.nd.zeros((10,)))
    g = mx.nd.ones((10,))
    out = mx.nd.zeros((10,))
    mx.nd.waitall()

    def run() -> float:
        t = time.perf_counter()
        for _ in range(SMALL_TRIPS):
            kv.push(7, g)
            kv.pull(7, out=out)
            out.wait_to_read()
        return time.perf_counter() - t

    run()
    return min(run() for _ in range(3)) / SMALL_TRIPS * 1e6, "us", False

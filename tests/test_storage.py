"""The memory pool as seen from Python: counters, reuse and release."""

from __future__ import annotations

import gc

import rsmx as mx


def test_pool_reuses_freed_blocks():
    ctx = mx.cpu(7)
    mx.nd.waitall()
    before = mx.storage.stats(ctx)
    a = mx.nd.ones((1000,), ctx=ctx)
    a.wait_to_read()
    during = mx.storage.stats(ctx)
    assert during["bytes_in_use"] >= before["bytes_in_use"] + 4000
    del a
    gc.collect()
    mx.nd.waitall()
    after = mx.storage.stats(ctx)
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["bytes_pooled"] >= 4000
    b = mx.nd.zeros((1000,), ctx=ctx)
    assert mx.storage.stats(ctx)["pool_hits"] > after["pool_hits"]
    del b
    mx.nd.waitall()
    mx.storage.release_all(ctx)
    assert mx.storage.stats(ctx)["bytes_pooled"] == 0


def test_views_keep_memory_alive():
    ctx = mx.cpu(8)
    a = mx.nd.arange(10, ctx=ctx)
    v = a[2:5]
    del a
    gc.collect()
    mx.nd.waitall()
    assert v.asnumpy().tolist() == [2.0, 3.0, 4.0]
    assert mx.storage.stats(ctx)["bytes_in_use"] >= 40

"""Shared pytest fixtures: the device contexts tests run on; and the selection of tests
for a run of the suite under one more engine."""

from __future__ import annotations

import os

# Kernels follow a fixed thread count here, not the machine's load, so that results
# computed twice in a test are the same bits; test_kernel_threads.py covers the load.
os.environ.setdefault("RSMX_DYNAMIC_THREADS", "0")

import pytest  # noqa: E402
import rsmx as mx  # noqa: E402


def _contexts() -> list:
    """The CPU, and the first two GPUs where there are any; GPU cases carry the `gpu` mark
    so that `-m gpu` selects them."""
    ctxs = [mx.cpu(0)]
    for i in range(min(mx.context.num_gpus(), 2)):
        ctxs.append(pytest.param(mx.gpu(i), marks=pytest.mark.gpu, id=str(mx.gpu(i))))
    return ctxs


@pytest.fixture(params=_contexts(), ids=str)
def ctx(request):
    """Runs a device test on the CPU and on each of the first two GPUs there are."""
    return request.param


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `gpu` are skipped when there is no GPU (the only allowed skip).

    With `RSMX_TEST_ENGINE_RERUN=1` (set by `make test` for its runs under the second and
    third engine), tests marked `engine_free`, which compile and run the CUDA sources
    without the engine, are left out: they ran under the first one, and an engine cannot
    change what they check. So are those marked `mxnet_interop`, which check the wire
    protocol against MXNet's own processes: the all-rsmx clusters, which run under every
    engine, cover the worker's engine path."""
    once = ("engine_free", "mxnet_interop")
    if os.environ.get("RSMX_TEST_ENGINE_RERUN") == "1":
        kept = [i for i in items if not any(i.get_closest_marker(m) for m in once)]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
            items[:] = kept
    if mx.context.num_gpus() > 0:
        return
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU; none found")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(no_gpu)

"""Shared pytest fixtures: the device contexts tests run on."""

from __future__ import annotations

import pytest
import rsmx as mx


def _contexts() -> list:
    ctxs = [mx.cpu(0)]
    if mx.context.num_gpus() > 0:
        ctxs.append(mx.gpu(0))
    return ctxs


@pytest.fixture(params=_contexts(), ids=str)
def ctx(request):
    """Runs a device test on the CPU and, when there is one, on a GPU."""
    return request.param


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `gpu` are skipped when there is no GPU (the only allowed skip)."""
    if mx.context.num_gpus() > 0:
        return
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU; none found")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(no_gpu)

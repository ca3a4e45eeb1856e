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

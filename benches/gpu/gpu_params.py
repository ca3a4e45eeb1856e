"""pytest plugin: ``--gpu-params`` keeps only the GPU cases of device-parametrised tests
(those whose ``ctx`` parameter is a GPU context), which ``-m gpu`` does not select.

    PYTHONPATH=benches/gpu:$PYTHONPATH python -m pytest -p gpu_params --gpu-params tests/
"""

from __future__ import annotations


def pytest_addoption(parser) -> None:
    parser.addoption("--gpu-params", action="store_true",
                     help="run only the GPU cases of tests parametrised by the ctx fixture")


def pytest_collection_modifyitems(config, items) -> None:
    if not config.getoption("--gpu-params"):
        return
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        ctx = spec.params.get("ctx") if spec is not None else None
        (keep if ctx is not None and str(ctx).startswith("gpu") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep

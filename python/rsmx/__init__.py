"""rsmx: MXNet 1.x's execution core rebuilt in Rust, with MXNet's Python API.

Use it as ``import rsmx as mx``.
"""

from __future__ import annotations

import os as _os

__version__ = "0.1.0"

from . import (
    attribute,
    autograd,
    base,
    callback,
    context,
    contrib,
    engine,
    executor,
    executor_manager,
    initializer,
    io,
    kvstore,
    lr_scheduler,
    metric,
    model,
    module,
    monitor,
    name,
    ndarray,
    operator,
    optimizer,
    profiler,
    random,
    recordio,
    rnn,
    runtime,
    storage,
    symbol,
    test_utils,
    util,
    visualization,
)
from . import initializer as init
from . import kvstore as kv
from . import module as mod
from . import monitor as mon
from . import ndarray as nd
from . import symbol as sym
from . import visualization as viz
from .attribute import AttrScope
from .base import MXNetError
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus
from .util import is_np_array, is_np_shape, np_shape, set_np_shape, use_np_shape

__all__ = [
    "MXNetError",
    "Context",
    "cpu",
    "gpu",
    "cpu_pinned",
    "current_context",
    "num_gpus",
    "autograd",
    "base",
    "callback",
    "context",
    "contrib",
    "engine",
    "storage",
    "ndarray",
    "nd",
    "profiler",
    "random",
    "recordio",
    "rnn",
    "runtime",
    "test_utils",
    "util",
    "is_np_array",
    "is_np_shape",
    "np_shape",
    "set_np_shape",
    "use_np_shape",
    "symbol",
    "sym",
    "executor",
    "kvstore",
    "kv",
    "initializer",
    "init",
    "io",
    "metric",
    "model",
    "module",
    "mod",
    "executor_manager",
    "operator",
    "optimizer",
    "lr_scheduler",
    "monitor",
    "mon",
    "visualization",
    "viz",
    "name",
    "attribute",
    "AttrScope",
]

# A process started as a cluster's scheduler or server runs that role and exits, as
# ``import mxnet`` does in MXNet (its launchers start them as ``python -c 'import mxnet'``).
if _os.environ.get("DMLC_ROLE") in ("server", "scheduler"):
    from .kvstore.server import run_role_and_exit as _run_role_and_exit

    _run_role_and_exit()

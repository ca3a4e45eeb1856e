"""The scheduler and server roles of a cluster: ``import rsmx`` in a process whose
``DMLC_ROLE`` is ``scheduler`` or ``server`` runs that role and exits when the job ends,
as ``import mxnet`` does, so MXNet's launch scripts start rsmx nodes unchanged."""

from __future__ import annotations

import os
import sys
from typing import Any

from .. import _core
from ..base import MXNetError
from . import optimizer_pickle

__all__ = ["LOST_NODE_EXIT", "run_role_and_exit", "server_updater"]

#: The exit code of a scheduler or server that stopped because another node of the job
#: was lost: a launcher tells by it the consequences of a failure from its cause.
LOST_NODE_EXIT = 3


def server_updater(pickled: bytes) -> Any:
    """What a server runs for the optimizer a worker sent: its fused form when the core
    can run it, else its Python updater."""
    from ..optimizer import get_updater

    optimizer = optimizer_pickle.loads(pickled)
    fused = optimizer._core_optimizer()
    return fused if fused is not None else get_updater(optimizer)


def run_role_and_exit() -> None:
    """Runs the role ``DMLC_ROLE`` names until the job ends, then exits: 0 when the
    workers stopped the job, otherwise with the reason on standard error and
    :data:`LOST_NODE_EXIT` when another node was lost, 1 for any other failure."""
    role = os.environ.get("DMLC_ROLE", "")
    try:
        _core.dist_run_role(server_updater)
    except MXNetError as e:
        print(f"rsmx {role}: {e}", file=sys.stderr, flush=True)
        os._exit(LOST_NODE_EXIT if "is unreachable" in str(e) else 1)
    sys.stdout.flush()
    sys.exit(0)

"""The ``dist_*`` stores on a worker of a cluster (MXNet's ``KVStoreDist``): values are
summed on the servers, which run the optimizer ``set_optimizer`` sends them."""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

from .. import _core
from ..base import MXNetError, MXNetTypeError
from . import optimizer_pickle
from .kvstore import KVStore

__all__ = ["DistKVStore", "is_dist_type"]


def is_dist_type(name: str) -> bool:
    """Whether MXNet's type ``name`` is a distributed store (it contains ``dist``)."""
    return "dist" in name


_leave_registered = False
# Set when the program ends on an uncaught exception or a non-zero sys.exit.
_failed = False


def _note_exception(*args: Any) -> None:
    global _failed
    _failed = True
    _excepthook(*args)


def _note_exit(status: Any = None) -> None:
    global _failed
    if status not in (None, 0):
        _failed = True
    _sys_exit(status)


_excepthook = sys.excepthook
_sys_exit = sys.exit


def _leave_at_exit() -> None:
    """Leaves the cluster as MXNet's worker does when its store goes: after the engine's
    work, a barrier of the workers, rank 0 stops the servers, a last barrier of every node.
    A failure here (a lost node) is reported and the process exits non-zero.

    A program that failed (an uncaught exception, ``sys.exit`` with an error) leaves at
    once instead: waiting in the barrier would keep it alive while the other workers wait
    for its pushes; closing its connections makes them fail, naming it.
    """
    if _failed:
        return
    try:
        _core.dist_leave()
    except MXNetError as e:
        sys.stdout.flush()
        print(f"rsmx: leaving the cluster failed: {e}", file=sys.stderr, flush=True)
        os._exit(1)


class DistKVStore(KVStore):
    """A worker's store of a cluster of servers (see :class:`KVStore` for the data calls).

    Every store of a process shares the process's node, which joins the cluster the
    launcher's ``DMLC_*`` variables describe when the first store is created, and leaves
    it when the process exits.
    """

    def __init__(self, name: str) -> None:
        global _leave_registered
        super().__init__(name)
        if not _leave_registered:
            atexit.register(_leave_at_exit)
            sys.excepthook = _note_exception
            sys.exit = _note_exit
            _leave_registered = True

    def _set_updater(self, updater: Any) -> None:
        raise MXNetError(
            f"KVStore '{self.type}': updates run on the servers; use set_optimizer, or pull "
            "the summed gradients and update on the worker"
        )

    set_updater = _set_updater

    def set_optimizer(self, optimizer: Any) -> None:
        """Sends ``optimizer`` to every server, which from then on applies the pushed sums
        with it; returns once every server holds it.

        Parameters
        ----------
        optimizer : Optimizer
            The optimizer (see :mod:`rsmx.optimizer`); it travels pickled under MXNet's
            class names, so MXNet's servers can run it too.
        """
        body = optimizer_pickle.dumps(optimizer)
        self._send_command_to_servers(_core.dist_command_head("kController"), body)
        if optimizer.multi_precision:
            self._send_command_to_servers(_core.dist_command_head("kSetMultiPrecision"), "")

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Not available: the optimizer's states live on the servers (as in MXNet)."""
        raise MXNetError("Cannot save states for distributed training")

    def load_optimizer_states(self, fname: str) -> None:
        """Not available: the optimizer's states live on the servers (as in MXNet)."""
        raise MXNetError("Cannot load states for distributed training")

    def _send_command_to_servers(self, head: int, body: Any) -> None:
        """Sends a command to every server and waits until all have carried it out.

        Parameters
        ----------
        head : int
            The command (MXNet's ``kController`` is 0, ...).
        body : str or bytes
            Its argument.
        """
        if isinstance(body, str):
            body = body.encode("utf-8")
        if not isinstance(body, (bytes, bytearray)):
            raise MXNetTypeError(f"_send_command_to_servers: body must be str or bytes, not {type(body).__name__}")
        _core.dist_send_command(int(head), bytes(body))

"""``mx.callback``: functions that training calls after each batch or epoch, to log speed
and metrics, show progress and save checkpoints.

Batch callbacks receive a ``BatchEndParam``; epoch callbacks receive
``(epoch, symbol, arg_params, aux_params)``. Messages go through ``logging`` in MXNet
1.9.1's formats.
"""

from __future__ import annotations

import logging
import math
import time
from collections import namedtuple
from collections.abc import Callable
from typing import Any

# Defined before anything else so that ``rsmx.model`` can re-export it while this module
# is still being imported.
BatchEndParam = namedtuple("BatchEndParams", ["epoch", "nbatch", "eval_metric", "locals"])
BatchEndParam.__doc__ = """What batch-end callbacks receive.

Fields: ``epoch`` (int), ``nbatch`` (batches done in this epoch, counting from 0 before
the first), ``eval_metric`` (the training metric or None) and ``locals`` (the caller's
local variables).
"""

__all__ = [
    "BatchEndParam",
    "module_checkpoint",
    "do_checkpoint",
    "log_train_metric",
    "Speedometer",
    "ProgressBar",
    "LogValidationMetricsCallback",
]


def module_checkpoint(
    mod: Any, prefix: str, period: int = 1, save_optimizer_states: bool = False
) -> Callable[..., None]:
    """An epoch-end callback that saves a module's checkpoint every ``period`` epochs.

    Parameters
    ----------
    mod : BaseModule
        The module; its ``save_checkpoint(prefix, epoch, save_optimizer_states)`` is called.
    prefix : str
        The checkpoint files' prefix.
    period : int, optional
        Epochs between checkpoints (at least 1).
    save_optimizer_states : bool, optional
        Whether to save the optimizer's state too.

    Returns
    -------
    callable
        ``callback(epoch, sym=None, arg=None, aux=None)``.
    """
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)

    return _callback


def do_checkpoint(prefix: str, period: int = 1) -> Callable[..., None]:
    """An epoch-end callback that writes ``prefix-symbol.json`` and
    ``prefix-EPOCH.params`` (epochs counted from 1) every ``period`` epochs.

    Parameters
    ----------
    prefix : str
        The checkpoint files' prefix.
    period : int, optional
        Epochs between checkpoints (at least 1).

    Returns
    -------
    callable
        ``callback(epoch, symbol, arg_params, aux_params)``.
    """
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any, arg: dict, aux: dict) -> None:
        if (iter_no + 1) % period == 0:
            from .model import save_checkpoint

            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)

    return _callback


def log_train_metric(period: int, auto_reset: bool = False) -> Callable[[Any], None]:
    """A batch-end callback logging the training metric every ``period`` batches.

    Parameters
    ----------
    period : int
        Batches between logs.
    auto_reset : bool, optional
        Whether to clear the metric's local statistics after each log.

    Returns
    -------
    callable
        ``callback(BatchEndParam)``.
    """

    def _callback(param: Any) -> None:
        if param.nbatch % period == 0 and param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                logging.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name, value)
            if auto_reset:
                param.eval_metric.reset_local()

    return _callback


class Speedometer:
    """A batch-end callback logging samples per second and the training metric every
    ``frequent`` batches.

    Parameters
    ----------
    batch_size : int
        Examples per batch.
    frequent : int, optional
        Batches between logs.
    auto_reset : bool, optional
        Whether to clear the metric's local statistics after each log, so each log shows
        the last ``frequent`` batches only.
    """

    def __init__(self, batch_size: int, frequent: int = 50, auto_reset: bool = True) -> None:
        self.batch_size = batch_size
        self.frequent = frequent
        self.init = False
        self.tic = 0.0
        self.last_count = 0
        self.auto_reset = auto_reset

    def __call__(self, param: Any) -> None:
        count = param.nbatch
        if self.last_count > count:
            # A new epoch: the timer restarts.
            self.init = False
        self.last_count = count
        if not self.init:
            self.init = True
            self.tic = time.time()
            return
        if count % self.frequent != 0:
            return
        try:
            speed = self.frequent * self.batch_size / (time.time() - self.tic)
        except ZeroDivisionError:
            speed = float("inf")
        if param.eval_metric is not None:
            name_value = param.eval_metric.get_name_value()
            flat = [x for pair in name_value for x in pair]
            if self.auto_reset:
                param.eval_metric.reset_local()
                msg = "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" * len(name_value)
                logging.info(msg, param.epoch, count - self.frequent, count, speed, *flat)
            else:
                msg = "Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" * len(name_value)
                logging.info(msg, param.epoch, count, speed, *flat)
        else:
            logging.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, count, speed)
        self.tic = time.time()


class ProgressBar:
    """A batch-end callback logging a text progress bar of the epoch.

    Parameters
    ----------
    total : int
        Batches per epoch.
    length : int, optional
        Characters in the bar.
    """

    def __init__(self, total: int, length: int = 80) -> None:
        self.bar_len = length
        self.total = total

    def __call__(self, param: Any) -> None:
        count = param.nbatch
        filled_len = int(round(self.bar_len * count / float(self.total)))
        percents = math.ceil(100.0 * count / float(self.total))
        prog_bar = "=" * filled_len + "-" * (self.bar_len - filled_len)
        logging.info("[%s] %s%s\r", prog_bar, percents, "%")


class LogValidationMetricsCallback:
    """An end-of-evaluation callback logging the validation metric."""

    def __call__(self, param: Any) -> None:
        if not param.eval_metric:
            return
        for name, value in param.eval_metric.get_name_value():
            logging.info("Epoch[%d] Validation-%s=%f", param.epoch, name, value)

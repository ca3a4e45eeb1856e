"""Checkpoints of models built from ``mx.rnn`` cells.

Fused and stacked-gate weights are saved unpacked (one array per gate, layer and
direction, named as the unfused cells name them) and packed again on loading, so a
checkpoint does not depend on whether the cells were fused, as in MXNet.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..model import load_checkpoint, save_checkpoint
from .rnn_cell import BaseRNNCell

__all__ = ["rnn_unroll", "save_rnn_checkpoint", "load_rnn_checkpoint", "do_rnn_checkpoint"]


def _as_cells(cells: Any) -> list:
    return [cells] if isinstance(cells, BaseRNNCell) else list(cells)


def rnn_unroll(
    cell: BaseRNNCell,
    length: int,
    inputs: Any = None,
    begin_state: list | None = None,
    input_prefix: str = "",
    layout: str = "NTC",
) -> tuple[Any, list]:
    """Deprecated: ``cell.unroll(length, inputs, begin_state, layout)``; ``input_prefix``
    is not used."""
    warnings.warn("rnn_unroll is deprecated. Please call cell.unroll directly.", stacklevel=2)
    return cell.unroll(length=length, inputs=inputs, begin_state=begin_state, layout=layout)


def save_rnn_checkpoint(
    cells: Any, prefix: str, epoch: int, symbol: Any, arg_params: dict, aux_params: dict
) -> None:
    """Writes a checkpoint (``prefix-symbol.json`` and ``prefix-EPOCH.params``) with
    the cells' weights unpacked.

    Parameters
    ----------
    cells : BaseRNNCell or list of BaseRNNCell
        The cells of the model.
    prefix : str
        The checkpoint's file prefix.
    epoch : int
        The epoch number in the parameter file's name.
    symbol : Symbol
        The model's symbol.
    arg_params, aux_params : dict of str to NDArray
        The model's parameters and auxiliary states.
    """
    for cell in _as_cells(cells):
        arg_params = cell.unpack_weights(arg_params)
    save_checkpoint(prefix, epoch, symbol, arg_params, aux_params)


def load_rnn_checkpoint(cells: Any, prefix: str, epoch: int) -> tuple[Any, dict, dict]:
    """Reads a checkpoint written by ``save_rnn_checkpoint``, packing the cells' weights.

    Parameters
    ----------
    cells : BaseRNNCell or list of BaseRNNCell
        The cells of the model.
    prefix : str
        The checkpoint's file prefix.
    epoch : int
        The epoch to load.

    Returns
    -------
    symbol : Symbol
    arg_params : dict of str to NDArray
    aux_params : dict of str to NDArray
    """
    sym, arg, aux = load_checkpoint(prefix, epoch)
    for cell in _as_cells(cells):
        arg = cell.pack_weights(arg)
    return sym, arg, aux


def do_rnn_checkpoint(cells: Any, prefix: str, period: int = 1) -> Callable[..., None]:
    """An epoch-end callback for ``Module.fit`` that saves an RNN checkpoint every
    ``period`` epochs.

    Parameters
    ----------
    cells : BaseRNNCell or list of BaseRNNCell
        The cells of the model.
    prefix : str
        The checkpoint's file prefix.
    period : int, optional
        Epochs between checkpoints (at least 1).

    Returns
    -------
    callable
        ``callback(iter_no, sym, arg, aux)``.
    """
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            save_rnn_checkpoint(cells, prefix, iter_no + 1, sym, arg, aux)

    return _callback

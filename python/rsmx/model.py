"""Checkpoints in MXNet's layout: ``prefix-symbol.json`` and ``prefix-EPOCH.params``."""

from __future__ import annotations

import logging

from . import ndarray as nd
from . import symbol as sym
from .context import cpu

__all__ = ["save_checkpoint", "load_checkpoint", "load_params"]


def save_checkpoint(prefix: str, epoch: int, symbol, arg_params: dict, aux_params: dict,
                    remove_amp_cast: bool = True) -> None:
    """Writes ``prefix-symbol.json`` (when ``symbol`` is given) and
    ``prefix-%04d.params`` with ``arg:``/``aux:`` prefixed names."""
    if symbol is not None:
        symbol.save(f"{prefix}-symbol.json", remove_amp_cast=remove_amp_cast)
    save_dict = {f"arg:{k}": v.as_in_context(cpu()) for k, v in arg_params.items()}
    save_dict.update({f"aux:{k}": v.as_in_context(cpu()) for k, v in aux_params.items()})
    param_name = f"{prefix}-{epoch:04d}.params"
    nd.save(param_name, save_dict)
    logging.info('Saved checkpoint to "%s"', param_name)


def load_params(prefix: str, epoch: int) -> tuple[dict, dict]:
    """``(arg_params, aux_params)`` from ``prefix-%04d.params``."""
    save_dict = nd.load(f"{prefix}-{epoch:04d}.params")
    arg_params, aux_params = {}, {}
    if not save_dict:
        logging.warning("Params file '%s' is empty", f"{prefix}-{epoch:04d}.params")
        return arg_params, aux_params
    for k, v in save_dict.items():
        tp, _, name = k.partition(":")
        if tp == "arg":
            arg_params[name] = v
        elif tp == "aux":
            aux_params[name] = v
    return arg_params, aux_params


def load_checkpoint(prefix: str, epoch: int):
    """``(symbol, arg_params, aux_params)`` of a checkpoint."""
    symbol = sym.load(f"{prefix}-symbol.json")
    arg_params, aux_params = load_params(prefix, epoch)
    return symbol, arg_params, aux_params

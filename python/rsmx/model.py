"""Checkpoints in MXNet's layout (``prefix-symbol.json`` and ``prefix-EPOCH.params``)
and the training helpers modules use: choosing and filling the kvstore, and updating
parameters on it or through an updater."""

from __future__ import annotations

import logging
import os

import numpy as np

from . import kvstore as kvs
from . import ndarray as nd
from . import symbol as sym
from .callback import BatchEndParam
from .context import cpu

__all__ = ["save_checkpoint", "load_checkpoint", "load_params", "BatchEndParam", "FeedForward"]


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


# ---------------------------------------------------------------------- training helpers
def _create_kvstore(kvstore, num_device: int, arg_params: dict) -> tuple:
    """The kvstore to train with and whether it runs the updates.

    Parameters
    ----------
    kvstore : KVStore, str or None
        A kvstore, or the type of one to create. A non-distributed type with a single
        device gives no kvstore at all.
    num_device : int
        How many devices train.
    arg_params : dict of str to NDArray
        The parameters; with a ``'local'`` kvstore, one above 16M elements keeps the
        updates off the kvstore.

    Returns
    -------
    (KVStore or None, bool)
        The kvstore and ``update_on_kvstore`` (which ``MXNET_UPDATE_ON_KVSTORE=0`` turns
        off, and which is off without a kvstore or when the kvstore cannot run optimizers).
    """
    update_on_kvstore = bool(int(os.getenv("MXNET_UPDATE_ON_KVSTORE", "1")))
    if kvstore is None:
        kv = None
    elif isinstance(kvstore, kvs.KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and "dist" not in kvstore:
            kv = None
        else:
            kv = kvs.create(kvstore)
            if kvstore == "local" and arg_params:
                max_size = max(int(np.prod(p.shape)) for p in arg_params.values())
                if max_size > 1024 * 1024 * 16:
                    update_on_kvstore = False
    else:
        raise TypeError("kvstore must be KVStore, str or None")
    if kv is None:
        update_on_kvstore = False
    else:
        update_on_kvstore = update_on_kvstore and bool(
            kv.is_capable(kvs.KVStoreBase.OPTIMIZER))
    return kv, update_on_kvstore


def _initialize_kvstore(kvstore, param_arrays: list, arg_params: dict, param_names: list,
                        update_on_kvstore: bool) -> None:
    """Puts the initial parameters into ``kvstore``; when it runs the updates, the devices'
    copies are set from it too."""
    for idx, param_on_devs in enumerate(param_arrays):
        name = param_names[idx]
        if update_on_kvstore:
            kvstore.broadcast(name, arg_params[name], out=param_on_devs)
        else:
            kvstore.init(name, arg_params[name])


def _update_params_on_kvstore(param_arrays: list, grad_arrays: list, kvstore,
                              param_names: list) -> None:
    """Pushes each parameter's gradients (one per device) to ``kvstore``, which sums them
    and updates, and pulls the new weights back to every device.

    rsmx's own store gets every parameter in one ``pushpull`` with one priority per key
    (``-index``, so the first layers' weights are ready first); it updates the keys in the
    order they were initialized, as one call per key would. Other stores get one call per
    parameter with priority ``-index``, as in MXNet.
    """
    if type(kvstore) is kvs.KVStore:
        keys, grads, outs, prios = [], [], [], []
        for index, (name, arg_list, grad_list) in enumerate(
                zip(param_names, param_arrays, grad_arrays, strict=False)):
            if grad_list[0] is not None:
                keys.append(name)
                grads.append(grad_list)
                outs.append(arg_list)
                prios.append(-index)
        if keys:
            kvstore.pushpull(keys, grads, out=outs, priority=prios)
        return
    for index, (arg_list, grad_list) in enumerate(zip(param_arrays, grad_arrays, strict=True)):
        if grad_list[0] is None:
            continue
        kvstore.pushpull(param_names[index], grad_list, out=arg_list, priority=-index)


def _update_params(param_arrays: list, grad_arrays: list, updater, num_device: int,
                   kvstore=None, param_names: list | None = None) -> None:
    """Updates each device's parameters with ``updater``; with a kvstore the gradients
    are summed over devices first. Device ``k``'s copy of parameter ``i`` is index
    ``i * num_device + k`` for the updater, so each copy has its own optimizer state."""
    updates: list[list] = [[] for _ in range(num_device)]
    for index, (arg_list, grad_list) in enumerate(zip(param_arrays, grad_arrays, strict=True)):
        if grad_list[0] is None:
            continue
        if kvstore:
            kvstore.pushpull(param_names[index], grad_list, priority=-index)
        for k, (w, g) in enumerate(zip(arg_list, grad_list, strict=True)):
            updates[k].append((index * num_device + k, g, w))
    for dev_updates in updates:
        if dev_updates:
            indices, grads, weights = zip(*dev_updates, strict=True)
            updater(list(indices), list(grads), list(weights))


# Last: FeedForward builds on the helpers above.
from .feedforward import FeedForward  # noqa: E402

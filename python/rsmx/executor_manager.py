"""The older data-parallel executor classes that ``mx.model`` trains with.

``DataParallelExecutorManager`` owns one ``DataParallelExecutorGroup`` per bucket; each
group binds one executor per device and feeds it its slice of every batch. The helpers
here (``_split_input_slice``, ``_check_arguments``, ``_load_data``, ``_load_label``,
``_bind_exec``) are shared with ``rsmx.module``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from . import ndarray as nd
from .base import MXNetValueError
from .context import Context, cpu
from .executor import _view_of
from .io import DataDesc
from .ndarray import NDArray
from .ndarray.ndarray import mx_real_t

__all__ = ["DataParallelExecutorGroup", "DataParallelExecutorManager"]


def _split_input_slice(batch_size: int, work_load_list: list) -> list[slice]:
    """Splits ``range(batch_size)`` into one contiguous slice per device.

    Parameters
    ----------
    batch_size : int
        The number of samples in a mini-batch.
    work_load_list : list of float or int
        Each device's share of the work; shares are proportional to these numbers.

    Returns
    -------
    list of slice
        One slice per device, in device order; rounding leftovers go to the last device.

    Raises
    ------
    ValueError
        When some device would get an empty slice.
    """
    total = sum(work_load_list)
    counts = [round(w * batch_size / total) for w in work_load_list]
    shortfall = batch_size - sum(counts)
    if shortfall > 0:
        counts[-1] += shortfall
    slices = []
    end = 0
    for count in counts:
        begin = int(min(end, batch_size))
        end = int(min(begin + count, batch_size))
        if begin >= end:
            raise MXNetValueError("Too many slices. Some splits are empty.")
        slices.append(slice(begin, end))
    return slices


def _check_arguments(symbol) -> None:
    """Raises ``ValueError`` when ``symbol`` has two arguments, or two auxiliary states,
    with the same name.

    Parameters
    ----------
    symbol : Symbol
        The network to check.
    """
    arg_names = symbol.list_arguments()
    seen: set[str] = set()
    for name in arg_names:
        if name in seen:
            raise MXNetValueError(
                f'Find duplicated argument name "{name}", please make the weight name '
                f"non-duplicated(using name arguments), arguments are {arg_names}"
            )
        seen.add(name)
    aux_names = symbol.list_auxiliary_states()
    seen = set()
    for name in aux_names:
        if name in seen:
            raise MXNetValueError(
                f'Find duplicated auxiliary param name "{name}", please make the weight '
                f"name non-duplicated(using name arguments), arguments are {arg_names}, "
                f"auxiliary params are {aux_names}"
            )
        seen.add(name)


def _load_general(data: list, targets: list) -> None:
    """Copies each source array into its targets: a single array, or ``(slice, array)``
    pairs that each receive their rows of the source."""
    for src, dsts in zip(data, targets, strict=False):
        if isinstance(dsts, NDArray):
            src.copyto(dsts)
            continue
        expected = dsts[-1][0].stop
        if expected != src.shape[0]:
            raise MXNetValueError(
                f"Batch size miss match. Expected {expected}, got {src.shape[0]}"
            )
        for islice, dst in dsts:
            src[islice].copyto(dst)


def _load_data(batch, targets: list) -> None:
    """Copies ``batch.data`` into the sliced ``targets``."""
    _load_general(batch.data, targets)


def _load_label(batch, targets: list) -> None:
    """Copies ``batch.label`` into the sliced ``targets``."""
    _load_general(batch.label, targets)


def _bind_exec(sym, ctx: Context, input_shapes: dict, param_names: list, need_grad: Any = False,
               base_exec=None, shared_data_arrays: dict | None = None,
               input_types: dict | None = None, logger=logging):
    """Binds ``sym`` on ``ctx`` for ``input_shapes``, taking the parameters (and their
    gradients) of ``base_exec`` and the input memory of ``shared_data_arrays`` when given.

    Parameters
    ----------
    sym : Symbol
        The network.
    ctx : Context
        Where to bind.
    input_shapes : dict of str to tuple
        Shapes of the data and label inputs.
    param_names : list of str
        Names of the trainable parameters.
    need_grad : bool or set of str
        ``True``: gradients for every argument that is not an input; a set: for those
        names; ``False``: none.
    base_exec : Executor, optional
        An executor whose parameters, gradients and auxiliary states are reused.
    shared_data_arrays : dict of str to NDArray, optional
        Input arrays by name, reused (reshaped) when large enough and updated otherwise.
    input_types : dict of str to dtype, optional
        Input types; float32 by default.
    logger : Logger
        Where re-allocation warnings go.

    Returns
    -------
    Executor
    """
    arg_shapes, _, aux_shapes = sym.infer_shape(**input_shapes)
    if arg_shapes is None:
        raise MXNetValueError(f"shape inference failed for {input_shapes}")
    if input_types is None:
        input_types = {k: mx_real_t for k in input_shapes}
    arg_types, _, aux_types = sym.infer_type(**input_types)
    if arg_types is None:
        raise MXNetValueError(f"type inference failed for {input_types}")
    arg_names = sym.list_arguments()
    if need_grad is False:
        grad_set: set[str] = set()
    elif need_grad is True:
        grad_set = set(arg_names) - set(input_shapes)
    elif isinstance(need_grad, set):
        grad_set = need_grad
    else:
        raise MXNetValueError("need_grad must be boolean or set.")
    grad_req = {name: ("write" if name in grad_set else "null") for name in arg_names}
    grad_arrays: dict | None = {} if grad_set else None

    arg_arrays = []
    for name, shape, dtype in zip(arg_names, arg_shapes, arg_types, strict=True):
        if name not in param_names:
            arg_arrays.append(_shared_input(name, shape, dtype, ctx, shared_data_arrays, logger))
            continue
        if base_exec is None:
            arr = nd.zeros(shape, ctx, dtype=dtype)
            if name in grad_set:
                grad_arrays[name] = nd.zeros(shape, ctx, dtype=dtype)
        else:
            arr = base_exec.arg_dict[name]
            if arr.shape != shape or np.dtype(arr.dtype) != np.dtype(dtype):
                raise MXNetValueError(
                    f"parameter '{name}' is {arr.shape} {np.dtype(arr.dtype).name} in the "
                    f"shared executor, needed {shape} {np.dtype(dtype).name}"
                )
            if name in grad_set:
                grad_arrays[name] = base_exec.grad_dict[name]
        arg_arrays.append(arr)

    if base_exec is None:
        aux_arrays = [nd.zeros(s, ctx, dtype=t) for s, t in zip(aux_shapes, aux_types, strict=True)]
    else:
        for shape, arr in zip(aux_shapes, base_exec.aux_arrays, strict=True):
            if shape != arr.shape:
                raise MXNetValueError(
                    f"auxiliary state shape {shape} differs from the shared {arr.shape}"
                )
        aux_arrays = list(base_exec.aux_arrays)
    return sym.bind(ctx=ctx, args=arg_arrays, args_grad=grad_arrays, aux_states=aux_arrays,
                    grad_req=grad_req, shared_exec=base_exec)


def _shared_input(name: str, shape: tuple, dtype: Any, ctx: Context, shared: dict | None,
                  logger) -> NDArray:
    """An input array for ``name``: a reshaped view of ``shared[name]`` when it is large
    enough, otherwise a new array (which then replaces it in ``shared``)."""
    if shared is not None and name in shared:
        arr = shared[name]
        if arr.size >= int(np.prod(shape, dtype=np.int64)):
            if np.dtype(arr.dtype) != np.dtype(dtype):
                raise MXNetValueError(
                    f"shared input '{name}' is {np.dtype(arr.dtype).name}, needed "
                    f"{np.dtype(dtype).name}"
                )
            return _view_of(arr, shape)
        logger.warning(
            'bucketing: data "%s" has a shape %s, which is larger than already allocated '
            "shape %s. Need to re-allocate. Consider putting default_bucket_key to be the "
            "bucket taking the largest input for better memory sharing.",
            name, shape, arr.shape,
        )
    arr = nd.zeros(shape, ctx, dtype=dtype)
    if shared is not None:
        shared[name] = arr
    return arr


def _provided(train_data, attr: str) -> list:
    return list(getattr(train_data, attr, None) or [])


class DataParallelExecutorGroup:
    """One executor per device for a symbol, each fed its slice of every batch.

    Parameters
    ----------
    sym : Symbol
        The network.
    arg_names : list of str
        ``sym.list_arguments()``.
    param_names : list of str
        The trainable parameters.
    ctx : list of Context
        The devices.
    slices : list of slice
        Which rows of a batch each device gets.
    train_data : DataIter or DataBatch
        Anything with ``provide_data`` and ``provide_label``; only shapes are read.
    shared_group : DataParallelExecutorGroup, optional
        A group (another bucket) whose parameters and input memory are reused.
    """

    def __init__(self, sym, arg_names: list, param_names: list, ctx: list, slices: list,
                 train_data, shared_group: DataParallelExecutorGroup | None = None):
        _check_arguments(sym)
        if shared_group is None:
            self.shared_data_arrays: list[dict] = [{} for _ in ctx]
        else:
            self.shared_data_arrays = shared_group.shared_data_arrays
        provide_data = _provided(train_data, "provide_data")
        provide_label = _provided(train_data, "provide_label")
        self.data_names = [x[0] for x in provide_data]
        self.label_names = [x[0] for x in provide_label]
        self.aux_names = sym.list_auxiliary_states()
        self.param_idx = [i for i, n in enumerate(arg_names) if n in param_names]
        self.param_names = [arg_names[i] for i in self.param_idx]

        self.train_execs = []
        for i, ctxi in enumerate(ctx):
            shapes, types = {}, {}
            rows = slices[i].stop - slices[i].start
            for desc in provide_data + provide_label:
                shapes[desc[0]] = (rows, *tuple(desc[1][1:]))
                types[desc[0]] = desc.dtype if isinstance(desc, DataDesc) else mx_real_t
            base = None if shared_group is None else shared_group.train_execs[i]
            self.train_execs.append(_bind_exec(
                sym, ctxi, shapes, self.param_names, need_grad=True, base_exec=base,
                shared_data_arrays=self.shared_data_arrays[i], input_types=types))

        execs = self.train_execs
        self.data_arrays = [[(slices[i], e.arg_dict[n]) for i, e in enumerate(execs)]
                            for n in self.data_names]
        self.label_arrays = [[(slices[i], e.arg_dict[n]) for i, e in enumerate(execs)]
                             for n in self.label_names]
        self.param_arrays = [[e.arg_arrays[i] for e in execs] for i in self.param_idx]
        self.grad_arrays = [[e.grad_arrays[i] for e in execs] for i in self.param_idx]
        self.aux_arrays = [[e.aux_arrays[i] for e in execs] for i in range(len(self.aux_names))]
        self.slices = slices

    def load_data_batch(self, data_batch) -> None:
        """Copies the batch's data and labels into each device's slice."""
        _load_data(data_batch, self.data_arrays)
        _load_label(data_batch, self.label_arrays)

    def forward(self, is_train: bool = False) -> None:
        """Runs forward on every device."""
        for texec in self.train_execs:
            texec.forward(is_train=is_train)

    def backward(self) -> None:
        """Runs backward on every device."""
        for texec in self.train_execs:
            texec.backward()

    def update_metric(self, metric, labels: list, pre_sliced: bool = False) -> None:
        """Updates ``metric`` with each device's outputs and its rows of ``labels``
        (or, with ``pre_sliced``, ``labels[device]``)."""
        for k, (texec, islice) in enumerate(zip(self.train_execs, self.slices, strict=True)):
            labels_slice = labels[k] if pre_sliced else [label[islice] for label in labels]
            metric.update(labels_slice, texec.outputs)


def _average_into(names: list, blocks: list, targets: dict) -> None:
    """Writes the mean over devices of each block into ``targets[name]``."""
    for name, block in zip(names, blocks, strict=False):
        weight = sum(w.copyto(cpu()) for w in block) / len(block)
        weight.astype(targets[name].dtype).copyto(targets[name])


class DataParallelExecutorManager:
    """Runs a symbol data-parallel over several devices, with one executor group per
    bucket when ``sym_gen`` is given.

    Parameters
    ----------
    symbol : Symbol
        The network.
    ctx : list of Context
        The devices.
    train_data : DataIter
        The training data; its ``batch_size`` and shapes decide the binding.
    arg_names : list of str
        All arguments of the network.
    param_names : list of str
        The trainable parameters.
    aux_names : list of str
        The auxiliary states.
    work_load_list : list of float or int, optional
        Each device's share of a batch; equal shares by default.
    logger : Logger, optional
        ``logging`` by default.
    sym_gen : callable, optional
        ``sym_gen(bucket_key)`` gives the symbol of a bucket.
    """

    def __init__(self, symbol, ctx: list, train_data, arg_names: list, param_names: list,
                 aux_names: list, work_load_list: list | None = None, logger=None,
                 sym_gen=None):
        if logger is None:
            logger = logging
        num_device = len(ctx)
        logger.info("Start training with %s", str(ctx))
        if work_load_list is None:
            work_load_list = [1] * num_device
        if not isinstance(work_load_list, list) or len(work_load_list) != num_device:
            raise MXNetValueError("Invalid settings for work load. ")
        self.slices = _split_input_slice(train_data.batch_size, work_load_list)
        self.arg_names = arg_names
        self.param_names = param_names
        self.aux_names = aux_names
        self.ctx = ctx
        self.execgrp = DataParallelExecutorGroup(symbol, arg_names, param_names, ctx,
                                                 self.slices, train_data)
        self.symbol = symbol
        self.sym_gen = sym_gen
        self.curr_execgrp: DataParallelExecutorGroup | None = None
        if sym_gen is not None:
            self.execgrp_bucket = {train_data.default_bucket_key: self.execgrp}

    def install_monitor(self, monitor) -> None:
        """Installs ``monitor`` on every executor (not supported with buckets)."""
        if self.sym_gen is not None:
            raise NotImplementedError("Monitoring is not implemented for bucketing")
        for train_exec in self.execgrp.train_execs:
            monitor.install(train_exec)

    def set_params(self, arg_params: dict, aux_params: dict) -> None:
        """Copies parameter and auxiliary values to every executor.

        Parameters
        ----------
        arg_params : dict of str to NDArray
            Parameter values.
        aux_params : dict of str to NDArray
            Auxiliary state values.
        """
        for texec in self.execgrp.train_execs:
            texec.copy_params_from(arg_params, aux_params)

    def copy_to(self, arg_params: dict, aux_params: dict) -> None:
        """Writes the devices' mean of each parameter and auxiliary state into the arrays
        of ``arg_params`` and ``aux_params`` (in place).

        Parameters
        ----------
        arg_params : dict of str to NDArray
            Target parameter arrays.
        aux_params : dict of str to NDArray
            Target auxiliary arrays.
        """
        _average_into(self.param_names, self.param_arrays, arg_params)
        _average_into(self.aux_names, self.aux_arrays, aux_params)

    @property
    def param_arrays(self) -> list:
        """Parameter arrays, one list of per-device arrays per parameter."""
        return self.execgrp.param_arrays

    @property
    def grad_arrays(self) -> list:
        """Gradient arrays, one list of per-device arrays per parameter."""
        return self.execgrp.grad_arrays

    @property
    def aux_arrays(self) -> list:
        """Auxiliary state arrays, one list of per-device arrays per state."""
        return self.execgrp.aux_arrays

    def load_data_batch(self, data_batch) -> None:
        """Selects (binding on first sight) the batch's bucket and loads the batch."""
        if self.sym_gen is not None:
            key = data_batch.bucket_key
            if key not in self.execgrp_bucket:
                self.execgrp_bucket[key] = DataParallelExecutorGroup(
                    self.sym_gen(key), self.arg_names, self.param_names, self.ctx,
                    self.slices, data_batch, shared_group=self.execgrp)
            self.curr_execgrp = self.execgrp_bucket[key]
        else:
            self.curr_execgrp = self.execgrp
        self.curr_execgrp.load_data_batch(data_batch)

    def forward(self, is_train: bool = False) -> None:
        """Runs forward with the current group."""
        self.curr_execgrp.forward(is_train=is_train)

    def backward(self) -> None:
        """Runs backward with the current group."""
        self.curr_execgrp.backward()

    def update_metric(self, metric, labels: list, pre_sliced: bool = False) -> None:
        """Updates ``metric`` with the current group's outputs."""
        self.curr_execgrp.update_metric(metric, labels, pre_sliced)

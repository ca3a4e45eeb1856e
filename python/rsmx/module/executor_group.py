"""``DataParallelExecutorGroup``: one executor per device, each running its slice of every
batch, with the parameters averaged back when read."""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from typing import Any

import numpy as np

from .. import context as ctx
from .. import ndarray as nd
from ..base import MXNetValueError
from ..executor_manager import _split_input_slice
from ..io import DataDesc
from ..ndarray import NDArray
from ..ndarray.ndarray import _FLAG_TYPES

__all__ = ["DataParallelExecutorGroup", "BatchShapeError"]


class BatchShapeError(MXNetValueError, AssertionError):
    """A batch, label or state array whose shape is not the one the executors were bound
    for. It is also an ``AssertionError``, the error MXNet raises in these places."""


def _as_array(x: Any) -> NDArray:
    return x if isinstance(x, NDArray) else nd.array(x)


def _load_general(data: list, targets: list, major_axis: list) -> None:
    """Copies source arrays into their targets.

    ``targets[k]`` is an NDArray (copied whole), or, for a source that is a list (one array
    per device), the list of device arrays, or a list of ``(slice, array)`` pairs: each
    device array gets its slice of the source along ``major_axis[k]`` (the whole source
    when that axis is negative).
    """
    for src, dsts, axis in zip(data, targets, major_axis, strict=False):
        if isinstance(dsts, NDArray):
            _as_array(src).copyto(dsts)
        elif isinstance(src, (list, tuple)):
            for s, d in zip(src, dsts, strict=False):
                _as_array(s).copyto(d)
        else:
            src = _as_array(src)
            for islice, dst in dsts:
                if axis < 0 or (islice.start == 0 and islice.stop == src.shape[axis]):
                    src.copyto(dst)
                elif axis == 0:
                    src[islice.start:islice.stop].copyto(dst)
                else:
                    part = nd.slice_axis(src, axis=axis, begin=islice.start, end=islice.stop)
                    part.copyto(dst)


def _load_data(batch: Any, targets: list, major_axis: list) -> None:
    """Loads ``batch.data`` (or, for a list of batches, one batch per device) into the
    device arrays."""
    if isinstance(batch, list):
        per_input = [[b.data[i] for b in batch] for i in range(len(targets))]
        _load_general(per_input, [[d for _, d in t] for t in targets], major_axis)
    else:
        _load_general(batch.data, targets, major_axis)


def _load_label(batch: Any, targets: list, major_axis: list) -> None:
    """Loads ``batch.label`` (or, for a list of batches, one batch per device) into the
    device arrays."""
    if isinstance(batch, list):
        per_input = [[b.label[i] for b in batch] for i in range(len(targets))]
        _load_general(per_input, [[d for _, d in t] for t in targets], major_axis)
    else:
        _load_general(batch.label, targets, major_axis)


def _merge_multi_context(outputs: list, major_axis: list) -> list:
    """Joins per-device arrays along their batch axis so they look like one executor's;
    for a negative axis (no batch axis) the first device's array is returned."""
    merged = []
    for tensors, axis in zip(outputs, major_axis, strict=False):
        if axis >= 0 and len(tensors) > 1:
            first = tensors[0].context
            merged.append(nd.concat(*[t.as_in_context(first) for t in tensors], dim=axis))
        else:
            merged.append(tensors[0])
    return merged


def _prepare_group2ctxs(group2ctxs: Any, ctx_len: int) -> list:
    """One ``ctx_group`` to Context dict per device, from a dict (values: a context, or
    one or ``ctx_len`` contexts) or a list of dicts."""
    if group2ctxs is None:
        return [None] * ctx_len
    if isinstance(group2ctxs, list):
        if len(group2ctxs) != ctx_len:
            raise MXNetValueError(f"length of group2ctxs should be {ctx_len}")
        return group2ctxs
    if isinstance(group2ctxs, dict):
        ret: list[dict] = [{} for _ in range(ctx_len)]
        for group, value in group2ctxs.items():
            if isinstance(value, ctx.Context):
                ctxs = [value] * ctx_len
            elif len(value) == 1:
                ctxs = list(value) * ctx_len
            elif len(value) == ctx_len:
                ctxs = list(value)
            else:
                raise MXNetValueError(f"length of group2ctxs[{group}] should be {ctx_len} or 1")
            for i in range(ctx_len):
                ret[i][group] = ctxs[i]
        return ret
    raise MXNetValueError(
        "group2ctxs should be list of dict of str to context, or dict of str to context "
        "or list of context"
    )


def _as_descs(shapes: Any) -> list | None:
    if shapes is None:
        return None
    return [x if isinstance(x, DataDesc) else DataDesc(*x) for x in shapes]


def _reqs(grad_req: Any, arg_names: list, param_names: list, fixed: list, data_names: list,
          inputs_need_grad: bool) -> dict:
    """The per-argument gradient requests: parameters get ``grad_req`` unless fixed, data
    inputs only when ``inputs_need_grad``, anything else none."""
    if isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(arg_names):
            raise MXNetValueError(
                f"grad_req has {len(grad_req)} entries for {len(arg_names)} arguments"
            )
        return dict(zip(arg_names, grad_req, strict=True))
    if isinstance(grad_req, str):
        default = grad_req
    elif isinstance(grad_req, dict):
        default = "write"
    else:
        raise MXNetValueError("grad_req must be one of str, list, tuple, or dict.")
    reqs = {}
    for name in arg_names:
        if name in param_names:
            reqs[name] = "null" if name in fixed else default
        elif name in data_names:
            reqs[name] = default if inputs_need_grad else "null"
        else:
            reqs[name] = "null"
    if isinstance(grad_req, dict):
        reqs.update(grad_req)
    return reqs


class DataParallelExecutorGroup:
    """Executors of one symbol on several devices, splitting each batch between them.

    Parameters
    ----------
    symbol : Symbol
        The graph every executor runs.
    contexts : list of Context
        The devices.
    workload : list of number, or None
        Relative share of each device in a batch; equal shares when ``None``.
    data_shapes : list of (str, tuple) or DataDesc
        The data inputs with whole-batch shapes, in the order the data iterator gives them.
    label_shapes : list of (str, tuple) or DataDesc, or None
        The label inputs, likewise.
    param_names : list of str
        The parameters (weights, biases...) of the graph.
    for_training : bool
        Whether to allocate gradients and run backward.
    inputs_need_grad : bool
        Whether the data inputs get gradients too.
    shared_group : DataParallelExecutorGroup, optional
        A group of another bucket: its parameter arrays, gradients and input memory are
        reused (a symbol with the same parameters, e.g. an RNN unrolled to another length).
    logger : Logger
        ``logging`` by default.
    fixed_param_names : list of str, optional
        Parameters that get no gradient (and no gradient memory).
    grad_req : str, list of str or dict of str to str
        ``'write'``, ``'add'`` or ``'null'``: for every parameter (str), per argument (list),
        or overriding the defaults by name (dict).
    state_names : list of str, optional
        Inputs that are neither data nor labels nor parameters, set with ``set_states``.
    group2ctxs : dict or list of dict, optional
        Maps ``ctx_group`` attributes to devices (per device for a list).
    """

    def __init__(self, symbol, contexts: list, workload: list | None, data_shapes: list,
                 label_shapes: list | None, param_names: list, for_training: bool,
                 inputs_need_grad: bool, shared_group: DataParallelExecutorGroup | None = None,
                 logger=logging, fixed_param_names: list | None = None, grad_req: Any = "write",
                 state_names: list | None = None, group2ctxs: Any = None):
        self.param_names = param_names
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.symbol = symbol
        self.contexts = contexts
        self.workload = workload if workload is not None else [1] * len(contexts)
        self.group2ctxs = _prepare_group2ctxs(group2ctxs, len(contexts))
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.logger = logger
        self._total_exec_bytes = 0
        self.fixed_param_names = fixed_param_names if fixed_param_names is not None else []
        self.state_names = state_names if state_names is not None else []
        if not for_training:
            grad_req = "null"
        data_shapes = _as_descs(data_shapes)
        label_shapes = _as_descs(label_shapes)
        self.grad_req = _reqs(grad_req, self.arg_names, param_names, self.fixed_param_names,
                              [x.name for x in data_shapes], inputs_need_grad)
        if shared_group is not None:
            self.shared_data_arrays = shared_group.shared_data_arrays
        else:
            self.shared_data_arrays = [{} for _ in contexts]

        self.batch_size: int | None = None
        self.slices: list[slice] | None = None
        self.execs: list = []
        self._default_execs: list | None = None
        self.data_arrays = None
        self.label_arrays = None
        self.param_arrays = None
        self.state_arrays = None
        self.grad_arrays = None
        self.aux_arrays = None
        self.input_grad_arrays = None
        self.data_shapes = None
        self.label_shapes = None
        self.data_names = None
        self.label_names = None
        self.data_layouts = None
        self.label_layouts = None
        self.output_names = symbol.list_outputs()
        self.num_outputs = len(self.output_names)
        self.output_layouts = [DataDesc.get_batch_axis(symbol[i].attr("__layout__"))
                               for i in range(self.num_outputs)]
        self.bind_exec(data_shapes, label_shapes, shared_group)

    # ------------------------------------------------------------------ binding
    def decide_slices(self, data_shapes: list) -> list[int]:
        """Finds each input's batch axis and, on first sight of a batch size, splits the
        batch between the devices by ``workload`` (into ``self.slices``).

        Parameters
        ----------
        data_shapes : list of DataDesc
            Data or label descriptions; all must agree on the batch size.

        Returns
        -------
        list of int
            The batch axis of each input (-1: none, the input goes whole to every device).
        """
        if len(data_shapes) == 0:
            raise MXNetValueError("decide_slices needs at least one input description")
        major_axis = [DataDesc.get_batch_axis(x.layout) for x in data_shapes]
        for (name, shape), axis in zip(data_shapes, major_axis, strict=True):
            if axis == -1:
                continue
            batch_size = shape[axis]
            if self.batch_size is not None:
                if batch_size != self.batch_size:
                    raise BatchShapeError(
                        f"all data must have the same batch size: batch_size = "
                        f"{self.batch_size}, but {name} has shape {shape}"
                    )
            else:
                self.batch_size = batch_size
                self.slices = _split_input_slice(self.batch_size, self.workload)
        return major_axis

    def _collect_arrays(self) -> None:
        """Gathers the executors' arrays into the per-input lists the group works with."""
        execs = self.execs
        slices = self.slices or [slice(i, i + 1) for i in range(len(execs))]
        self.data_arrays = [[(slices[i], e.arg_dict[name]) for i, e in enumerate(execs)]
                            for name, _ in self.data_shapes]
        self.state_arrays = [[e.arg_dict[name] for e in execs] for name in self.state_names]
        if self.label_shapes is not None:
            self.label_arrays = [[(slices[i], e.arg_dict[name]) for i, e in enumerate(execs)]
                                 for name, _ in self.label_shapes]
        else:
            self.label_arrays = None
        param_idx = [i for i, n in enumerate(self.arg_names) if n in self.param_names]
        self.param_arrays = [[e.arg_arrays[i] for e in execs] for i in param_idx]
        if self.for_training:
            self.grad_arrays = [[e.grad_arrays[i] for e in execs] for i in param_idx]
        else:
            self.grad_arrays = None
        data_names = [x[0] for x in self.data_shapes]
        if self.inputs_need_grad:
            self.input_grad_arrays = [[e.grad_arrays[self.arg_names.index(n)] for e in execs]
                                      for n in data_names if n in self.arg_names]
        else:
            self.input_grad_arrays = None
        self.aux_arrays = [[e.aux_arrays[i] for e in execs] for i in range(len(self.aux_names))]

    def bind_exec(self, data_shapes: list, label_shapes: list | None,
                  shared_group: DataParallelExecutorGroup | None = None,
                  reshape: bool = False) -> None:
        """Binds one executor per device for the whole-batch ``data_shapes`` and
        ``label_shapes`` (or, with ``reshape``, reshapes the existing ones).

        Parameters
        ----------
        data_shapes : list of DataDesc or (str, tuple)
        label_shapes : list of DataDesc or (str, tuple), or None
        shared_group : DataParallelExecutorGroup, optional
        reshape : bool
        """
        if not reshape and self.execs:
            raise MXNetValueError("executors are already bound; use reshape")
        data_shapes = _as_descs(data_shapes)
        label_shapes = _as_descs(label_shapes)
        self.batch_size = None
        self.data_layouts = self.decide_slices(data_shapes)
        if label_shapes is not None:
            self.label_layouts = self.decide_slices(label_shapes)
        for i in range(len(self.contexts)):
            data_i = self._sliced_shape(data_shapes, i, self.data_layouts)
            label_i = ([] if label_shapes is None
                       else self._sliced_shape(label_shapes, i, self.label_layouts))
            if reshape:
                self.execs[i] = self._default_execs[i].reshape(
                    allow_up_sizing=True, **dict(data_i + label_i))
            else:
                self.execs.append(self._bind_ith_exec(i, data_i, label_i, shared_group))
        self.data_shapes = data_shapes
        self.label_shapes = label_shapes
        self.data_names = [x.name for x in data_shapes]
        if label_shapes is not None:
            self.label_names = [x.name for x in label_shapes]
        self._collect_arrays()

    def reshape(self, data_shapes: list, label_shapes: list | None) -> None:
        """Re-binds for new whole-batch shapes, sharing memory with the first executors
        (nothing happens when the shapes are unchanged).

        Parameters
        ----------
        data_shapes : list of DataDesc or (str, tuple)
        label_shapes : list of DataDesc or (str, tuple), or None
        """
        if data_shapes == self.data_shapes and label_shapes == self.label_shapes:
            return
        if self._default_execs is None:
            self._default_execs = list(self.execs)
        self.bind_exec(data_shapes, label_shapes, reshape=True)

    def _bind_ith_exec(self, i: int, data_shapes: list, label_shapes: list | None,
                       shared_group: DataParallelExecutorGroup | None):
        """Binds the executor of device ``i`` with ``simple_bind``: parameters come from the
        shared group's executor when there is one, inputs from the shared buffer."""
        shared_exec = None if shared_group is None else shared_group.execs[i]
        input_shapes = dict(data_shapes)
        if label_shapes is not None:
            input_shapes.update(dict(label_shapes))
        input_types = {x.name: x.dtype for x in data_shapes}
        attrs = self.symbol.attr_dict()
        for name in self.symbol.list_inputs():
            flag = attrs.get(name, {}).get("__dtype__")
            if name in input_types and flag is not None and flag != "-1":
                input_types[name] = _FLAG_TYPES[int(flag)]
        if label_shapes is not None:
            input_types.update({x.name: x.dtype for x in label_shapes})
        executor = self.symbol.simple_bind(
            ctx=self.contexts[i], grad_req=self.grad_req, type_dict=input_types,
            shared_arg_names=self.param_names, shared_exec=shared_exec,
            group2ctx=self.group2ctxs[i], shared_buffer=self.shared_data_arrays[i],
            **input_shapes)
        found = re.search(r"Total (\d+) MB allocated", executor.debug_str())
        if found:
            self._total_exec_bytes += int(found.group(1))
        return executor

    def _sliced_shape(self, shapes: list, i: int, major_axis: list) -> list:
        """The descriptions of ``shapes`` as device ``i`` sees them: its slice's length on
        each batch axis."""
        sliced = []
        for desc, axis in zip(shapes, major_axis, strict=True):
            shape = list(desc.shape)
            if axis >= 0:
                shape[axis] = self.slices[i].stop - self.slices[i].start
            sliced.append(DataDesc(desc.name, tuple(shape), desc.dtype, desc.layout))
        return sliced

    # ------------------------------------------------------------------ parameters
    def set_params(self, arg_params: dict, aux_params: dict, allow_extra: bool = False) -> None:
        """Copies parameter and auxiliary values to every executor.

        Parameters
        ----------
        arg_params : dict of str to NDArray
        aux_params : dict of str to NDArray
        allow_extra : bool
            Whether names the executors do not have are ignored rather than an error.
        """
        for exec_ in self.execs:
            exec_.copy_params_from(arg_params, aux_params, allow_extra_params=allow_extra)

    def get_params(self, arg_params: dict, aux_params: dict) -> None:
        """Writes the mean over devices of each parameter and auxiliary state into the
        arrays of ``arg_params`` and ``aux_params`` (in place, in their dtypes).

        Parameters
        ----------
        arg_params : dict of str to NDArray
        aux_params : dict of str to NDArray
        """
        names = [n for n in self.arg_names if n in self.param_names]
        for name, block in zip(names, self.param_arrays, strict=True):
            mean = sum(w.copyto(ctx.cpu()) for w in block) / len(block)
            mean.astype(arg_params[name].dtype).copyto(arg_params[name])
        for name, block in zip(self.aux_names, self.aux_arrays, strict=True):
            mean = sum(w.copyto(ctx.cpu()) for w in block) / len(block)
            mean.astype(aux_params[name].dtype).copyto(aux_params[name])

    # ------------------------------------------------------------------ computing
    def _check_inputs(self, what: str, descs: list, arrays: list,
                      device: int | None) -> None:
        """Raises ``BatchShapeError`` unless ``arrays`` match ``descs`` (whole-batch shapes)
        or, for ``device``, that device's bound shapes."""
        if len(arrays) != len(descs):
            raise BatchShapeError(
                f"the batch has {len(arrays)} {what} arrays, the executors were bound for "
                f"{len(descs)} ({', '.join(d.name for d in descs)})"
            )
        for desc, arr in zip(descs, arrays, strict=True):
            if device is None:
                expected = tuple(desc.shape)
            else:
                expected = tuple(self.execs[device].arg_dict[desc.name].shape)
            got = tuple(arr.shape if isinstance(arr, NDArray) else np.shape(arr))
            if got != expected:
                where = "" if device is None else f" on device {device}"
                raise BatchShapeError(
                    f"{what} input '{desc.name}'{where} has shape {got}, but the executors "
                    f"were bound for shape {expected}; reshape or re-bind for the new shape"
                )

    def _check_batch(self, data_batch: Any) -> None:
        """Raises ``BatchShapeError`` when an input of the batch does not have the shape
        the executors were bound for."""
        if isinstance(data_batch, list):
            if len(data_batch) != len(self.execs):
                raise BatchShapeError(
                    f"a list of batches needs one batch per device: got {len(data_batch)} "
                    f"for {len(self.execs)} devices"
                )
            for dev, batch in enumerate(data_batch):
                self._check_inputs("data", self.data_shapes, batch.data, dev)
                if self.label_shapes is not None and getattr(batch, "label", None):
                    self._check_inputs("label", self.label_shapes, batch.label, dev)
            return
        self._check_inputs("data", self.data_shapes, data_batch.data, None)
        if self.label_shapes is not None and getattr(data_batch, "label", None):
            self._check_inputs("label", self.label_shapes, data_batch.label, None)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Loads each device's slice of ``data_batch`` and runs forward everywhere.

        Parameters
        ----------
        data_batch : DataBatch or list of DataBatch
            Anything with ``data`` and ``label`` lists of whole-batch arrays; a list of
            batches gives each device its own (already sliced) batch.
        is_train : bool, optional
            Whether this forward is for training; ``self.for_training`` by default.
        """
        self._check_batch(data_batch)
        _load_data(data_batch, self.data_arrays, self.data_layouts)
        if is_train is None:
            is_train = self.for_training
        first = data_batch[0] if isinstance(data_batch, list) else data_batch
        if self.label_arrays is not None and getattr(first, "label", None):
            _load_label(data_batch, self.label_arrays, self.label_layouts)
        for exec_ in self.execs:
            exec_.forward(is_train=is_train)

    def get_output_shapes(self) -> list[tuple[str, tuple]]:
        """``(name, shape)`` of each output as merged over devices."""
        shapes = []
        for name, out, axis in zip(self.output_names, self.execs[0].outputs,
                                   self.output_layouts, strict=True):
            shape = list(out.shape)
            if axis >= 0:
                shape[axis] = self.batch_size
            shapes.append((name, tuple(shape)))
        return shapes

    def get_outputs(self, merge_multi_context: bool = True, begin: int = 0,
                    end: int | None = None) -> list:
        """Outputs ``begin`` to ``end`` of the last forward.

        Parameters
        ----------
        merge_multi_context : bool
            ``True``: one array per output, devices joined along the batch axis
            (``[out1, out2]``); ``False``: ``[[out1_dev1, out1_dev2], [out2_dev1, ...]]``.
        begin, end : int
            The range of outputs; all by default.

        Returns
        -------
        list of NDArray, or list of list of NDArray
        """
        if end is None:
            end = self.num_outputs
        outputs = [[e.outputs[i] for e in self.execs] for i in range(begin, end)]
        if merge_multi_context:
            outputs = _merge_multi_context(outputs, self.output_layouts[begin:end])
        return outputs

    def get_states(self, merge_multi_context: bool = True) -> list:
        """The state arrays, ``[[state1_dev1, state1_dev2], ...]``; merging is not
        supported, so ``merge_multi_context`` must be ``False``."""
        if merge_multi_context:
            raise MXNetValueError("merge_multi_context=True is not supported for get_states yet.")
        return self.state_arrays

    def set_states(self, states: list | None = None, value: Any = None) -> None:
        """Sets the states from per-device arrays ``[[state1_dev1, state1_dev2], ...]`` or
        to one scalar ``value``; exactly one of the two must be given."""
        if states is not None:
            if value is not None:
                raise MXNetValueError("Only one of states & value can be specified.")
            _load_general(states, self.state_arrays, (0,) * len(states))
            return
        if value is None:
            raise MXNetValueError("At least one of states & value must be specified.")
        for per_device in self.state_arrays:
            for dst in per_device:
                dst[:] = value

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Gradients of the data inputs from the last backward (needs
        ``inputs_need_grad``); merged like ``get_outputs``."""
        if not self.inputs_need_grad:
            raise MXNetValueError("bind with inputs_need_grad=True to get input gradients")
        if merge_multi_context:
            return _merge_multi_context(self.input_grad_arrays, self.data_layouts)
        return self.input_grad_arrays

    def backward(self, out_grads: Any = None) -> None:
        """Runs backward on every device after a forward for training.

        Parameters
        ----------
        out_grads : NDArray or list of NDArray, optional
            Whole-batch head gradients, one per output; each device gets its slice. Only
            needed for outputs that are not losses.
        """
        if not self.for_training:
            raise MXNetValueError("re-bind with for_training=True to run backward")
        if out_grads is None:
            out_grads = []
        elif isinstance(out_grads, NDArray):
            out_grads = [out_grads]
        for i, (exec_, islice) in enumerate(zip(self.execs, self.slices, strict=True)):
            sliced = []
            for grad, axis in zip(out_grads, self.output_layouts, strict=False):
                if axis >= 0:
                    part = nd.slice_axis(grad, axis=axis, begin=islice.start, end=islice.stop)
                    sliced.append(part.as_in_context(self.contexts[i]))
                else:
                    sliced.append(grad.copyto(self.contexts[i]))
            exec_.backward(out_grads=sliced)

    def update_metric(self, eval_metric: Any, labels: list, pre_sliced: bool = False) -> None:
        """Updates ``eval_metric`` with each device's outputs and labels, through
        ``eval_metric.update_dict(labels_by_name, outputs_by_name)``.

        Parameters
        ----------
        eval_metric : EvalMetric
        labels : list of NDArray
            Whole-batch labels (each device gets its slice), or with ``pre_sliced`` one
            list of labels per device.
        pre_sliced : bool
            Whether ``labels`` is already split per device.
        """
        layouts = self.label_layouts or [0] * len(labels)
        label_names = self.label_names or []
        for k, (texec, islice) in enumerate(zip(self.execs, self.slices, strict=True)):
            if pre_sliced:
                labels_slice = labels[k]
            else:
                labels_slice = []
                for label, axis in zip(labels, layouts, strict=False):
                    if axis == 0:
                        labels_slice.append(label[islice])
                    elif axis > 0:
                        part = nd.slice_axis(label, axis=axis, begin=islice.start,
                                             end=islice.stop)
                        labels_slice.append(part.as_in_context(label.context))
                    else:
                        labels_slice.append(label)
            labels_ = OrderedDict(zip(label_names, labels_slice, strict=False))
            preds = OrderedDict(zip(self.output_names, texec.outputs, strict=False))
            eval_metric.update_dict(labels_, preds)

    def install_monitor(self, mon: Any) -> None:
        """Installs ``mon`` on every executor."""
        for exe in self.execs:
            mon.install(exe)

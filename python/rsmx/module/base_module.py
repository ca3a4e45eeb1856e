"""``BaseModule``: the module interface (bind, parameters, forward/backward, update) and
the training and prediction loops built on it (``fit``, ``score``, ``predict``)."""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import numpy as np

from .. import metric, ndarray
from ..base import MXNetValueError
from ..context import cpu
from ..initializer import Uniform
from ..io import DataBatch, DataDesc, DataIter
from ..model import BatchEndParam
from ._progress import Progress

__all__ = ["BaseModule"]


def _as_list(obj: Any) -> list:
    return obj if isinstance(obj, list) else [obj]


#: The initializer ``fit`` and ``init_params`` use by default, as in MXNet.
DEFAULT_INITIALIZER = Uniform(0.01)


def _check_input_names(symbol, names: list, typename: str, throw: bool) -> None:
    """Checks that every name in ``names`` is an argument of ``symbol``; raises (``throw``)
    or warns otherwise, listing the arguments that look like inputs."""
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [a for a in args
                      if not a.endswith(("_weight", "_bias", "_gamma", "_beta"))]
        msg = (f"You created Module with Module(..., {typename}_names={names}) but input "
               f"with name '{name}' is not found in symbol.list_arguments(). Did you mean "
               "one of:\n\t" + "\n\t".join(candidates))
        if throw:
            raise MXNetValueError(msg)
        warnings.warn(msg, stacklevel=3)


def _check_names_match(data_names: list, data_shapes: list, name: str, throw: bool) -> None:
    """Checks that the described inputs are exactly ``data_names``."""
    actual = [x[0] for x in data_shapes]
    if sorted(data_names) != sorted(actual):
        msg = (f"Data provided by {name}_shapes don't match names specified by {name}_names "
               f"({data_shapes} vs. {data_names})")
        if throw:
            raise MXNetValueError(msg)
        warnings.warn(msg, stacklevel=3)


def _parse_data_desc(data_names: list, label_names: list, data_shapes: list,
                     label_shapes: list | None) -> tuple[list, list | None]:
    """``DataDesc`` lists from ``(name, shape)`` pairs, checked against the names."""
    data_shapes = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in data_shapes]
    _check_names_match(data_names, data_shapes, "data", True)
    if label_shapes is not None:
        label_shapes = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in label_shapes]
        _check_names_match(label_names, label_shapes, "label", False)
    else:
        _check_names_match(label_names, [], "label", False)
    return data_shapes, label_shapes


class BaseModule:
    """A computation component: bound to shapes, holding parameters, run forward and
    backward, updated by an optimizer.

    A module goes through these states: created (only ``data_names`` and
    ``output_names`` are known); bound (``bind``: shapes known, memory allocated);
    parameters initialized (``init_params``); optimizer installed (``init_optimizer``).
    Subclasses implement the intermediate API (``bind``, ``init_params``, ``forward``,
    ``backward``, ``update``, ``get_outputs``...); the high-level ``fit``, ``score`` and
    ``predict`` are written once here in terms of it.

    Parameters
    ----------
    logger : Logger
        Where progress and warnings go; ``logging`` by default.
    """

    def __init__(self, logger=logging):
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol = None
        self._total_exec_bytes = 0

    # ------------------------------------------------------------------ high level
    def forward_backward(self, data_batch: Any) -> None:
        """``forward`` for training, then ``backward``."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch: int | None = None,
              batch_end_callback=None, score_end_callback=None, reset: bool = True,
              epoch: int = 0, sparse_row_id_fn=None) -> list[tuple[str, float]]:
        """Runs prediction on ``eval_data`` and evaluates ``eval_metric`` on it.

        Parameters
        ----------
        eval_data : DataIter
            The evaluation data.
        eval_metric : EvalMetric, str or list
            The metric, or what ``metric.create`` makes one from.
        num_batch : int, optional
            Stop after this many batches; all by default.
        batch_end_callback, score_end_callback : callable or list of callable, optional
            Called with a ``BatchEndParam`` after each batch and at the end.
        reset : bool
            Whether to reset ``eval_data`` first.
        epoch : int
            Passed on to the callbacks.
        sparse_row_id_fn : callable, optional
            Passed on to ``prepare``.

        Returns
        -------
        list of (str, float)
            The metric's name-value pairs.
        """
        assert self.binded and self.params_initialized
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        eval_metric.reset()
        actual_num_batch = 0
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            if isinstance(eval_batch, list):
                self.update_metric(eval_metric, [eb.label for eb in eval_batch], pre_sliced=True)
            else:
                self.update_metric(eval_metric, eval_batch.label)
            if batch_end_callback is not None:
                params = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                       locals=locals())
                for callback in _as_list(batch_end_callback):
                    callback(params)
            actual_num_batch += 1
        if score_end_callback:
            params = BatchEndParam(epoch=epoch, nbatch=actual_num_batch,
                                   eval_metric=eval_metric, locals=locals())
            for callback in _as_list(score_end_callback):
                callback(params)
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch: int | None = None, reset: bool = True,
                     sparse_row_id_fn=None):
        """Yields ``(outputs, batch_index, batch)`` for each batch of ``eval_data``, the
        outputs without the batch's padding rows.

        Parameters
        ----------
        eval_data : DataIter
        num_batch : int, optional
            Stop after this many batches.
        reset : bool
            Whether to reset ``eval_data`` first.
        sparse_row_id_fn : callable, optional
            Passed on to ``prepare``.
        """
        assert self.binded and self.params_initialized
        if reset:
            eval_data.reset()
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad or 0
            outputs = [out[0:out.shape[0] - pad] for out in self.get_outputs()]
            yield outputs, nbatch, eval_batch

    def predict(self, eval_data, num_batch: int | None = None, merge_batches: bool = True,
                reset: bool = True, always_output_list: bool = False,
                sparse_row_id_fn=None) -> Any:
        """Runs prediction and collects the outputs.

        Parameters
        ----------
        eval_data : DataIter, NDArray or numpy.ndarray
            The data; an array is run as one batch and its first output returned.
        num_batch : int, optional
            Stop after this many batches.
        merge_batches : bool
            ``True``: each output's batches concatenated (padding removed), giving
            ``[out1, out2]``; ``False``: ``[[out1_batch1, out2_batch1], [out1_batch2, ...]]``.
        reset : bool
            Whether to reset ``eval_data`` first.
        always_output_list : bool
            With merged batches and a single output, return ``[out1]`` rather than ``out1``.
        sparse_row_id_fn : callable, optional
            Passed on to ``prepare``.

        Returns
        -------
        NDArray, list of NDArray or list of list of NDArray
        """
        assert self.binded and self.params_initialized
        if isinstance(eval_data, (ndarray.NDArray, np.ndarray)):
            if isinstance(eval_data, np.ndarray):
                eval_data = ndarray.array(eval_data)
            self.forward(DataBatch([eval_data]))
            return self.get_outputs()[0]
        if not isinstance(eval_data, DataIter):
            raise MXNetValueError("eval_data must be of type NDArray or DataIter")
        if reset:
            eval_data.reset()
        output_list = []
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad or 0
            output_list.append([out[0:out.shape[0] - pad].copy() for out in self.get_outputs()])
        if not output_list:
            return output_list
        if not merge_batches:
            return output_list
        num_outputs = len(output_list[0])
        if any(len(out) != num_outputs for out in output_list):
            raise MXNetValueError("Cannot merge batches, as num of outputs is not the same in "
                                  "mini-batches. Maybe bucketing is used?")
        merged = [ndarray.concatenate([out[i] for out in output_list])
                  for i in range(num_outputs)]
        if num_outputs == 1 and not always_output_list:
            return merged[0]
        return merged

    def fit(self, train_data, eval_data=None, eval_metric: Any = "acc",
            epoch_end_callback=None, batch_end_callback=None, kvstore: Any = "local",
            optimizer: Any = "sgd", optimizer_params: Any = (("learning_rate", 0.01),),
            eval_end_callback=None, eval_batch_end_callback=None,
            initializer: Any = DEFAULT_INITIALIZER, arg_params: dict | None = None,
            aux_params: dict | None = None, allow_missing: bool = False,
            force_rebind: bool = False, force_init: bool = False, begin_epoch: int = 0,
            num_epoch: int | None = None, validation_metric: Any = None, monitor=None,
            sparse_row_id_fn=None) -> None:
        """Trains the module's parameters.

        Each epoch runs forward, backward and update on every batch of ``train_data``,
        updating ``eval_metric``; then logs the training metric and the time, syncs the
        parameters, calls ``epoch_end_callback(epoch, symbol, arg_params, aux_params)``
        and scores ``eval_data`` with ``validation_metric``. A progress bar (tqdm, when
        installed) or periodic log lines report the running metric and speed.

        Parameters
        ----------
        train_data : DataIter
        eval_data : DataIter, optional
            Validation data, scored after each epoch.
        eval_metric : EvalMetric or str
            The training metric; accuracy by default.
        epoch_end_callback, batch_end_callback : callable or list of callable, optional
        kvstore : str or KVStore
        optimizer : str or Optimizer
        optimizer_params : dict or tuple of pairs
        eval_end_callback, eval_batch_end_callback : callable or list of callable, optional
            Passed to ``score`` as ``score_end_callback`` and ``batch_end_callback``.
        initializer : Initializer
            For parameters not given in ``arg_params``/``aux_params``; Uniform(0.01).
        arg_params, aux_params : dict, optional
            Initial values, taking precedence over ``initializer``.
        allow_missing : bool
            Whether names missing from ``arg_params``/``aux_params`` use ``initializer``.
        force_rebind, force_init : bool
            Re-bind / re-initialize even if already done.
        begin_epoch : int
            The first epoch's number (N+1 to resume after epoch N).
        num_epoch : int
            Train until this epoch number (exclusive); required.
        validation_metric : EvalMetric or str, optional
            The metric for ``eval_data``; ``eval_metric`` by default.
        monitor : Monitor, optional
            Installed on the executors, ticked every batch.
        sparse_row_id_fn : callable, optional
            Passed on to ``prepare``.
        """
        if num_epoch is None:
            raise MXNetValueError("please specify number of epochs")
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params,
                         aux_params=aux_params, allow_missing=allow_missing,
                         force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)

        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            self._fit_epoch_begins(epoch, train_data)
            eval_metric.reset()
            progress = Progress(self.logger, epoch, train_data)
            nbatch = 0
            data_iter = iter(train_data)
            end_of_batch = False
            next_data_batch = next(data_iter)
            eval_name_vals: list = []
            while not end_of_batch:
                data_batch = next_data_batch
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(data_batch)
                self.update()
                if isinstance(data_batch, list):
                    self.update_metric(eval_metric, [db.label for db in data_batch],
                                       pre_sliced=True)
                else:
                    self.update_metric(eval_metric, data_batch.label)
                try:
                    next_data_batch = next(data_iter)
                    self.prepare(next_data_batch, sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    end_of_batch = True
                if monitor is not None:
                    monitor.toc_print()
                if end_of_batch:
                    eval_name_vals = eval_metric.get_global_name_value()
                if batch_end_callback is not None:
                    params = BatchEndParam(epoch=epoch, nbatch=nbatch,
                                           eval_metric=eval_metric, locals=locals())
                    for callback in _as_list(batch_end_callback):
                        callback(params)
                progress.update(data_batch, eval_metric)
                nbatch += 1
            progress.close()
            for name, val in eval_name_vals:
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            # the devices may have drifted apart (auxiliary states): make them agree
            arg_params_, aux_params_ = self.get_params()
            self.set_params(arg_params_, aux_params_)
            if epoch_end_callback is not None:
                for callback in _as_list(epoch_end_callback):
                    callback(epoch, self.symbol, arg_params_, aux_params_)
            if eval_data is not None:
                res = self.score(eval_data, validation_metric,
                                 score_end_callback=eval_end_callback,
                                 batch_end_callback=eval_batch_end_callback, epoch=epoch)
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)
            train_data.reset()

    def _fit_epoch_begins(self, epoch: int, train_data: Any) -> None:
        """Called by ``fit`` as each epoch begins, before its first batch."""

    # ------------------------------------------------------------------ symbol information
    @property
    def data_names(self) -> list[str]:
        """Names of the data inputs."""
        raise NotImplementedError()

    @property
    def output_names(self) -> list[str]:
        """Names of the outputs."""
        raise NotImplementedError()

    @property
    def data_shapes(self) -> list:
        """``(name, shape)`` of each data input."""
        raise NotImplementedError()

    @property
    def label_shapes(self) -> list | None:
        """``(name, shape)`` of each label input (empty or ``None`` without labels)."""
        raise NotImplementedError()

    @property
    def output_shapes(self) -> list:
        """``(name, shape)`` of each output."""
        raise NotImplementedError()

    @property
    def symbol(self):
        """The module's symbol (for ``BucketingModule``, the current bucket's)."""
        return self._symbol

    # ------------------------------------------------------------------ parameters
    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)``: copies on the CPU of the current values."""
        raise NotImplementedError()

    def init_params(self, initializer: Any = DEFAULT_INITIALIZER, arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Initializes the parameters and auxiliary states (see ``Module.init_params``)."""
        raise NotImplementedError()

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        """Assigns parameter and auxiliary values.

        Parameters
        ----------
        arg_params, aux_params : dict of str to NDArray
        allow_missing : bool
            Whether names may be missing (those keep their values).
        force_init : bool
            Whether to assign even when already initialized.
        allow_extra : bool
            Whether names the module does not have are ignored rather than an error.
        """
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def save_params(self, fname: str) -> None:
        """Saves the parameters to ``fname`` with ``arg:``/``aux:`` name prefixes."""
        arg_params, aux_params = self.get_params()
        save_dict = {f"arg:{k}": v.as_in_context(cpu()) for k, v in arg_params.items()}
        save_dict.update({f"aux:{k}": v.as_in_context(cpu()) for k, v in aux_params.items()})
        ndarray.save(fname, save_dict)

    def load_params(self, fname: str) -> None:
        """Loads parameters saved by ``save_params`` and assigns them."""
        arg_params, aux_params = {}, {}
        for key, value in ndarray.load(fname).items():
            kind, _, name = key.partition(":")
            if kind == "arg":
                arg_params[name] = value
            elif kind == "aux":
                aux_params[name] = value
            else:
                raise MXNetValueError("Invalid param file " + fname)
        self.set_params(arg_params, aux_params)

    def get_states(self, merge_multi_context: bool = True) -> list:
        """The state arrays (none for a module without states)."""
        assert self.binded and self.params_initialized
        assert not merge_multi_context
        return []

    def set_states(self, states: list | None = None, value: Any = None) -> None:
        """Sets the states (a module without states accepts nothing)."""
        assert self.binded and self.params_initialized
        assert not states and not value

    def install_monitor(self, mon) -> None:
        """Installs ``mon`` on the executors."""
        raise NotImplementedError()

    # ------------------------------------------------------------------ computation
    def prepare(self, data_batch: Any, sparse_row_id_fn=None) -> None:
        """Gets ready for ``data_batch`` (switching bucket, reshaping); nothing here."""
        if sparse_row_id_fn is not None:
            warnings.warn(UserWarning("sparse_row_id_fn is not invoked for BaseModule."),
                          stacklevel=2)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Runs forward on ``data_batch`` (reshaping for a batch of another shape)."""
        raise NotImplementedError()

    def backward(self, out_grads: Any = None) -> None:
        """Runs backward; ``out_grads`` are head gradients for outputs that are no loss."""
        raise NotImplementedError()

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """The outputs of the last forward."""
        raise NotImplementedError()

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """The gradients of the data inputs from the last backward."""
        raise NotImplementedError()

    def update(self) -> None:
        """Updates the parameters with the optimizer and the last gradients."""
        raise NotImplementedError()

    def update_metric(self, eval_metric, labels: list, pre_sliced: bool = False) -> None:
        """Updates ``eval_metric`` with the last outputs and ``labels``."""
        raise NotImplementedError()

    # ------------------------------------------------------------------ setup
    def bind(self, data_shapes: list, label_shapes: list | None = None,
             for_training: bool = True, inputs_need_grad: bool = False,
             force_rebind: bool = False, shared_module: BaseModule | None = None,
             grad_req: Any = "write") -> None:
        """Allocates the executors for the given input shapes."""
        raise NotImplementedError()

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Installs the optimizer (and the kvstore)."""
        raise NotImplementedError()

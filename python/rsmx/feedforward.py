"""``mx.model.FeedForward``: MXNet's training API from before Module, for a network with
one data input and one label, trained on numpy arrays, NDArrays or a data iterator."""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import numpy as np

from . import io, metric
from . import ndarray as nd
from . import optimizer as opt
from .base import MXNetTypeError, MXNetValueError, mx_real_t
from .callback import BatchEndParam, LogValidationMetricsCallback
from .context import Context, cpu
from .initializer import InitDesc, Uniform

__all__ = ["FeedForward"]


def _callbacks(callbacks: Any, *args: Any) -> None:
    if callbacks is None:
        return
    for cb in callbacks if isinstance(callbacks, list) else [callbacks]:
        cb(*args)


class FeedForward:
    """A model of a Symbol with its parameters, trained by ``fit`` and used by
    ``predict`` and ``score`` (deprecated in MXNet for ``mx.mod.Module``, kept for the
    scripts that use it)."""

    def __init__(
        self,
        symbol: Any,
        ctx: Any = None,
        num_epoch: int | None = None,
        epoch_size: int | None = None,
        optimizer: Any = "sgd",
        initializer: Any = None,
        numpy_batch_size: int = 128,
        arg_params: dict | None = None,
        aux_params: dict | None = None,
        allow_extra_params: bool = False,  # noqa: FBT001, FBT002
        begin_epoch: int = 0,
        **kwargs: Any,
    ) -> None:
        from .symbol import Symbol

        warnings.warn(
            "mxnet.model.FeedForward has been deprecated. Please use mxnet.mod.Module instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        if isinstance(symbol, Symbol):
            self.symbol, self.sym_gen = symbol, None
        elif callable(symbol):
            self.symbol, self.sym_gen = None, symbol
        else:
            raise MXNetTypeError("FeedForward: symbol must be a Symbol or a function giving one")
        self.arg_params = arg_params
        self.aux_params = aux_params
        self.allow_extra_params = allow_extra_params
        self.argument_checked = False
        if self.sym_gen is None:
            self._check_arguments()
        if ctx is None:
            ctx = [cpu()]
        elif isinstance(ctx, Context):
            ctx = [ctx]
        self.ctx = list(ctx)
        self.num_epoch = num_epoch
        self.epoch_size = epoch_size
        self.kwargs = kwargs.copy()
        self.optimizer = optimizer
        self.initializer = initializer if initializer is not None else Uniform(0.01)
        self.numpy_batch_size = numpy_batch_size
        self._pred_exec: Any = None
        self.begin_epoch = begin_epoch

    def _check_arguments(self) -> None:
        """Drops the given parameters the symbol does not take, when allowed."""
        if self.argument_checked:
            return
        self.argument_checked = True
        args = self.symbol.list_arguments()
        if len(set(args)) != len(args):
            raise MXNetValueError(f"FeedForward: the symbol has duplicated argument names: {args}")
        if self.allow_extra_params:
            if self.arg_params:
                names = set(args)
                self.arg_params = {k: v for k, v in self.arg_params.items() if k in names}
            if self.aux_params:
                names = set(self.symbol.list_auxiliary_states())
                self.aux_params = {k: v for k, v in self.aux_params.items() if k in names}

    def _init_params(self, inputs: list) -> tuple[list[str], list[str], list[str]]:
        """Creates the parameters for input descriptions ``inputs``: given values are
        copied, the rest initialised."""
        inputs = [x if isinstance(x, io.DataDesc) else io.DataDesc(*x) for x in inputs]
        arg_shapes, _, aux_shapes = self.symbol.infer_shape(**{d.name: d.shape for d in inputs})
        arg_types, _, aux_types = self.symbol.infer_type(**{d.name: d.dtype for d in inputs})
        if arg_shapes is None or arg_types is None:
            raise MXNetValueError("FeedForward: the input shapes do not determine every parameter")
        arg_names = self.symbol.list_arguments()
        input_names = {d.name for d in inputs}
        param_names = [n for n in arg_names if n not in input_names]
        aux_names = self.symbol.list_auxiliary_states()
        arg_params = {
            n: nd.zeros(s, dtype=t)
            for n, s, t in zip(arg_names, arg_shapes, arg_types, strict=True)
            if n in param_names
        }
        aux_params = {
            n: nd.zeros(s, dtype=t) for n, s, t in zip(aux_names, aux_shapes, aux_types, strict=True)
        }
        for given, new in ((self.arg_params, arg_params), (self.aux_params, aux_params)):
            for k, v in new.items():
                if given and k in given:
                    v[:] = given[k].asnumpy() if isinstance(given[k], nd.NDArray) else given[k]
                else:
                    self.initializer(InitDesc(k), v)
        self.arg_params, self.aux_params = arg_params, aux_params
        return arg_names, param_names, aux_names

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_pred_exec"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def _init_predictor(self, input_shapes: list, type_dict: dict | None = None) -> None:
        """Binds (or keeps) the prediction executor for these input shapes."""
        shapes = {name: arr.shape for name, arr in self.arg_params.items()}
        shapes.update(dict(input_shapes))
        if self._pred_exec is not None:
            arg_shapes, _, _ = self.symbol.infer_shape(**shapes)
            if arg_shapes == [x.shape for x in self._pred_exec.arg_arrays]:
                return
        exe = self.symbol.simple_bind(self.ctx[0], grad_req="null", type_dict=type_dict, **shapes)
        exe.copy_params_from(self.arg_params, self.aux_params)
        self._pred_exec = exe

    def _init_iter(self, X: Any, y: Any, is_train: bool) -> Any:  # noqa: FBT001, N803
        """A data iterator over ``X`` (and labels ``y``)."""
        if isinstance(X, (np.ndarray, nd.NDArray)):
            if y is None:
                if is_train:
                    raise MXNetValueError("y must be specified when X is numpy.ndarray")
                y = np.zeros(X.shape[0])
            if not isinstance(y, (np.ndarray, nd.NDArray)):
                raise MXNetTypeError("y must be ndarray when X is numpy.ndarray")
            if X.shape[0] != y.shape[0]:
                raise MXNetValueError("The numbers of data points and labels not equal")
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.reshape((y.shape[0],))
            if y.ndim != 1:
                raise MXNetValueError("Label must be 1D or 2D (with 2nd dimension being 1)")
            batch = min(X.shape[0], self.numpy_batch_size)
            if is_train:
                return io.NDArrayIter(X, y, batch, shuffle=True, last_batch_handle="roll_over")
            return io.NDArrayIter(X, y, batch, shuffle=False)
        if not isinstance(X, io.DataIter):
            raise MXNetTypeError("X must be DataIter, NDArray or numpy.ndarray")
        return X

    def _init_eval_iter(self, eval_data: Any) -> Any:
        if eval_data is None:
            return None
        if isinstance(eval_data, (tuple, list)) and len(eval_data) == 2:
            if eval_data[0] is None:
                raise MXNetValueError("Eval data is NONE")
            if eval_data[1] is None and isinstance(eval_data[0], io.DataIter):
                return eval_data[0]
            data = np.array(eval_data[0]) if isinstance(eval_data[0], list) else eval_data[0]
            label = np.array(eval_data[1]) if isinstance(eval_data[1], list) else eval_data[1]
            return self._init_iter(data, label, is_train=True)
        if not isinstance(eval_data, io.DataIter):
            raise MXNetTypeError(
                "Eval data must be DataIter, or NDArray/numpy.ndarray/list pair "
                "(i.e. tuple/list of length 2)"
            )
        return eval_data

    def _bind_for(self, X: Any) -> list:  # noqa: N803
        """Binds the predictor for iterator ``X``; its data arrays."""
        type_dict = {k: v.dtype for k, v in self.arg_params.items()}
        for d in X.provide_data:
            type_dict[d[0]] = d.dtype if isinstance(d, io.DataDesc) else mx_real_t
        self._init_predictor(X.provide_data, type_dict)
        return [self._pred_exec.arg_dict[d[0]] for d in X.provide_data]

    def predict(
        self,
        X: Any,  # noqa: N803
        num_batch: int | None = None,
        return_data: bool = False,  # noqa: FBT001, FBT002
        reset: bool = True,  # noqa: FBT001, FBT002
    ) -> Any:
        """The network's outputs for ``X`` as numpy arrays (the padding of a last
        batch left out); with ``return_data``, also the data and labels."""
        X = self._init_iter(X, None, is_train=False)  # noqa: N806
        if reset:
            X.reset()
        data_arrays = self._bind_for(X)
        outputs: list[list[np.ndarray]] = [[] for _ in self._pred_exec.outputs]
        datas: list[list[np.ndarray]] = [[] for _ in X.provide_data]
        labels: list[list[np.ndarray]] = [[] for _ in X.provide_label]
        for i, batch in enumerate(X):
            if num_batch is not None and i == num_batch:
                break
            for src, dst in zip(batch.data, data_arrays, strict=True):
                src.copyto(dst)
            self._pred_exec.forward(is_train=False)
            real = X.batch_size - (batch.pad or 0)
            for acc, out in zip(outputs, self._pred_exec.outputs, strict=True):
                acc.append(out[0:real].asnumpy())
            if return_data:
                for acc, x in zip(datas, batch.data, strict=True):
                    acc.append(x[0:real].asnumpy())
                for acc, x in zip(labels, batch.label, strict=True):
                    acc.append(x[0:real].asnumpy())
        result = [np.concatenate(x) for x in outputs]
        out: Any = result[0] if len(result) == 1 else result
        if not return_data:
            return out
        data = [np.concatenate(x) for x in datas]
        label = [np.concatenate(x) for x in labels]
        return out, data[0] if len(data) == 1 else data, label[0] if len(label) == 1 else label

    def score(
        self,
        X: Any,  # noqa: N803
        eval_metric: Any = "acc",
        num_batch: int | None = None,
        batch_end_callback: Any = None,
        reset: bool = True,  # noqa: FBT001, FBT002
    ) -> float:
        """The value of ``eval_metric`` over ``X``."""
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        X = self._init_iter(X, None, is_train=False)  # noqa: N806
        if reset:
            X.reset()
        data_arrays = self._bind_for(X)
        for i, batch in enumerate(X):
            if num_batch is not None and i == num_batch:
                break
            for src, dst in zip(batch.data, data_arrays, strict=True):
                src.copyto(dst)
            self._pred_exec.forward(is_train=False)
            eval_metric.update(batch.label, self._pred_exec.outputs)
            _callbacks(batch_end_callback, BatchEndParam(0, i, eval_metric, locals()))
        return eval_metric.get()[1]

    def _create_optimizer(self, data: Any, kvstore: Any, param_names: list[str]) -> Any:
        idx2name = dict(enumerate(param_names))
        if isinstance(self.optimizer, opt.Optimizer):
            if not self.optimizer.idx2name:
                self.optimizer.idx2name = idx2name.copy()
            return self.optimizer
        batch_size = data.batch_size
        kv_type = kvstore if isinstance(kvstore, str) else getattr(kvstore, "type", "")
        if kv_type and "dist" in kv_type and "_async" not in kv_type and not isinstance(kvstore, str):
            batch_size *= kvstore.num_workers
        kwargs = dict(self.kwargs)
        kwargs.setdefault("sym", self.symbol)
        kwargs.setdefault("param_idx2name", idx2name)
        return opt.create(self.optimizer, rescale_grad=1.0 / batch_size, **kwargs)

    def fit(
        self,
        X: Any,  # noqa: N803
        y: Any = None,
        eval_data: Any = None,
        eval_metric: Any = "acc",
        epoch_end_callback: Any = None,
        batch_end_callback: Any = None,
        kvstore: Any = "local",
        logger: Any = None,
        work_load_list: Any = None,
        monitor: Any = None,
        eval_end_callback: Any = LogValidationMetricsCallback(),  # noqa: B008
        eval_batch_end_callback: Any = None,
    ) -> None:
        """Trains from ``begin_epoch`` to ``num_epoch`` (``epoch_size`` batches an epoch
        when set, else one pass over the data)."""
        from .module import Module

        logger = logger or logging
        data = self._init_iter(X, y, is_train=True)
        eval_iter = self._init_eval_iter(eval_data)
        if self.sym_gen is not None:
            self.symbol = self.sym_gen(data.default_bucket_key)
            self._check_arguments()
        if self.num_epoch is None:
            raise MXNetValueError("FeedForward.fit: num_epoch must be set")
        _, param_names, _ = self._init_params(list(data.provide_data) + list(data.provide_label))
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        mod = Module(
            self.symbol,
            data_names=[d[0] for d in data.provide_data],
            label_names=[d[0] for d in data.provide_label],
            context=self.ctx,
            work_load_list=work_load_list,
            logger=logger,
        )
        mod.bind(data.provide_data, data.provide_label, for_training=True)
        mod.set_params(self.arg_params, self.aux_params)
        mod.init_optimizer(kvstore=kvstore, optimizer=self._create_optimizer(data, kvstore, param_names))
        if monitor is not None:
            mod.install_monitor(monitor)
        data.reset()
        for epoch in range(self.begin_epoch, self.num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            while True:
                do_reset = True
                for batch in data:
                    if monitor is not None:
                        monitor.tic()
                    mod.forward_backward(batch)
                    mod.update()
                    if monitor is not None:
                        monitor.toc_print()
                    mod.update_metric(eval_metric, batch.label)
                    nbatch += 1
                    _callbacks(batch_end_callback, BatchEndParam(epoch, nbatch, eval_metric, locals()))
                    if self.epoch_size is not None and nbatch >= self.epoch_size:
                        do_reset = False
                        break
                if do_reset:
                    logger.info("Epoch[%d] Resetting Data Iterator", epoch)
                    data.reset()
                if self.epoch_size is None or nbatch >= self.epoch_size:
                    break
            logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            self.arg_params, self.aux_params = mod.get_params()
            _callbacks(epoch_end_callback, epoch, self.symbol, self.arg_params, self.aux_params)
            if eval_iter is not None:
                eval_metric.reset()
                eval_iter.reset()
                total = 0
                for i, batch in enumerate(eval_iter):
                    mod.forward(batch, is_train=False)
                    mod.update_metric(eval_metric, batch.label)
                    _callbacks(eval_batch_end_callback, BatchEndParam(epoch, i, eval_metric, locals()))
                    total += 1
                _callbacks(eval_end_callback, BatchEndParam(epoch, total, eval_metric, locals()))
                eval_iter.reset()
        self._pred_exec = None

    def save(self, prefix: str, epoch: int | None = None, remove_amp_cast: bool = True) -> None:  # noqa: FBT001, FBT002
        """Writes ``prefix-symbol.json`` and ``prefix-%04d.params`` (epoch defaults to
        ``num_epoch``)."""
        if epoch is None:
            epoch = self.num_epoch
        if epoch is None:
            raise MXNetValueError("FeedForward.save: give the epoch, or set num_epoch")
        from .model import save_checkpoint

        save_checkpoint(prefix, epoch, self.symbol, self.arg_params, self.aux_params)

    @staticmethod
    def load(prefix: str, epoch: int, ctx: Any = None, **kwargs: Any) -> FeedForward:
        """A model from the checkpoint ``save`` wrote, continuing at ``epoch``."""
        from .model import load_checkpoint

        symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
        return FeedForward(
            symbol, ctx=ctx, arg_params=arg_params, aux_params=aux_params, begin_epoch=epoch, **kwargs
        )

    @staticmethod
    def create(
        symbol: Any,
        X: Any,  # noqa: N803
        y: Any = None,
        ctx: Any = None,
        num_epoch: int | None = None,
        epoch_size: int | None = None,
        optimizer: Any = "sgd",
        initializer: Any = None,
        eval_data: Any = None,
        eval_metric: Any = "acc",
        epoch_end_callback: Any = None,
        batch_end_callback: Any = None,
        kvstore: Any = "local",
        logger: Any = None,
        work_load_list: Any = None,
        eval_end_callback: Any = LogValidationMetricsCallback(),  # noqa: B008
        eval_batch_end_callback: Any = None,
        **kwargs: Any,
    ) -> FeedForward:
        """A new model trained on ``X`` by ``fit``."""
        model = FeedForward(
            symbol,
            ctx=ctx,
            num_epoch=num_epoch,
            epoch_size=epoch_size,
            optimizer=optimizer,
            initializer=initializer,
            **kwargs,
        )
        model.fit(
            X,
            y,
            eval_data=eval_data,
            eval_metric=eval_metric,
            epoch_end_callback=epoch_end_callback,
            batch_end_callback=batch_end_callback,
            kvstore=kvstore,
            logger=logger,
            work_load_list=work_load_list,
            eval_end_callback=eval_end_callback,
            eval_batch_end_callback=eval_batch_end_callback,
        )
        return model

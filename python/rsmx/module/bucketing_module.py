"""``BucketingModule``: one ``Module`` per bucket key (e.g. per sequence length), all
sharing the parameters and memory of the default bucket's module."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from .. import ndarray as nd
from .. import symbol as sym
from ..base import MXNetValueError
from ..model import load_params
from ..name import NameManager
from .base_module import DEFAULT_INITIALIZER, BaseModule, _check_input_names
from .module import Module

__all__ = ["BucketingModule"]


class BucketingModule(BaseModule):
    """A module whose symbol depends on each batch's ``bucket_key``.

    The default bucket is bound first; every other bucket is bound on first use with the
    default bucket's module as ``shared_module``, so all buckets share the parameters,
    the optimizer and (as far as sizes allow) the input memory. Make the default bucket
    the largest one for the best sharing.

    Parameters
    ----------
    sym_gen : callable
        ``sym_gen(bucket_key)`` returns ``(symbol, data_names, label_names)``.
    default_bucket_key : hashable
        The key of the default bucket.
    logger : Logger
        ``logging`` by default.
    context : Context or list of Context
        The devices; ``mx.cpu()`` by default.
    work_load_list : list of number, optional
        Each device's share of a batch.
    fixed_param_names : list of str, optional
        Parameters that are not trained.
    state_names : list of str, optional
        Inputs set with ``set_states``.
    group2ctxs : dict or list of dict, optional
        Maps ``ctx_group`` attributes to devices.
    compression_params : dict, optional
        Gradient compression settings for the kvstore.
    """

    def __init__(self, sym_gen, default_bucket_key: Any = None, logger=logging,
                 context: Any = None, work_load_list: list | None = None,
                 fixed_param_names: list | None = None, state_names: list | None = None,
                 group2ctxs: Any = None, compression_params: dict | None = None):
        super().__init__(logger=logger)
        if default_bucket_key is None:
            raise MXNetValueError("default_bucket_key is required")
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen
        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []
        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)
        self._compression_params = compression_params
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._context = context
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs
        self._buckets: dict = {}
        self._curr_module: Module | None = None
        self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None

    def _reset_bind(self) -> None:
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    def _call_sym_gen(self, *args: Any, **kwargs: Any) -> tuple:
        with NameManager():
            return self._sym_gen(*args, **kwargs)

    def _new_module(self, symbol, data_names, label_names) -> Module:
        return Module(symbol, data_names, label_names, logger=self.logger,
                      context=self._context, work_load_list=self._work_load_list,
                      fixed_param_names=self._fixed_param_names,
                      state_names=self._state_names, group2ctxs=self._group2ctxs,
                      compression_params=self._compression_params)

    # ------------------------------------------------------------------ information
    @property
    def data_names(self) -> list[str]:
        """The current bucket's data names (the default bucket's before binding)."""
        if self.binded:
            return self._curr_module.data_names
        return self._call_sym_gen(self._default_bucket_key)[1]

    @property
    def output_names(self) -> list[str]:
        """The current bucket's output names (the default bucket's before binding)."""
        if self.binded:
            return self._curr_module.output_names
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

    @property
    def data_shapes(self) -> list:
        """The current bucket's data descriptions."""
        assert self.binded
        return self._curr_module.data_shapes

    @property
    def label_shapes(self) -> list | None:
        """The current bucket's label descriptions."""
        assert self.binded
        return self._curr_module.label_shapes

    @property
    def output_shapes(self) -> list:
        """The current bucket's output shapes."""
        assert self.binded
        return self._curr_module.output_shapes

    @property
    def symbol(self):
        """The current bucket's symbol."""
        assert self.binded
        return self._curr_module.symbol

    # ------------------------------------------------------------------ parameters
    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)`` on the CPU (shared by all buckets)."""
        assert self.params_initialized
        self._curr_module._params_dirty = self._params_dirty
        params = self._curr_module.get_params()
        self._params_dirty = False
        return params

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        """Assigns parameter and auxiliary values (see ``Module.set_params``)."""
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init)
            return
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
            return
        self._curr_module.set_params(arg_params, aux_params, allow_missing=allow_missing,
                                     force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    def init_params(self, initializer: Any = DEFAULT_INITIALIZER, arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Initializes the parameters through the current bucket's module (see
        ``Module.init_params``); does nothing when already initialized and not forced."""
        if self.params_initialized and not force_init:
            return
        assert self.binded, "call bind before initializing the parameters"
        self._curr_module.init_params(initializer=initializer, arg_params=arg_params,
                                      aux_params=aux_params, allow_missing=allow_missing,
                                      force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def get_states(self, merge_multi_context: bool = True) -> list:
        """The current bucket's state arrays."""
        assert self.binded and self.params_initialized
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states: list | None = None, value: Any = None) -> None:
        """Sets the current bucket's states."""
        assert self.binded and self.params_initialized
        self._curr_module.set_states(states, value)

    # ------------------------------------------------------------------ binding
    def bind(self, data_shapes: list, label_shapes: list | None = None,
             for_training: bool = True, inputs_need_grad: bool = False,
             force_rebind: bool = False, shared_module: Any = None,
             grad_req: Any = "write") -> None:
        """Binds the default bucket's module for ``data_shapes``/``label_shapes`` (which
        describe the default bucket); other buckets bind in ``switch_bucket``.
        Parameters already initialized are kept across a forced re-bind."""
        if self.params_initialized:
            arg_params, aux_params = self.get_params()
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise MXNetValueError("shared_module for BucketingModule is not supported")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.binded = True
        self._grad_req = grad_req
        symbol, data_names, label_names = self._call_sym_gen(self._default_bucket_key)
        module = self._buckets.get(self._default_bucket_key)
        if module is None:
            module = self._new_module(symbol, data_names, label_names)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=False, shared_module=None, grad_req=self._grad_req)
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module
        if self.params_initialized:
            self.set_params(arg_params, aux_params)

    def switch_bucket(self, bucket_key: Any, data_shapes: list | None,
                      label_shapes: list | None = None) -> None:
        """Makes ``bucket_key`` the current bucket, binding its module (sharing the
        default bucket's) on first use.

        Parameters
        ----------
        bucket_key : hashable
        data_shapes : list of (str, tuple) or DataDesc
            Typically ``data_batch.provide_data``.
        label_shapes : list of (str, tuple) or DataDesc, optional
            Typically ``data_batch.provide_label``.
        """
        assert self.binded, "call bind before switching bucket"
        module = self._buckets.get(bucket_key)
        default = self._buckets[self._default_bucket_key]
        if module is None:
            symbol, data_names, label_names = self._call_sym_gen(bucket_key)
            module = self._new_module(symbol, data_names, label_names)
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=default, grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        elif not module.binded:
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=default, grad_req=self._grad_req)
        self._curr_module = module
        self._curr_bucket_key = bucket_key

    # ------------------------------------------------------------------ optimizer
    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Installs the optimizer on the current bucket; every other bucket borrows it."""
        assert self.binded and self.params_initialized
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params,
                                         force_init=force_init)
        for mod in self._buckets.values():
            if mod is not self._curr_module:
                mod.borrow_optimizer(self._curr_module)
        self.optimizer_initialized = True

    # ------------------------------------------------------------------ computation
    def prepare(self, data_batch: Any, sparse_row_id_fn=None) -> None:
        """Binds the batch's bucket if needed, prepares it, and stays on the current one."""
        assert self.binded and self.params_initialized
        original_key = self._curr_bucket_key
        self.switch_bucket(data_batch.bucket_key, data_batch.provide_data,
                           data_batch.provide_label)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(original_key, None, None)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Switches to the batch's bucket and runs forward there."""
        assert self.binded and self.params_initialized
        self.switch_bucket(data_batch.bucket_key, data_batch.provide_data,
                           data_batch.provide_label)
        self._curr_module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads: Any = None) -> None:
        """Runs backward on the current bucket."""
        assert self.binded and self.params_initialized
        self._curr_module.backward(out_grads=out_grads)

    def update(self) -> None:
        """Updates the (shared) parameters from the current bucket's gradients."""
        assert self.binded and self.params_initialized and self.optimizer_initialized
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """The current bucket's outputs of the last forward."""
        assert self.binded and self.params_initialized
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """The current bucket's input gradients of the last backward."""
        assert self.binded and self.params_initialized and self.inputs_need_grad
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels: list, pre_sliced: bool = False) -> None:
        """Updates ``eval_metric`` with the current bucket's outputs."""
        assert self.binded and self.params_initialized
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon) -> None:
        """Installs ``mon`` on every bucket, present and future."""
        assert self.binded
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, prefix: str, epoch: int, remove_amp_cast: bool = False) -> None:
        """Saves ``prefix-EPOCH.params``, one ``prefix-KEY-symbol.json`` per bucket and the
        bucket keys in ``prefix.buckets`` (keys must be integers)."""
        if not self._buckets:
            raise MXNetValueError("Empty BucketingModule cannot be saved")
        self.save_params(f"{prefix}-{epoch:04d}.params")
        for bucket_key in self._buckets:
            symbol, _, _ = self._sym_gen(bucket_key)
            symbol.save(f"{prefix}-{bucket_key}-symbol.json", remove_amp_cast=remove_amp_cast)
        nd.save(f"{prefix}.buckets", nd.array(list(self._buckets.keys()), dtype=np.int32))

    @staticmethod
    def load(prefix: str, epoch: int, sym_gen=None, default_bucket_key: Any = None,
             **kwargs: Any) -> BucketingModule:
        """A bucketing module from a checkpoint written by ``save_checkpoint``; ``sym_gen``
        gives the names, the saved symbols the graphs. ``kwargs`` go to the modules."""
        if sym_gen is None:
            raise MXNetValueError("sym_gen is required for loading BucketingModule")
        if default_bucket_key is None:
            raise MXNetValueError("default_bucket_key is required for loading BucketingModule")
        saved = nd.load(f"{prefix}.buckets")
        buckets = [int(k) for k in saved[0].asnumpy().astype("int32")]
        mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for bucket_key in buckets:
            _, data_names, label_names = sym_gen(bucket_key)
            symbol = sym.load(f"{prefix}-{bucket_key}-symbol.json")
            mod._buckets[bucket_key] = Module(symbol, data_names, label_names, **kwargs)
            if bucket_key == default_bucket_key:
                mod._curr_module = mod._buckets[bucket_key]
        arg_params, aux_params = load_params(prefix, epoch)
        mod._curr_module._arg_params = arg_params
        mod._curr_module._aux_params = aux_params
        mod._curr_module.params_initialized = True
        mod.params_initialized = True
        return mod

    @staticmethod
    def load_dict(sym_dict: dict | None = None, sym_gen=None, default_bucket_key: Any = None,
                  arg_params: dict | None = None, aux_params: dict | None = None,
                  **kwargs: Any) -> BucketingModule:
        """A bucketing module from symbols by bucket key and shared parameters."""
        for value, what in ((sym_dict, "sym_dict"), (arg_params, "arg_params"),
                            (aux_params, "aux_params"),
                            (default_bucket_key, "default_bucket_key")):
            if value is None:
                raise MXNetValueError(f"{what} needs to be provided for "
                                      "BucketingModule.load_dict")
        mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for bucket_key, loaded_sym in sym_dict.items():
            _, data_names, label_names = sym_gen(default_bucket_key)
            mod._buckets[bucket_key] = Module(loaded_sym, data_names, label_names, **kwargs)
            if bucket_key == default_bucket_key:
                mod._curr_module = mod._buckets[bucket_key]
        mod._curr_module._arg_params = arg_params
        mod._curr_module._aux_params = aux_params
        mod._curr_module.params_initialized = True
        mod.params_initialized = True
        return mod

"""``Module``: a symbol with its executors (one per device), parameters and optimizer."""

from __future__ import annotations

import logging
import warnings
from typing import Any

from .. import context as ctx
from .. import ndarray as nd
from ..base import MXNetValueError
from ..initializer import InitDesc
from ..io import DataDesc
from ..model import (
    _create_kvstore,
    _initialize_kvstore,
    _update_params,
    _update_params_on_kvstore,
    load_checkpoint,
)
from .base_module import (
    DEFAULT_INITIALIZER,
    BaseModule,
    _check_input_names,
    _parse_data_desc,
)
from .executor_group import DataParallelExecutorGroup

__all__ = ["Module"]


def _optimizer_module():
    from .. import optimizer

    return optimizer


class Module(BaseModule):
    """A module that runs one symbol, data-parallel over one or more devices.

    Parameters
    ----------
    symbol : Symbol
        The network.
    data_names : list of str
        The data inputs; ``('data',)`` by default.
    label_names : list of str
        The label inputs; ``('softmax_label',)`` by default.
    logger : Logger
        ``logging`` by default.
    context : Context or list of Context
        The devices; ``mx.cpu()`` by default.
    work_load_list : list of number, optional
        Each device's share of a batch; equal by default.
    fixed_param_names : list of str, optional
        Parameters that are not trained.
    state_names : list of str, optional
        Inputs set with ``set_states`` rather than by the data iterator (zero at first).
    group2ctxs : dict or list of dict, optional
        Maps ``ctx_group`` attributes to devices.
    compression_params : dict, optional
        Gradient compression settings for the kvstore.
    """

    def __init__(self, symbol, data_names: Any = ("data",), label_names: Any = ("softmax_label",),
                 logger=logging, context: Any = None, work_load_list: list | None = None,
                 fixed_param_names: list | None = None, state_names: list | None = None,
                 group2ctxs: Any = None, compression_params: dict | None = None):
        super().__init__(logger=logger)
        if context is None:
            context = ctx.cpu()
        if isinstance(context, ctx.Context):
            context = [context]
        self._context = list(context)
        if work_load_list is None:
            work_load_list = [1] * len(self._context)
        if len(work_load_list) != len(self._context):
            raise MXNetValueError(
                f"work_load_list has {len(work_load_list)} entries for "
                f"{len(self._context)} contexts"
            )
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs
        self._symbol = symbol
        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []
        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)
        input_names = data_names + label_names + state_names
        self._param_names = [x for x in symbol.list_arguments() if x not in input_names]
        self._fixed_param_names = fixed_param_names
        self._aux_names = symbol.list_auxiliary_states()
        self._data_names = data_names
        self._label_names = label_names
        self._state_names = state_names
        self._output_names = symbol.list_outputs()
        self._arg_params: dict | None = None
        self._aux_params: dict | None = None
        self._params_dirty = False
        self._compression_params = compression_params
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._preload_opt_states: str | None = None
        self._grad_req = None
        self._exec_group: DataParallelExecutorGroup | None = None
        self._data_shapes = None
        self._label_shapes = None

    # ------------------------------------------------------------------ checkpoints
    @staticmethod
    def load(prefix: str, epoch: int, load_optimizer_states: bool = False,
             **kwargs: Any) -> Module:
        """A module from the checkpoint ``prefix-symbol.json`` and ``prefix-EPOCH.params``
        (and ``prefix-EPOCH.states`` with ``load_optimizer_states``, loaded when the
        optimizer is installed). ``kwargs`` go to ``Module``."""
        sym, args, auxs = load_checkpoint(prefix, epoch)
        mod = Module(symbol=sym, **kwargs)
        mod._arg_params = args
        mod._aux_params = auxs
        mod.params_initialized = True
        if load_optimizer_states:
            mod._preload_opt_states = f"{prefix}-{epoch:04d}.states"
        return mod

    def save_checkpoint(self, prefix: str, epoch: int, save_optimizer_states: bool = False,
                        remove_amp_cast: bool = True) -> None:
        """Saves ``prefix-symbol.json``, ``prefix-EPOCH.params`` and, with
        ``save_optimizer_states``, ``prefix-EPOCH.states``."""
        self._symbol.save(f"{prefix}-symbol.json", remove_amp_cast=remove_amp_cast)
        param_name = f"{prefix}-{epoch:04d}.params"
        self.save_params(param_name)
        logging.info('Saved checkpoint to "%s"', param_name)
        if save_optimizer_states:
            state_name = f"{prefix}-{epoch:04d}.states"
            self.save_optimizer_states(state_name)
            logging.info('Saved optimizer state to "%s"', state_name)

    def _reset_bind(self) -> None:
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    # ------------------------------------------------------------------ information
    @property
    def data_names(self) -> list[str]:
        """Names of the data inputs."""
        return self._data_names

    @property
    def label_names(self) -> list[str]:
        """Names of the label inputs."""
        return self._label_names

    @property
    def output_names(self) -> list[str]:
        """Names of the outputs."""
        return self._output_names

    @property
    def data_shapes(self) -> list:
        """The bound data descriptions."""
        assert self.binded
        return self._data_shapes

    @property
    def label_shapes(self) -> list | None:
        """The bound label descriptions (``None`` without labels)."""
        assert self.binded
        return self._label_shapes

    @property
    def output_shapes(self) -> list:
        """``(name, shape)`` of each output for the whole batch."""
        assert self.binded
        return self._exec_group.get_output_shapes()

    # ------------------------------------------------------------------ parameters
    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)`` on the CPU, synced from the devices when an update
        has changed them."""
        assert self.params_initialized
        if self._params_dirty:
            self._sync_params_from_devices()
        return self._arg_params, self._aux_params

    def init_params(self, initializer: Any = DEFAULT_INITIALIZER, arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Initializes the parameters and auxiliary states, then copies them to the devices.

        Parameters
        ----------
        initializer : Initializer, optional
            Fills the arrays not given; Uniform(0.01) by default.
        arg_params, aux_params : dict of str to NDArray, optional
            Values to copy from; they take precedence over ``initializer``.
        allow_missing : bool
            Whether names missing from ``arg_params``/``aux_params`` are filled by
            ``initializer`` (or, without one, kept) rather than an error.
        force_init : bool
            Whether to initialize again when already initialized.
        allow_extra : bool
            Whether names the module does not have are ignored rather than an error.
        """
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "init_params call ignored.", stacklevel=2)
            return
        assert self.binded, "call bind before initializing the parameters"

        def fill(name: str, arr, cache: dict | None) -> None:
            if cache is None:
                initializer(InitDesc(name, attrs.get(name)), arr)
            elif name in cache:
                if cache[name] is not arr:
                    cache[name].copyto(arr)
            elif not allow_missing:
                raise RuntimeError(f"{name} is not presented")
            elif initializer is not None:
                initializer(InitDesc(name, attrs.get(name)), arr)

        attrs = self._symbol.attr_dict()
        for name, arr in sorted(self._arg_params.items()):
            fill(name, arr, arg_params)
        for name, arr in sorted(self._aux_params.items()):
            fill(name, arr, aux_params)
        self.params_initialized = True
        self._params_dirty = False
        self._exec_group.set_params(self._arg_params, self._aux_params, allow_extra=allow_extra)

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        """Assigns parameter and auxiliary values (see ``BaseModule.set_params``); with
        ``allow_missing`` they go straight to the devices."""
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init,
                             allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
            return
        self._exec_group.set_params(arg_params, aux_params, allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    def _sync_params_from_devices(self) -> None:
        """Copies the devices' (averaged) parameters into ``_arg_params``/``_aux_params``."""
        self._exec_group.get_params(self._arg_params, self._aux_params)
        self._params_dirty = False

    # ------------------------------------------------------------------ binding
    def bind(self, data_shapes: list, label_shapes: list | None = None,
             for_training: bool = True, inputs_need_grad: bool = False,
             force_rebind: bool = False, shared_module: Module | None = None,
             grad_req: Any = "write") -> None:
        """Binds the executors for whole-batch ``data_shapes`` and ``label_shapes``.

        Parameters
        ----------
        data_shapes : list of (str, tuple) or DataDesc
            Typically ``data_iter.provide_data``.
        label_shapes : list of (str, tuple) or DataDesc, optional
            Typically ``data_iter.provide_label``.
        for_training : bool
            Whether backward will run.
        inputs_need_grad : bool
            Whether the data inputs get gradients.
        force_rebind : bool
            Bind again even if already bound (e.g. to switch to prediction).
        shared_module : Module, optional
            A bound module (another bucket) whose parameters and memory are shared.
        grad_req : str, list or dict
            ``'write'``, ``'add'`` or ``'null'``, globally or per argument.
        """
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        if not for_training and inputs_need_grad:
            raise MXNetValueError("inputs_need_grad needs for_training=True")
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        shared_group = None
        if shared_module is not None:
            if not (isinstance(shared_module, Module) and shared_module.binded
                    and shared_module.params_initialized):
                raise MXNetValueError("shared_module must be a bound Module with parameters")
            shared_group = shared_module._exec_group
            if len(shared_group.execs) < len(self._context):
                raise MXNetValueError("shared_module has fewer devices than this module")
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes,
            self._label_shapes, self._param_names, for_training, inputs_need_grad,
            shared_group, logger=self.logger, fixed_param_names=self._fixed_param_names,
            grad_req=grad_req, group2ctxs=self._group2ctxs, state_names=self._state_names)
        self._total_exec_bytes = self._exec_group._total_exec_bytes
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            # re-binding: the devices get the parameters already initialized
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            assert self._arg_params is None and self._aux_params is None
            self._arg_params = {
                name: nd.zeros(block[0].shape, dtype=block[0].dtype)
                for name, block in zip(self._param_names, self._exec_group.param_arrays,
                                       strict=True)
            }
            self._aux_params = {
                name: nd.zeros(block[0].shape, dtype=block[0].dtype)
                for name, block in zip(self._aux_names, self._exec_group.aux_arrays,
                                       strict=True)
            }
        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)
        self.binded = True

    def reshape(self, data_shapes: list, label_shapes: list | None = None) -> None:
        """Reshapes the executors for new whole-batch input shapes."""
        assert self.binded
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        self._exec_group.reshape(self._data_shapes, self._label_shapes)

    # ------------------------------------------------------------------ optimizer
    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Installs the optimizer and the kvstore.

        With one device and a non-distributed kvstore name no kvstore is used. Updates
        run on the kvstore when it can hold the optimizer (and ``MXNET_UPDATE_ON_KVSTORE``
        is not 0), else locally through an updater. A named optimizer gets
        ``rescale_grad = 1 / batch_size`` unless given.

        Parameters
        ----------
        kvstore : str, KVStore or None
        optimizer : str or Optimizer
        optimizer_params : dict or tuple of pairs
            Arguments of a named optimizer.
        force_init : bool
            Whether to install again when already installed.
        """
        assert self.binded and self.params_initialized
        opt = _optimizer_module()
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        if self._params_dirty:
            self._sync_params_from_devices()
        kvstore, update_on_kvstore = _create_kvstore(kvstore, len(self._context),
                                                     self._arg_params)
        batch_size = self._exec_group.batch_size
        if kvstore and "dist" in kvstore.type and "_sync" in kvstore.type:
            batch_size *= kvstore.num_workers
        rescale_grad = 1.0 / batch_size
        param_names = self._exec_group.param_names
        idx2name = {}
        if update_on_kvstore:
            idx2name.update(enumerate(param_names))
        else:
            n = len(self._context)
            for k in range(n):
                idx2name.update({i * n + k: name for i, name in enumerate(param_names)})
        if isinstance(optimizer, str):
            optimizer_params = dict(optimizer_params)
            optimizer_params.setdefault("rescale_grad", rescale_grad)
            optimizer = opt.create(optimizer, sym=self.symbol, param_idx2name=idx2name,
                                   **optimizer_params)
        else:
            if not isinstance(optimizer, opt.Optimizer):
                raise MXNetValueError("optimizer must be a name or an Optimizer")
            if optimizer.rescale_grad != rescale_grad:
                warnings.warn(
                    "Optimizer created manually outside Module but rescale_grad is not "
                    f"normalized to 1.0/batch_size/num_workers ({optimizer.rescale_grad} vs. "
                    f"{rescale_grad}). Is this intended?", stacklevel=2)
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name.copy()
        self._optimizer = optimizer
        self._kvstore = kvstore
        self._update_on_kvstore = update_on_kvstore
        self._updater = None
        if kvstore:
            if self._compression_params:
                kvstore.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kvstore.set_optimizer(self._optimizer)
            _initialize_kvstore(kvstore=kvstore, param_arrays=self._exec_group.param_arrays,
                                arg_params=self._arg_params, param_names=self._param_names,
                                update_on_kvstore=update_on_kvstore)
        if not update_on_kvstore:
            self._updater = opt.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module: Module) -> None:
        """Uses the optimizer, kvstore and updater of ``shared_module`` (another bucket)."""
        assert shared_module.optimizer_initialized
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    def save_optimizer_states(self, fname: str) -> None:
        """Saves the optimizer (updater) states to ``fname``."""
        assert self.optimizer_initialized
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
        else:
            with open(fname, "wb") as fout:
                fout.write(self._updater.get_states())

    def load_optimizer_states(self, fname: str) -> None:
        """Loads optimizer (updater) states saved by ``save_optimizer_states``."""
        assert self.optimizer_initialized
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
        else:
            with open(fname, "rb") as fin:
                self._updater.set_states(fin.read())

    # ------------------------------------------------------------------ computation
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Runs forward on ``data_batch``, first reshaping the executors when its data
        shapes differ from the bound ones.

        Parameters
        ----------
        data_batch : DataBatch or list of DataBatch
            A list gives one (already sliced) batch per device.
        is_train : bool, optional
            ``self.for_training`` by default.
        """
        assert self.binded and self.params_initialized
        curr_shapes = tuple(tuple(d.shape) for d in self._data_shapes)
        if isinstance(data_batch, list):
            new_shapes = []
            for i in range(len(data_batch[0].data)):
                shape = data_batch[0].data[i].shape
                if any(db.data[i].shape != shape for db in data_batch):
                    raise MXNetValueError("All data batches in a list need to have the same shape")
                new_shapes.append((len(data_batch) * shape[0],) + tuple(shape[1:]))
            new_shapes = tuple(new_shapes)
        else:
            new_shapes = tuple(tuple(d.shape) for d in data_batch.data)
        if curr_shapes != new_shapes:
            if getattr(data_batch, "provide_data", None):
                new_dshape = data_batch.provide_data
            else:
                new_dshape = [DataDesc(d.name, shape, d.dtype, d.layout)
                              for d, shape in zip(self._data_shapes, new_shapes, strict=True)]
            if getattr(data_batch, "provide_label", None):
                new_lshape = data_batch.provide_label
            elif getattr(data_batch, "label", None) and self._label_shapes:
                new_lshape = [DataDesc(d.name, j.shape, d.dtype, d.layout)
                              for d, j in zip(self._label_shapes, data_batch.label,
                                              strict=False)]
            else:
                new_lshape = None
            self.reshape(new_dshape, new_lshape)
        self._exec_group.forward(data_batch, is_train)

    def backward(self, out_grads: Any = None) -> None:
        """Runs backward (see ``BaseModule.backward``)."""
        assert self.binded and self.params_initialized
        self._exec_group.backward(out_grads=out_grads)

    def update(self) -> None:
        """Updates the parameters from the last gradients: through the kvstore (which
        sums the devices' gradients) and the optimizer, wherever it runs."""
        assert self.binded and self.params_initialized and self.optimizer_initialized
        self._params_dirty = True
        group = self._exec_group
        if self._update_on_kvstore:
            _update_params_on_kvstore(group.param_arrays, group.grad_arrays, self._kvstore,
                                      group.param_names)
        else:
            _update_params(group.param_arrays, group.grad_arrays, updater=self._updater,
                           num_device=len(self._context), kvstore=self._kvstore,
                           param_names=group.param_names)
        # Where the core runs the schedule, its steps are logged here, as MXNet logs
        # them during the update.
        log_steps = getattr(getattr(self._optimizer, "lr_scheduler", None), "_log_core_steps", None)
        if log_steps is not None:
            log_steps()

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """The outputs of the last forward: ``[out1, out2]`` merged over devices, or
        ``[[out1_dev1, out1_dev2], ...]``."""
        assert self.binded and self.params_initialized
        return self._exec_group.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """The data inputs' gradients of the last backward (bind with
        ``inputs_need_grad``)."""
        assert self.binded and self.params_initialized and self.inputs_need_grad
        return self._exec_group.get_input_grads(merge_multi_context=merge_multi_context)

    def get_states(self, merge_multi_context: bool = True) -> list:
        """The state arrays per device (``merge_multi_context`` must be ``False``)."""
        assert self.binded and self.params_initialized
        return self._exec_group.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states: list | None = None, value: Any = None) -> None:
        """Sets the states from per-device arrays or to a scalar ``value``."""
        assert self.binded and self.params_initialized
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric, labels: list, pre_sliced: bool = False) -> None:
        """Updates ``eval_metric`` with the last outputs and ``labels``."""
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon) -> None:
        """Installs ``mon`` on every executor."""
        assert self.binded
        self._exec_group.install_monitor(mon)

    def prepare(self, data_batch: Any, sparse_row_id_fn=None) -> None:
        """Gets ready for ``data_batch``; row-sparse parameters are not supported, so only
        a warning is given when ``sparse_row_id_fn`` is passed."""
        assert self.binded
        if sparse_row_id_fn is not None:
            warnings.warn(UserWarning("rsmx has no row_sparse parameters: sparse_row_id_fn "
                                      "is not invoked."), stacklevel=2)

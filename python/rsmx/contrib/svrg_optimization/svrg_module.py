"""``SVRGModule``: a Module trained by stochastic variance-reduced gradients. Every
``update_freq`` epochs it takes a snapshot of the weights and the full gradient over the
training data there; each batch's gradient is then corrected to
``g(w) - g(snapshot) + full gradient`` before the optimizer applies it."""

from __future__ import annotations

import logging
from typing import Any

from ... import context as ctx_mod
from ... import ndarray as nd
from ... import optimizer as opt
from ...model import _create_kvstore
from ...module import Module
from .svrg_optimizer import _SVRGOptimizer

__all__ = ["SVRGModule"]


class SVRGModule(Module):
    """A :class:`Module` trained by SVRG; takes Module's arguments and ``update_freq``, the
    number of epochs between full-gradient passes (a positive int).

    A second module over the same symbol (``_mod_aux``) holds the snapshot weights and
    computes each batch's gradient there."""

    def __init__(self, symbol: Any, data_names: Any = ("data",), label_names: Any = ("softmax_label",),
                 logger: Any = logging, context: Any = None, work_load_list: Any = None,
                 fixed_param_names: Any = None, state_names: Any = None, group2ctxs: Any = None,
                 compression_params: Any = None, update_freq: Any = None) -> None:
        context = ctx_mod.cpu() if context is None else context
        super().__init__(symbol, data_names=data_names, label_names=label_names, logger=logger,
                         context=context, work_load_list=work_load_list,
                         fixed_param_names=fixed_param_names, state_names=state_names,
                         group2ctxs=group2ctxs, compression_params=compression_params)
        if not isinstance(update_freq, int) or isinstance(update_freq, bool):
            raise TypeError("update_freq in SVRGModule must be an integer to represent the frequency for "
                            "calculating full gradients")
        if update_freq <= 0:
            raise ValueError("update_freq in SVRGModule must be a positive integer to represent the frequency "
                             "for calculating full gradients")
        self.update_freq = update_freq
        self._mod_aux = Module(symbol, data_names, label_names, logger, context, work_load_list,
                               fixed_param_names, state_names, group2ctxs, compression_params)
        self._param_dict: list[dict[str, Any]] | None = None
        self._ctx_len = len(self._context)

    def _reset_bind(self) -> None:
        super()._reset_bind()
        self._mod_aux._reset_bind()

    def reshape(self, data_shapes: list, label_shapes: list | None = None) -> None:
        super().reshape(data_shapes, label_shapes=label_shapes)
        self._mod_aux.reshape(data_shapes, label_shapes=label_shapes)

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False, shared_module: Any = None,
             grad_req: Any = "write") -> None:
        super().bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind,
                     shared_module, grad_req)
        if for_training:
            self._mod_aux.bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind,
                               shared_module, grad_req)

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),), force_init: bool = False) -> None:
        """Installs an ``_SVRGOptimizer`` around ``optimizer``; with a KVStore, also a key
        ``<param>_full`` per parameter, where the workers' full gradients are summed."""
        self._param_dict = [{name: nd.zeros(value.shape, ctx=self._context[i])
                             for name, value in self.get_params()[0].items()} for i in range(self._ctx_len)]
        svrg = self._create_optimizer(_SVRGOptimizer.__name__, default_opt=optimizer, kvstore=kvstore,
                                      optimizer_params=optimizer_params)
        super().init_optimizer(kvstore=kvstore, optimizer=svrg, optimizer_params=optimizer_params,
                               force_init=force_init)
        if self._kvstore:
            for idx, param_on_devs in enumerate(self._exec_group.param_arrays):
                name = self._exec_group.param_names[idx]
                self._kvstore.init(name + "_full", nd.zeros(self._arg_params[name].shape))
                if self._update_on_kvstore:
                    self._kvstore.pull(name + "_full", param_on_devs, priority=-idx)

    def _create_optimizer(self, optimizer: str, default_opt: Any, kvstore: Any, optimizer_params: Any) -> Any:
        """The ``_SVRGOptimizer`` wrapping ``default_opt``, with the indices of the
        full-gradient keys after the parameters'."""
        batch_size = self._exec_group.batch_size
        kv_store, update_on_kvstore = _create_kvstore(kvstore, self._ctx_len, self._arg_params)
        if kv_store and "dist" in kv_store.type and "_sync" in kv_store.type:
            batch_size *= kv_store.num_workers
        idx2name: dict[int, str] = {}
        if update_on_kvstore:
            idx2name.update(enumerate(self._exec_group.param_names))
        else:
            for k in range(self._ctx_len):
                idx2name.update({i * self._ctx_len + k: n for i, n in enumerate(self._exec_group.param_names)})
        for key in self._param_dict[0]:
            idx2name[max(idx2name) + 1] = key + "_full"
        params = dict(optimizer_params)
        params.setdefault("rescale_grad", 1.0 / batch_size)
        params["default_optimizer"] = default_opt
        params["param_idx2name"] = idx2name
        return opt.create(optimizer, **params)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        super().forward(data_batch, is_train)
        if is_train:
            self._mod_aux.forward(data_batch, is_train)

    def backward(self, out_grads: Any = None) -> None:
        super().backward(out_grads)
        if self._mod_aux.binded:
            self._mod_aux.backward(out_grads)

    def update(self) -> None:
        """Corrects the gradients by the SVRG rule, then updates as Module does."""
        self._update_svrg_gradients()
        super().update()

    def update_full_grads(self, train_data: Any) -> None:
        """Takes the current weights as the snapshot and computes the average gradient
        there over every batch of ``train_data`` (summed over the workers' KVStore keys)."""
        param_names = self._exec_group.param_names
        arg, aux = self.get_params()
        self._mod_aux.set_params(arg_params=arg, aux_params=aux)
        for per_ctx in self._param_dict:
            for name, value in per_ctx.items():
                per_ctx[name] = nd.zeros(value.shape, ctx=value.context, dtype=value.dtype)
        train_data.reset()
        nbatch = 0
        padding = 0
        for batch in train_data:
            self._mod_aux.forward(batch, is_train=True)
            self._mod_aux.backward()
            nbatch += 1
            for c in range(self._ctx_len):
                for index, name in enumerate(param_names):
                    grads = self._mod_aux._exec_group.grad_arrays[index][c]
                    self._param_dict[c][name] = self._param_dict[c][name] + grads
            padding = batch.pad
        true_num_batch = nbatch - padding / train_data.batch_size
        for name in param_names:
            grad_list = []
            for c in range(self._ctx_len):
                self._param_dict[c][name] /= true_num_batch
                grad_list.append(self._param_dict[c][name])
            if self._kvstore:
                self._accumulate_kvstore(name, grad_list)

    def _accumulate_kvstore(self, key: str, value: list) -> None:
        """Sums the workers' full gradients of ``key`` in the KVStore, then shares them
        out over the devices."""
        self._kvstore.push(key + "_full", value)
        self._kvstore._barrier()
        self._kvstore.pull(key + "_full", value)
        for c in range(self._ctx_len):
            self._param_dict[c][key] = value[c] / self._ctx_len

    def _update_svrg_gradients(self) -> None:
        """Each gradient becomes ``g(w) - g(snapshot) + full gradient``, in place."""
        param_names = self._exec_group.param_names
        for c in range(self._ctx_len):
            for index, name in enumerate(param_names):
                grad = self._exec_group.grad_arrays[index][c]
                grad -= self._mod_aux._exec_group.grad_arrays[index][c]
                grad += self._param_dict[c][name]

    def _fit_epoch_begins(self, epoch: int, train_data: Any) -> None:
        if epoch % self.update_freq == 0:
            self.update_full_grads(train_data)
            train_data.reset()

"""``mx.mod.SequentialModule``: modules chained one after another, each one's outputs the
next one's data, trained and run as one module."""

from __future__ import annotations

import copy
import logging
from typing import Any

from ..base import MXNetError
from ..initializer import Uniform
from .base_module import BaseModule


class SequentialModule(BaseModule):
    """A chain of modules: the data goes into the first, each module's outputs are the
    next one's data, and the last one's outputs are the chain's. Gradients flow back
    through the chain in ``backward``.

    Modules added with ``take_labels=True`` get the batch's labels (and update the
    metric); with ``auto_wiring=True`` the previous module's outputs are renamed to the
    module's data names.
    """

    META_TAKE_LABELS = "take_labels"
    META_AUTO_WIRING = "auto_wiring"

    def __init__(self, logger: Any = logging) -> None:
        super().__init__(logger=logger)
        self._modules: list[BaseModule] = []
        self._metas: list[dict] = []
        self._label_shapes: Any = None
        self._meta_keys = {self.META_TAKE_LABELS, self.META_AUTO_WIRING}

    def add(self, module: BaseModule, **kwargs: Any) -> SequentialModule:
        """Appends ``module`` to the chain (its keyword arguments are its meta settings:
        ``take_labels``, ``auto_wiring``); returns the chain, so calls can be chained."""
        unknown = set(kwargs) - self._meta_keys
        if unknown:
            raise MXNetError(f"SequentialModule.add: unknown meta {sorted(unknown)} (known: {sorted(self._meta_keys)})")
        self._modules.append(module)
        self._metas.append(kwargs)
        self.binded = self.params_initialized = self.optimizer_initialized = False
        return self

    def _require(self, bound: bool = True, params: bool = False, optimizer: bool = False) -> None:
        if bound and not self.binded:
            raise MXNetError("SequentialModule: call bind first")
        if params and not self.params_initialized:
            raise MXNetError("SequentialModule: call init_params first")
        if optimizer and not self.optimizer_initialized:
            raise MXNetError("SequentialModule: call init_optimizer first")

    @property
    def data_names(self) -> list[str]:
        return self._modules[0].data_names if self._modules else []

    @property
    def output_names(self) -> list[str]:
        return self._modules[-1].output_names if self._modules else []

    @property
    def data_shapes(self) -> list:
        self._require()
        return self._modules[0].data_shapes

    @property
    def label_shapes(self) -> Any:
        self._require()
        return self._label_shapes

    @property
    def output_shapes(self) -> list:
        self._require()
        return self._modules[-1].output_shapes

    def get_params(self) -> tuple[dict, dict]:
        """Every module's parameters, merged."""
        self._require(params=True)
        arg_params: dict = {}
        aux_params: dict = {}
        for module in self._modules:
            arg, aux = module.get_params()
            arg_params.update(arg)
            aux_params.update(aux)
        return arg_params, aux_params

    def init_params(
        self,
        initializer: Any = Uniform(0.01),  # noqa: B008 - MXNet's default
        arg_params: dict | None = None,
        aux_params: dict | None = None,
        allow_missing: bool = False,
        force_init: bool = False,
        allow_extra: bool = False,
    ) -> None:
        """Initialises every module's parameters; two modules may not share a name."""
        if self.params_initialized and not force_init:
            return
        self._require()
        for module in self._modules:
            module.init_params(
                initializer=initializer,
                arg_params=arg_params,
                aux_params=aux_params,
                allow_missing=allow_missing,
                force_init=force_init,
                allow_extra=allow_extra,
            )
        owners: list[dict[str, int]] = [{}, {}]
        for i, module in enumerate(self._modules):
            for kind, names in zip(owners, module.get_params(), strict=True):
                for name in names:
                    if name in kind:
                        raise MXNetError(
                            f"SequentialModule: duplicated parameter name '{name}' in module {i} "
                            f"({type(module).__name__}), already used in module {kind[name]}"
                        )
                    kind[name] = i
        self.params_initialized = True

    def bind(
        self,
        data_shapes: list,
        label_shapes: list | None = None,
        for_training: bool = True,
        inputs_need_grad: bool = False,
        force_rebind: bool = False,
        shared_module: Any = None,
        grad_req: Any = "write",
    ) -> None:
        """Binds the modules in order, each to the previous one's output shapes; all but
        the first compute their input gradients when training."""
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if inputs_need_grad and not for_training:
            raise MXNetError("SequentialModule.bind: inputs_need_grad needs for_training")
        if shared_module is not None:
            raise MXNetError("SequentialModule.bind: a shared module is not supported")
        if not self._modules:
            raise MXNetError("SequentialModule.bind: the chain is empty")
        shapes = data_shapes
        takes_labels = False
        for i, (module, meta) in enumerate(zip(self._modules, self._metas, strict=True)):
            labels = label_shapes if meta.get(self.META_TAKE_LABELS) else None
            takes_labels |= labels is not None
            if meta.get(self.META_AUTO_WIRING):
                names = module.data_names
                if len(names) != len(shapes):
                    raise MXNetError(f"SequentialModule: module {i} takes {len(names)} inputs, the previous one gives {len(shapes)}")
                shapes = [(name, shape) for name, (_, shape) in zip(names, shapes, strict=True)]
            module.bind(
                data_shapes=shapes,
                label_shapes=labels,
                for_training=for_training,
                inputs_need_grad=bool(inputs_need_grad or (for_training and i > 0)),
                force_rebind=force_rebind,
                shared_module=None,
                grad_req=grad_req,
            )
            shapes = module.output_shapes
        self.binded = True
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._label_shapes = label_shapes if takes_labels else None

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd", optimizer_params: Any = (("learning_rate", 0.01),), force_init: bool = False) -> None:
        """Gives every module the optimizer."""
        self._require(params=True)
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        for module in self._modules:
            module.init_optimizer(kvstore=kvstore, optimizer=optimizer, optimizer_params=optimizer_params, force_init=force_init)
        self.optimizer_initialized = True

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Runs the chain forward, each module on the previous one's outputs."""
        self._require(params=True)
        batch = copy.copy(data_batch)
        for i, module in enumerate(self._modules):
            module.forward(batch, is_train=is_train)
            if i + 1 == len(self._modules):
                break
            batch.data = module.get_outputs()
            if hasattr(batch, "provide_data"):
                names = [name for name, _ in module.output_shapes]
                batch.provide_data = [(name, x.shape) for name, x in zip(names, batch.data, strict=True)]

    def backward(self, out_grads: Any = None) -> None:
        """Runs the chain backward, each module's input gradients the output gradients
        of the module before it."""
        self._require(params=True)
        for i in reversed(range(len(self._modules))):
            self._modules[i].backward(out_grads=out_grads)
            if i:
                out_grads = self._modules[i].get_input_grads()

    def update(self) -> None:
        """Updates every module's parameters."""
        self._require(params=True, optimizer=True)
        for module in self._modules:
            module.update()

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """The last module's outputs."""
        self._require(params=True)
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """The first module's input gradients (bound with ``inputs_need_grad``)."""
        self._require(params=True)
        if not self.inputs_need_grad:
            raise MXNetError("SequentialModule.get_input_grads: bind with inputs_need_grad=True")
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric: Any, labels: list, pre_sliced: bool = False) -> None:
        """Updates the metric from the modules that take labels."""
        self._require(params=True)
        for meta, module in zip(self._metas, self._modules, strict=True):
            if meta.get(self.META_TAKE_LABELS):
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon: Any) -> None:
        """Installs the monitor on every module."""
        self._require()
        for module in self._modules:
            module.install_monitor(mon)

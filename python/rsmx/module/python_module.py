"""Modules written in Python (``PythonModule``), and a loss module whose gradient is a
Python function (``PythonLossModule``): the last stage of a ``SequentialModule``."""

from __future__ import annotations

import logging
from typing import Any

from .. import ndarray as nd
from ..base import MXNetNotImplementedError, MXNetValueError
from ..initializer import Uniform
from .base_module import BaseModule

__all__ = ["PythonModule", "PythonLossModule"]


class PythonModule(BaseModule):
    """A module with no parameters whose computation subclasses write in Python: the
    parameter, optimizer and update calls do nothing; ``_compute_output_shapes``,
    ``forward``, ``backward``, ``get_outputs`` and ``get_input_grads`` are theirs."""

    def __init__(self, data_names: Any, label_names: Any, output_names: Any, logger: Any = logging) -> None:
        super().__init__(logger=logger)
        self._data_names = list(data_names)
        self._label_names = list(label_names) if label_names is not None else None
        self._output_names = list(output_names)
        self._data_shapes: list | None = None
        self._label_shapes: list | None = None
        self._output_shapes: list | None = None

    @property
    def data_names(self) -> list[str]:
        return self._data_names

    @property
    def output_names(self) -> list[str]:
        return self._output_names

    @property
    def data_shapes(self) -> list | None:
        return self._data_shapes

    @property
    def label_shapes(self) -> list | None:
        return self._label_shapes

    @property
    def output_shapes(self) -> list | None:
        return self._output_shapes

    def get_params(self) -> tuple[dict, dict]:
        """No parameters: two empty dicts."""
        return {}, {}

    def init_params(
        self,
        initializer: Any = Uniform(0.01),  # noqa: B008
        arg_params: dict | None = None,
        aux_params: dict | None = None,
        allow_missing: bool = False,  # noqa: FBT001, FBT002
        force_init: bool = False,  # noqa: FBT001, FBT002
        allow_extra: bool = False,  # noqa: FBT001, FBT002
    ) -> None:
        """Nothing to initialise."""

    def update(self) -> None:
        """Nothing to update."""

    def update_metric(self, eval_metric: Any, labels: list, pre_sliced: bool = False) -> None:  # noqa: FBT001, FBT002
        """Updates ``eval_metric`` with the outputs of the last forward pass (nothing
        when bound without labels)."""
        if self._label_shapes is None:
            return
        if pre_sliced:
            raise MXNetNotImplementedError("PythonModule does not support presliced labels")
        eval_metric.update(labels, self.get_outputs())

    def bind(
        self,
        data_shapes: list,
        label_shapes: list | None = None,
        for_training: bool = True,  # noqa: FBT001, FBT002
        inputs_need_grad: bool = False,  # noqa: FBT001, FBT002
        force_rebind: bool = False,  # noqa: FBT001, FBT002
        shared_module: Any = None,
        grad_req: Any = "write",
    ) -> None:
        """Records the input shapes and computes the output shapes."""
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if grad_req != "write":
            raise MXNetValueError("Python module only support write gradient")
        names = [x[0] for x in data_shapes]
        if names != self._data_names:
            raise MXNetValueError(f"PythonModule.bind: data names {names} do not match {self._data_names}")
        if label_shapes is not None:
            labels = [x[0] for x in label_shapes]
            if labels != (self._label_names or []):
                raise MXNetValueError(
                    f"PythonModule.bind: label names {labels} do not match {self._label_names}"
                )
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._data_shapes = list(data_shapes)
        self._label_shapes = list(label_shapes) if label_shapes is not None else None
        self._output_shapes = self._compute_output_shapes()
        self.binded = True

    def _compute_output_shapes(self) -> list:
        """The ``(name, shape)`` of each output, from the bound data and label shapes."""
        raise NotImplementedError

    def init_optimizer(
        self,
        kvstore: Any = "local",
        optimizer: Any = "sgd",
        optimizer_params: Any = (("learning_rate", 0.01),),
        force_init: bool = False,  # noqa: FBT001, FBT002
    ) -> None:
        """No parameters, so no optimizer."""


class PythonLossModule(PythonModule):
    """A loss stage: its output is its input (the scores), and its input gradient is
    ``grad_func(scores, labels)`` (or a subclass's ``_backward_impl``)."""

    def __init__(
        self,
        name: str = "pyloss",
        data_names: Any = ("data",),
        label_names: Any = ("softmax_label",),
        logger: Any = logging,
        grad_func: Any = None,
    ) -> None:
        super().__init__(data_names, label_names, [name + "_output"], logger=logger)
        if len(self._data_names) != 1 or len(self._label_names or []) != 1:
            raise MXNetValueError("PythonLossModule takes exactly one data and one label")
        if grad_func is not None and not callable(grad_func):
            raise MXNetValueError("PythonLossModule: grad_func must be callable")
        self._name = name
        self._scores: Any = None
        self._labels: Any = None
        self._scores_grad: Any = None
        self._grad_func = grad_func

    def _compute_output_shapes(self) -> list:
        return [(self._name + "_output", self._data_shapes[0][1])]

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Keeps the scores (and, when training, the labels) for ``backward``."""
        self._scores = data_batch.data[0]
        if is_train is None:
            is_train = self.for_training
        if is_train:
            self._labels = data_batch.label[0]

    def get_outputs(self, merge_multi_context: bool = True) -> list:  # noqa: FBT001, FBT002
        """The scores of the last forward pass."""
        return [self._scores]

    def backward(self, out_grads: Any = None) -> None:
        """Computes the gradient of the scores."""
        if out_grads is not None:
            raise MXNetValueError("For a loss module, out_grads should be None")
        if not self.for_training:
            raise MXNetValueError("PythonLossModule.backward: the module is not bound for training")
        self._backward_impl()

    def _backward_impl(self) -> None:
        if self._grad_func is None:
            raise NotImplementedError
        grad = self._grad_func(self._scores, self._labels)
        self._scores_grad = grad if isinstance(grad, nd.NDArray) else nd.array(grad)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:  # noqa: FBT001, FBT002
        """The gradient of the scores from the last backward pass."""
        return [self._scores_grad]

    def install_monitor(self, mon: Any) -> None:
        raise MXNetNotImplementedError("PythonLossModule has no executors to monitor")

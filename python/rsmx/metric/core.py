"""The metric base class, the registry and ``create``, and the metrics that take any
outputs: ``CompositeEvalMetric``, ``Loss`` and ``CustomMetric``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy

from .. import ndarray
from .. import registry as _registry
from ..base import MXNetNotImplementedError, MXNetValueError, numeric_types
from ..ndarray import NDArray


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False, shape: bool = False) -> tuple:
    """Checks that labels and predictions match in number (or in shape).

    Parameters
    ----------
    labels, preds : list of NDArray, NDArray or numpy.ndarray
        The labels and the predictions.
    wrap : bool, optional
        Whether to wrap a single NDArray in a list.
    shape : bool, optional
        Compare ``.shape`` rather than ``len()``.

    Returns
    -------
    (labels, preds)

    Raises
    ------
    MXNetValueError
        When they differ.
    """
    if shape:
        label_shape, pred_shape = labels.shape, preds.shape
    else:
        label_shape, pred_shape = len(labels), len(preds)
    if label_shape != pred_shape:
        raise MXNetValueError(
            f"Shape of labels {label_shape} does not match shape of predictions {pred_shape}"
        )
    if wrap:
        if isinstance(labels, NDArray):
            labels = [labels]
        if isinstance(preds, NDArray):
            preds = [preds]
    return labels, preds


def _np(x: Any) -> numpy.ndarray:
    """A numpy copy of an NDArray (numpy arrays pass through)."""
    return x.asnumpy() if isinstance(x, NDArray) else numpy.asarray(x)


def _py(x: Any) -> Any:
    """A numpy float scalar (or 0-d float array) as a Python float, so adding it to a
    Python float gives a double as under numpy 1.x, whatever numpy's promotion rules."""
    if isinstance(x, numpy.floating) or (isinstance(x, numpy.ndarray) and x.ndim == 0 and x.dtype.kind == "f"):
        return float(x)
    return x


def _nd(x: Any) -> NDArray:
    return x if isinstance(x, NDArray) else ndarray.array(x)


class EvalMetric:
    """The base of all metrics.

    Parameters
    ----------
    name : str
        The metric's name, reported by ``get``.
    output_names : list of str, optional
        Which predictions ``update_dict`` uses (all, in order, by default).
    label_names : list of str, optional
        Which labels ``update_dict`` uses (all, in order, by default).
    **kwargs
        Extra configuration kept for ``get_config``. ``has_global_stats=True`` means the
        subclass maintains ``global_sum_metric`` and ``global_num_inst`` itself.
    """

    def __init__(
        self,
        name: str,
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self) -> dict:
        """The metric's configuration, from which ``create`` makes an equal metric."""
        config = self._kwargs.copy()
        config.update(
            {
                "metric": type(self).__name__,
                "name": self.name,
                "output_names": self.output_names,
                "label_names": self.label_names,
            }
        )
        return config

    def update_dict(self, label: dict, pred: dict) -> None:
        """Updates from dicts of name to array, picking ``label_names``/``output_names``."""
        try:
            preds = [pred[n] for n in self.output_names] if self.output_names is not None else list(pred.values())
            labels = [label[n] for n in self.label_names] if self.label_names is not None else list(label.values())
        except KeyError as e:
            raise MXNetValueError(f"{self.name}: no output or label named {e.args[0]!r}") from e
        self.update(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        """Adds a batch: lists of label and prediction NDArrays."""
        raise MXNetNotImplementedError(f"{type(self).__name__} does not implement update")

    def reset(self) -> None:
        """Clears the local and the global statistics."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self) -> None:
        """Clears the local statistics only."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self) -> tuple[Any, Any]:
        """``(name, value)`` of the local statistics; the value is NaN before any update."""
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.sum_metric / self.num_inst)

    def get_global(self) -> tuple[Any, Any]:
        """``(name, value)`` since the last ``reset``."""
        if not self._has_global_stats:
            return self.get()
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.global_sum_metric / self.global_num_inst)

    @staticmethod
    def _pairs(name: Any, value: Any) -> list[tuple[str, Any]]:
        names = name if isinstance(name, list) else [name]
        values = value if isinstance(value, list) else [value]
        return list(zip(names, values, strict=False))

    def get_name_value(self) -> list[tuple[str, Any]]:
        """The local values as a list of ``(name, value)`` pairs."""
        return self._pairs(*self.get())

    def get_global_name_value(self) -> list[tuple[str, Any]]:
        """The global values as a list of ``(name, value)`` pairs."""
        if not self._has_global_stats:
            return self.get_name_value()
        return self._pairs(*self.get_global())

    def _add(self, value: Any, count: Any) -> None:
        """Adds a batch's sum and count to the local and global statistics. Values become
        Python floats first, so float32 sums accumulate in double precision as in MXNet."""
        value = float(value)
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += count
        self.global_num_inst += count


register = _registry.get_register_func(EvalMetric, "metric")
alias = _registry.get_alias_func(EvalMetric, "metric")
_create = _registry.get_create_func(EvalMetric, "metric")


def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """Makes a metric.

    Parameters
    ----------
    metric : str, callable, list, dict or EvalMetric
        A registered name or alias (``'acc'``, ``'ce'``, ``'top_k_accuracy'``, ...), a
        function ``f(label, pred)`` (made into a ``CustomMetric``), a list of any of these
        (made into a ``CompositeEvalMetric``) or a metric, returned as it is.
    *args, **kwargs
        Passed to the metric's constructor.

    Returns
    -------
    EvalMetric
    """
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    return _create(metric, *args, **kwargs)


@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get`` returns lists of names and values.

    Parameters
    ----------
    metrics : list, optional
        The metrics, or anything ``create`` accepts for each.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(
        self,
        metrics: list | None = None,
        name: str = "composite",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)
        self.metrics = [create(m) for m in (metrics or [])]

    def add(self, metric: Any) -> None:
        """Adds a metric (or anything ``create`` accepts)."""
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        """The ``index``-th child metric."""
        try:
            return self.metrics[index]
        except IndexError:
            raise MXNetValueError(
                f"Metric index {index} is out of range 0 and {len(self.metrics)}"
            ) from None

    def update_dict(self, labels: dict, preds: dict) -> None:
        if self.label_names is not None:
            labels = OrderedDict(i for i in labels.items() if i[0] in self.label_names)
        if self.output_names is not None:
            preds = OrderedDict(i for i in preds.items() if i[0] in self.output_names)
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self) -> None:
        for metric in getattr(self, "metrics", []):
            metric.reset()

    def reset_local(self) -> None:
        for metric in getattr(self, "metrics", []):
            metric.reset_local()

    def _collect(self, getter: str) -> tuple[list, list]:
        names: list = []
        values: list = []
        for metric in self.metrics:
            name, value = getattr(metric, getter)()
            names.extend([name] if isinstance(name, str) else name)
            values.extend([value] if isinstance(value, numeric_types) else value)
        return names, values

    def get(self) -> tuple[list, list]:
        return self._collect("get")

    def get_global(self) -> tuple[list, list]:
        return self._collect("get_global")

    def get_config(self) -> dict:
        config = super().get_config()
        config["metrics"] = [m.get_config() for m in self.metrics]
        return config


@register
class Loss(EvalMetric):
    """The mean of the predictions, for networks whose outputs are losses; labels are
    ignored.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, name: str = "loss", output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)

    def update(self, _: Any, preds: Any) -> None:
        if isinstance(preds, NDArray):
            preds = [preds]
        for pred in preds:
            pred = _nd(pred)
            self._add(ndarray.sum(pred).asscalar(), pred.size)


@register
class Torch(Loss):
    """``Loss`` under the name ``'torch'`` (kept for compatibility)."""

    def __init__(self, name: str = "torch", output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class Caffe(Loss):
    """``Loss`` under the name ``'caffe'`` (kept for compatibility)."""

    def __init__(self, name: str = "caffe", output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class CustomMetric(EvalMetric):
    """A metric computed by a function of numpy ``(label, pred)`` arrays.

    The function returns either a value (one instance per call) or a
    ``(sum_metric, num_inst)`` pair.

    Parameters
    ----------
    feval : callable
        ``feval(label, pred)``.
    name : str, optional
        The metric's name; the function's name by default (``custom(<lambda>)`` for
        lambdas).
    allow_extra_outputs : bool, optional
        Whether there may be more predictions than labels.
    output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(
        self,
        feval: Callable[[numpy.ndarray, numpy.ndarray], Any],
        name: str | None = None,
        allow_extra_outputs: bool = False,
        output_names: Any = None,
        label_names: Any = None,
    ) -> None:
        if name is None:
            name = feval.__name__
            if "<" in name:
                name = f"custom({name})"
        super().__init__(
            name,
            feval=feval,
            allow_extra_outputs=allow_extra_outputs,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=True,
        )
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels: Any, preds: Any) -> None:
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        for pred, label in zip(preds, labels, strict=False):
            reval = self._feval(_np(label), _np(pred))
            if isinstance(reval, tuple):
                if len(reval) != 2:
                    raise MXNetValueError(
                        f"{self.name}: feval returned a tuple of {len(reval)}; expected (sum_metric, num_inst)"
                    )
                sum_metric, num_inst = _py(reval[0]), _py(reval[1])
                self.sum_metric += sum_metric
                self.global_sum_metric += sum_metric
                self.num_inst += num_inst
                self.global_num_inst += num_inst
            else:
                reval = _py(reval)
                self.sum_metric += reval
                self.global_sum_metric += reval
                self.num_inst += 1
                self.global_num_inst += 1

    def get_config(self) -> dict:
        raise MXNetNotImplementedError("CustomMetric cannot be serialized")


def np(numpy_feval: Callable, name: str | None = None, allow_extra_outputs: bool = False) -> CustomMetric:
    """Makes a ``CustomMetric`` from a function of numpy ``(label, pred)`` arrays.

    Parameters
    ----------
    numpy_feval : callable
        ``numpy_feval(label, pred)`` returning a value or a ``(sum, count)`` pair.
    name : str, optional
        The metric's name (the function's by default).
    allow_extra_outputs : bool, optional
        Whether there may be more predictions than labels.

    Returns
    -------
    CustomMetric
    """

    def feval(label: numpy.ndarray, pred: numpy.ndarray) -> Any:
        return numpy_feval(label, pred)

    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)

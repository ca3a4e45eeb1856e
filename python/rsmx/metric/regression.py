"""Metrics of predicted values and probabilities: ``Perplexity``, ``MAE``, ``MSE``,
``RMSE``, ``CrossEntropy``, ``NegativeLogLikelihood`` and ``PearsonCorrelation``."""

from __future__ import annotations

import math
from typing import Any

import numpy

from .. import ndarray
from ..base import MXNetValueError
from .core import EvalMetric, _nd, _np, alias, check_label_shapes, register


@register
class Perplexity(EvalMetric):
    """``exp`` of the mean negative log probability of the labels.

    Parameters
    ----------
    ignore_label : int or None
        A label value whose examples are left out.
    axis : int, optional
        The class axis of the predicted probabilities.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(
        self,
        ignore_label: int | None,
        axis: int = -1,
        name: str = "perplexity",
        output_names: Any = None,
        label_names: Any = None,
    ) -> None:
        super().__init__(
            name, ignore_label=ignore_label, output_names=output_names, label_names=label_names, has_global_stats=True
        )
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        check_label_shapes(labels, preds)
        loss = 0.0
        num = 0
        for label, pred in zip(labels, preds, strict=False):
            label, pred = _nd(label), _nd(pred)
            if label.size != pred.size / pred.shape[-1]:
                raise MXNetValueError(f"Perplexity: shape mismatch: {label.shape} vs. {pred.shape}")
            label = label.as_in_context(pred.context).reshape((label.size,))
            pred = ndarray.pick(pred, label.astype(dtype="int32"), axis=self.axis)
            if self.ignore_label is not None:
                ignore = (label == self.ignore_label).astype(pred.dtype)
                num -= float(ndarray.sum(ignore).asscalar())
                pred = pred * (1 - ignore) + ignore
            loss -= float(ndarray.sum(ndarray.log(ndarray.maximum(1e-10, pred))).asscalar())
            num += pred.size
        self.sum_metric += loss
        self.global_sum_metric += loss
        self.num_inst += num
        self.global_num_inst += num

    def get(self) -> tuple[str, float]:
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.sum_metric / self.num_inst))

    def get_global(self) -> tuple[str, float]:
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.global_sum_metric / self.global_num_inst))


def _as_columns(label: Any, pred: Any) -> tuple[numpy.ndarray, numpy.ndarray]:
    label, pred = _np(label), _np(pred)
    if label.ndim == 1:
        label = label.reshape(label.shape[0], 1)
    if pred.ndim == 1:
        pred = pred.reshape(pred.shape[0], 1)
    return label, pred


class _RegressionMetric(EvalMetric):
    """A per-batch error averaged over batches (not over examples), as in MXNet."""

    def __init__(self, name: str, output_names: Any, label_names: Any) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)

    @staticmethod
    def _error(label: numpy.ndarray, pred: numpy.ndarray) -> Any:
        raise NotImplementedError

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds, strict=False):
            self._add(self._error(*_as_columns(label, pred)), 1)


@register
class MAE(_RegressionMetric):
    """Mean absolute error, averaged per batch.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, name: str = "mae", output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(label: numpy.ndarray, pred: numpy.ndarray) -> Any:
        return numpy.abs(label - pred).mean()


@register
class MSE(_RegressionMetric):
    """Mean squared error, averaged per batch.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, name: str = "mse", output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(label: numpy.ndarray, pred: numpy.ndarray) -> Any:
        return ((label - pred) ** 2.0).mean()


@register
class RMSE(_RegressionMetric):
    """Root mean squared error of each batch, averaged over batches.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, name: str = "rmse", output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(label: numpy.ndarray, pred: numpy.ndarray) -> Any:
        return numpy.sqrt(((label - pred) ** 2.0).mean())


class _LogLoss(EvalMetric):
    """Mean of ``-log(p + eps)`` over examples, ``p`` the predicted probability of the label."""

    def __init__(self, eps: float, name: str, output_names: Any, label_names: Any) -> None:
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names, has_global_stats=True)
        self.eps = eps

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds, strict=False):
            label, pred = _np(label).ravel(), _np(pred)
            n = pred.shape[0]
            if label.shape[0] != n:
                raise MXNetValueError(f"{self.name}: {label.shape[0]} labels for {n} predictions")
            prob = pred[numpy.arange(n, dtype=numpy.int64), numpy.int64(label)]
            self._add((-numpy.log(prob + self.eps)).sum(), n)


@register
@alias("ce")
class CrossEntropy(_LogLoss):
    """Cross entropy of predicted class probabilities (rows) and integer labels.

    Parameters
    ----------
    eps : float, optional
        Added to each probability before the log.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, eps: float = 1e-12, name: str = "cross-entropy", output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
@alias("nll_loss")
class NegativeLogLikelihood(_LogLoss):
    """Negative log likelihood of integer labels under predicted class probabilities.

    Parameters
    ----------
    eps : float, optional
        Added to each probability before the log.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, eps: float = 1e-12, name: str = "nll-loss", output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
@alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of predictions and labels.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    average : {'macro', 'micro'}, optional
        ``'macro'`` averages the correlation of each batch; ``'micro'`` computes one
        correlation over all examples, with running means and sums of squares.
    """

    def __init__(self, name: str = "pearsonr", output_names: Any = None, label_names: Any = None, average: str = "macro") -> None:
        if average not in ("macro", "micro"):
            raise MXNetValueError(f"PearsonCorrelation: average must be 'macro' or 'micro', got {average!r}")
        self.average = average
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)
        if self.average == "micro":
            self.reset_micro()

    def reset_micro(self) -> None:
        """Clears the running statistics of ``'micro'`` averaging."""
        self._sse_p = 0
        self._mean_p = 0
        self._sse_l = 0
        self._mean_l = 0
        self._pred_nums = 0
        self._label_nums = 0
        self._conv = 0

    def reset(self) -> None:
        super().reset()
        if self.average == "micro":
            self.reset_micro()

    @staticmethod
    def update_variance(new_values: numpy.ndarray, *aggregate: Any) -> tuple:
        """Welford-style update of ``(count, mean, sum of squared deviations)``."""
        count, mean, m_2 = aggregate
        count += len(new_values)
        delta = new_values - mean
        mean += numpy.sum(delta / count)
        delta_2 = new_values - mean
        m_2 += numpy.sum(delta * delta_2)
        return count, mean, m_2

    def update_cov(self, label: numpy.ndarray, pred: numpy.ndarray) -> None:
        """Adds a batch's co-deviations from the running means."""
        self._conv = self._conv + numpy.sum((label - self._mean_l) * (pred - self._mean_p))

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds, strict=False):
            check_label_shapes(label, pred, False, True)
            label = _np(label).ravel().astype(numpy.float64)
            pred = _np(pred).ravel().astype(numpy.float64)
            if self.average == "macro":
                self._add(numpy.corrcoef(pred, label)[0, 1], 1)
            else:
                self.global_num_inst += 1
                self.num_inst += 1
                self._label_nums, self._mean_l, self._sse_l = self.update_variance(
                    label, self._label_nums, self._mean_l, self._sse_l
                )
                self.update_cov(label, pred)
                self._pred_nums, self._mean_p, self._sse_p = self.update_variance(
                    pred, self._pred_nums, self._mean_p, self._sse_p
                )

    def get(self) -> tuple[str, Any]:
        if self.num_inst == 0:
            return (self.name, float("nan"))
        if self.average == "macro":
            return (self.name, self.sum_metric / self.num_inst)
        n = self._label_nums
        denom = (n - 1) * numpy.sqrt(self._sse_p / (n - 1)) * numpy.sqrt(self._sse_l / (n - 1))
        return (self.name, float(self._conv / denom))

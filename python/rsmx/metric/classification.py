"""Classification metrics: ``Accuracy``, ``TopKAccuracy``, ``F1``, ``MCC`` and ``PCC``."""

from __future__ import annotations

import math
from typing import Any

import numpy

from .. import ndarray
from ..base import MXNetValueError
from .core import EvalMetric, _nd, _np, alias, check_label_shapes, register

_HOST_ARGMAX_DTYPES = (numpy.float32, numpy.float64, numpy.dtype(numpy.float32),
                       numpy.dtype(numpy.float64))


def _argmax(scores: Any, axis: int) -> Any:
    """``ndarray.argmax(scores, axis)``, as MXNet's metric computes it.

    For float32 and float64 scores it is taken on the host: the scores are copied once
    and no operator goes through the engine, with the same result (the first maximum,
    or the first NaN, along ``axis``; the index in the scores' dtype).
    """
    dtype = getattr(scores, "dtype", None)
    ndim = len(getattr(scores, "shape", ()))
    if (dtype in _HOST_ARGMAX_DTYPES and isinstance(axis, (int, numpy.integer))
            and -ndim <= axis < ndim):
        host = _np(scores)
        return numpy.argmax(host, axis=axis).astype(host.dtype)
    return ndarray.argmax(_nd(scores), axis=axis)


@register
@alias("acc")
class Accuracy(EvalMetric):
    """The fraction of predictions equal to the labels.

    Predictions whose shape differs from the labels' are class scores; their argmax along
    ``axis`` is the predicted class.

    Parameters
    ----------
    axis : int, optional
        The class axis of score predictions.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(
        self,
        axis: int = 1,
        name: str = "accuracy",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names, has_global_stats=True)
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred_label in zip(labels, preds, strict=False):
            if pred_label.shape != label.shape:
                pred_label = _argmax(pred_label, self.axis)
            pred = _np(pred_label).astype("int32").ravel()
            lab = _np(label).astype("int32").ravel()
            check_label_shapes(lab, pred)
            self._add((pred == lab).sum(), len(pred))


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """The fraction of examples whose label is among the ``top_k`` highest scores.

    Parameters
    ----------
    top_k : int
        How many of the best classes count; more than 1 (use ``Accuracy`` for 1).
    name, output_names, label_names
        As for ``EvalMetric``; ``_<top_k>`` is appended to the name.
    """

    def __init__(
        self,
        top_k: int = 1,
        name: str = "top_k_accuracy",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(name, top_k=top_k, output_names=output_names, label_names=label_names, has_global_stats=True)
        self.top_k = top_k
        if self.top_k <= 1:
            raise MXNetValueError(f"TopKAccuracy needs top_k > 1 (use Accuracy for 1), got {top_k}")
        self.name += f"_{self.top_k}"

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds, strict=False):
            if len(pred.shape) > 2:
                raise MXNetValueError(f"TopKAccuracy: predictions must have at most 2 dims, got {pred.shape}")
            order = numpy.argpartition(_np(pred).astype("float32"), -self.top_k)
            lab = _np(label).astype("int32")
            check_label_shapes(lab, order)
            num_samples = order.shape[0]
            if order.ndim == 1:
                # As in MXNet 1.9.1, this case counts towards the local statistics only.
                self.sum_metric += float((order.ravel() == lab.ravel()).sum())
            else:
                num_classes = order.shape[1]
                for j in range(min(num_classes, self.top_k)):
                    hits = float((order[:, num_classes - 1 - j].ravel() == lab.ravel()).sum())
                    self.sum_metric += hits
                    self.global_sum_metric += hits
            self.num_inst += num_samples
            self.global_num_inst += num_samples


class _BinaryStats:
    """Confusion counts of a binary classifier, local and global."""

    _FIELDS = ("true_positives", "false_negatives", "false_positives", "true_negatives")

    def __init__(self) -> None:
        self.reset_stats()

    def update_binary_stats(self, label: Any, pred: Any) -> None:
        """Adds a batch of two-class scores ``pred`` (argmax along axis 1) and labels."""
        pred = _np(pred)
        label = _np(label).astype("int32")
        pred_label = numpy.argmax(pred, axis=1)
        check_label_shapes(label, pred)
        if len(numpy.unique(label)) > 2:
            raise MXNetValueError(f"{type(self).__name__} supports binary classification only")
        pred_true = pred_label == 1
        pred_false = 1 - pred_true
        label_true = label == 1
        label_false = 1 - label_true
        counts = {
            "true_positives": (pred_true * label_true).sum(),
            "false_positives": (pred_true * label_false).sum(),
            "false_negatives": (pred_false * label_true).sum(),
            "true_negatives": (pred_false * label_false).sum(),
        }
        for field, n in counts.items():
            setattr(self, field, getattr(self, field) + int(n))
            setattr(self, "global_" + field, getattr(self, "global_" + field) + int(n))

    @staticmethod
    def _ratio(num: int, den: int) -> float:
        return float(num) / den if den > 0 else 0.0

    @staticmethod
    def _f(p: float, r: float) -> float:
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    @property
    def precision(self) -> float:
        return self._ratio(self.true_positives, self.true_positives + self.false_positives)

    @property
    def global_precision(self) -> float:
        return self._ratio(self.global_true_positives, self.global_true_positives + self.global_false_positives)

    @property
    def recall(self) -> float:
        return self._ratio(self.true_positives, self.true_positives + self.false_negatives)

    @property
    def global_recall(self) -> float:
        return self._ratio(self.global_true_positives, self.global_true_positives + self.global_false_negatives)

    @property
    def fscore(self) -> float:
        return self._f(self.precision, self.recall)

    @property
    def global_fscore(self) -> float:
        return self._f(self.global_precision, self.global_recall)

    def matthewscc(self, use_global: bool = False) -> float:
        """Matthews correlation coefficient; zero factors of the denominator are skipped."""
        pre = "global_" if use_global else ""
        if not (self.global_total_examples if use_global else self.total_examples):
            return 0.0
        tp, fp, fn, tn = (float(getattr(self, pre + f)) for f in
                          ("true_positives", "false_positives", "false_negatives", "true_negatives"))
        denom = 1.0
        for t in (tp + fp, tp + fn, tn + fp, tn + fn):
            if t != 0.0:
                denom *= t
        return ((tp * tn) - (fp * fn)) / math.sqrt(denom)

    @property
    def total_examples(self) -> int:
        return sum(getattr(self, f) for f in self._FIELDS)

    @property
    def global_total_examples(self) -> int:
        return sum(getattr(self, "global_" + f) for f in self._FIELDS)

    def local_reset_stats(self) -> None:
        for f in self._FIELDS:
            setattr(self, f, 0)

    def reset_stats(self) -> None:
        for f in self._FIELDS:
            setattr(self, f, 0)
            setattr(self, "global_" + f, 0)


class _BinaryMetric(EvalMetric):
    """F1 and MCC: a score of the confusion counts, per batch (macro) or overall (micro)."""

    def __init__(self, name: str, output_names: Any, label_names: Any, average: str) -> None:
        if average not in ("macro", "micro"):
            raise MXNetValueError(f"{type(self).__name__}: average must be 'macro' or 'micro', got {average!r}")
        self.average = average
        self.metrics = _BinaryStats()
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)

    def _score(self, use_global: bool) -> float:
        raise NotImplementedError

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds, strict=False):
            self.metrics.update_binary_stats(label, pred)
        if self.average == "macro":
            self.sum_metric += self._score(False)
            self.global_sum_metric += self._score(True)
            self.num_inst += 1
            self.global_num_inst += 1
            self.metrics.reset_stats()
        else:
            self.sum_metric = self._score(False) * self.metrics.total_examples
            self.global_sum_metric = self._score(True) * self.metrics.global_total_examples
            self.num_inst = self.metrics.total_examples
            self.global_num_inst = self.metrics.global_total_examples

    def reset(self) -> None:
        self.sum_metric = 0.0
        self.num_inst = 0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0
        self.metrics.reset_stats()

    def reset_local(self) -> None:
        self.sum_metric = 0.0
        self.num_inst = 0
        self.metrics.local_reset_stats()


@register
class F1(_BinaryMetric):
    """The F1 score of a binary classifier (class 1 is positive).

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    average : {'macro', 'micro'}, optional
        ``'macro'`` averages the F1 of each batch; ``'micro'`` computes F1 from the counts
        of all batches.
    """

    def __init__(self, name: str = "f1", output_names: Any = None, label_names: Any = None, average: str = "macro") -> None:
        super().__init__(name, output_names, label_names, average)

    def _score(self, use_global: bool) -> float:
        return self.metrics.global_fscore if use_global else self.metrics.fscore


@register
class MCC(_BinaryMetric):
    """The Matthews correlation coefficient of a binary classifier.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    average : {'macro', 'micro'}, optional
        As for ``F1``.
    """

    def __init__(self, name: str = "mcc", output_names: Any = None, label_names: Any = None, average: str = "macro") -> None:
        super().__init__(name, output_names, label_names, average)

    def _score(self, use_global: bool) -> float:
        return self.metrics.matthewscc(use_global=use_global)


@register
class PCC(EvalMetric):
    """Multi-class Matthews correlation (Pearson correlation of the confusion matrix);
    the number of classes grows with the largest class seen.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    has_global_stats : bool, optional
        Whether to keep global statistics.
    """

    def __init__(self, name: str = "pcc", output_names: Any = None, label_names: Any = None, has_global_stats: bool = True) -> None:
        self.k = 2
        super().__init__(name=name, output_names=output_names, label_names=label_names, has_global_stats=has_global_stats)

    def _grow(self, inc: int) -> None:
        self.lcm = numpy.pad(self.lcm, ((0, inc), (0, inc)), "constant", constant_values=0)
        self.gcm = numpy.pad(self.gcm, ((0, inc), (0, inc)), "constant", constant_values=0)
        self.k += inc

    @staticmethod
    def _calc_mcc(cmat: numpy.ndarray) -> float:
        n = cmat.sum()
        x = cmat.sum(axis=1)
        y = cmat.sum(axis=0)
        cov_xx = numpy.sum(x * (n - x))
        cov_yy = numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        i = cmat.diagonal()
        cov_xy = numpy.sum(i * n - x * y)
        return float(cov_xy / (cov_xx * cov_yy) ** 0.5)

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds, strict=False):
            lab = _np(label).astype("int32")
            p = _np(pred)
            p = p.argmax(axis=1) if p.shape != lab.shape else p.astype("int32")
            n = int(max(p.max(), lab.max()))
            if n >= self.k:
                self._grow(n + 1 - self.k)
            bcm = numpy.zeros((self.k, self.k))
            for i, j in zip(p, lab, strict=False):
                bcm[i, j] += 1
            self.lcm += bcm
            self.gcm += bcm
        self.num_inst += 1
        self.global_num_inst += 1

    @property
    def sum_metric(self) -> float:
        return self._calc_mcc(self.lcm) * self.num_inst

    @sum_metric.setter
    def sum_metric(self, value: float) -> None:
        """Set by the base class's reset; the value follows from the confusion matrix."""

    @property
    def global_sum_metric(self) -> float:
        return self._calc_mcc(self.gcm) * self.global_num_inst

    @global_sum_metric.setter
    def global_sum_metric(self, value: float) -> None:
        """Set by the base class's reset; the value follows from the confusion matrix."""

    def reset(self) -> None:
        self.global_num_inst = 0.0
        self.gcm = numpy.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self) -> None:
        self.num_inst = 0.0
        self.lcm = numpy.zeros((self.k, self.k))

"""``mx.metric``: evaluation metrics for training and validation.

A metric accumulates a sum and a count over ``update(labels, preds)`` calls; ``get()``
reports ``(name, sum / count)``. Every metric keeps a local pair (cleared by
``reset_local``, e.g. at each logging interval) and a global pair (cleared only by
``reset``). The per-batch arithmetic follows MXNet 1.9.1, including which metrics average
per batch (MAE, MSE, RMSE, macro F1) rather than per example.
"""

from __future__ import annotations

from .classification import F1, MCC, PCC, Accuracy, TopKAccuracy
from .core import (
    Caffe,
    CompositeEvalMetric,
    CustomMetric,
    EvalMetric,
    Loss,
    Torch,
    alias,
    check_label_shapes,
    create,
    np,
    register,
)
from .regression import (
    MAE,
    MSE,
    RMSE,
    CrossEntropy,
    NegativeLogLikelihood,
    PearsonCorrelation,
    Perplexity,
)

__all__ = [
    "check_label_shapes",
    "EvalMetric",
    "CompositeEvalMetric",
    "Accuracy",
    "TopKAccuracy",
    "F1",
    "MCC",
    "Perplexity",
    "MAE",
    "MSE",
    "RMSE",
    "CrossEntropy",
    "NegativeLogLikelihood",
    "PearsonCorrelation",
    "PCC",
    "Loss",
    "Torch",
    "Caffe",
    "CustomMetric",
    "np",
    "create",
    "register",
    "alias",
]

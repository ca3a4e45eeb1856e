"""Contributed optimizers: ``GroupAdaGrad``."""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray, clip, mean, sqrt, square, zeros
from .optimizer import Optimizer, register

__all__ = ["GroupAdaGrad"]


@register
class GroupAdaGrad(Optimizer):
    """AdaGrad with one accumulated history, hence one step size, per row of a 2-D
    weight.

    Per update::

        g = clip(rescale_grad * grad, clip_gradient)
        history += mean(g ** 2, axis=1, keepdims=True)
        weight -= lr * g / sqrt(history + eps)

    Weight decay is not supported.

    Parameters
    ----------
    eps : float, optional
        Added to the history under the square root.
    **kwargs
        As for :class:`Optimizer`.
    """

    def __init__(self, eps: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index: Any, weight: NDArray) -> NDArray:
        """The per-row history, float32 zeros of shape ``(rows, 1)``."""
        assert len(weight.shape) == 2
        return zeros((weight.shape[0], 1), weight.context)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one 2-D weight."""
        assert isinstance(weight, NDArray) and isinstance(grad, NDArray)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        assert wd == 0, "Weight decay is not supported for GroupAdaGrad"
        grad = grad * self.rescale_grad
        if self.clip_gradient is not None:
            grad = clip(grad, -self.clip_gradient, self.clip_gradient)
        state[:] += mean(square(grad), axis=1, keepdims=True)
        weight[:] -= lr * grad / sqrt(state + self.float_stable_eps)

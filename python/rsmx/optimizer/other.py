"""Optimizers MXNet writes as chains of NDArray operations: Adamax, Nadam, DCASGD, SGLD,
and the ``Test`` optimizer MXNet's own tests use.

None has a fused counterpart in the core, so the KVStore runs them through the Python
updater.
"""

from __future__ import annotations

import math
from typing import Any

from ..ndarray import NDArray, clip, maximum, sqrt, zeros
from ..ndarray import abs as nd_abs
from ..ndarray.random import normal
from .optimizer import Optimizer, register

__all__ = ["Adamax", "Nadam", "DCASGD", "SGLD", "Test"]


def _check(weight: Any, grad: Any) -> None:
    assert isinstance(weight, NDArray) and isinstance(grad, NDArray)


@register
class Adamax(Optimizer):
    """AdaMax, Adam's infinity-norm variant (Kingma and Ba, 2014, section 7).

    At step ``t`` of a weight::

        g = clip(rescale_grad * grad + wd * weight, clip_gradient)
        m = beta1 * m + (1 - beta1) * g
        u = maximum(beta2 * u, abs(g))
        weight -= lr / (1 - beta1 ** t) * m / u

    Parameters
    ----------
    learning_rate : float, optional
        The learning rate.
    beta1, beta2 : float, optional
        Decay rates of the moment estimates.
    **kwargs
        As for :class:`Optimizer`.
    """

    def __init__(
        self, learning_rate: float = 0.002, beta1: float = 0.9, beta2: float = 0.999, **kwargs: Any
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray, NDArray]:
        """``(m, u)``, zeros of the weight's dtype."""
        return (
            zeros(weight.shape, weight.context, dtype=weight.dtype),
            zeros(weight.shape, weight.context, dtype=weight.dtype),
        )

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        _check(weight, grad)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        lr /= 1.0 - self.beta1**t
        grad = grad * self.rescale_grad + wd * weight
        if self.clip_gradient is not None:
            grad = clip(grad, -self.clip_gradient, self.clip_gradient)
        m_t, u_t = state
        m_t[:] *= self.beta1
        m_t[:] += (1.0 - self.beta1) * grad
        u_t[:] = maximum(self.beta2 * u_t, nd_abs(grad))
        weight[:] -= lr * m_t / u_t


@register
class Nadam(Optimizer):
    """Nadam: Adam with Nesterov momentum (Dozat, 2015).

    The momentum schedule ``m_schedule`` is one product shared by all weights, as in
    MXNet.

    Parameters
    ----------
    learning_rate : float, optional
        The learning rate.
    beta1, beta2 : float, optional
        Decay rates of the moment estimates.
    epsilon : float, optional
        Keeps the denominator away from 0.
    schedule_decay : float, optional
        Decay of the momentum schedule.
    **kwargs
        As for :class:`Optimizer`.
    """

    def __init__(
        self,
        learning_rate: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        schedule_decay: float = 0.004,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.schedule_decay = schedule_decay
        self.m_schedule = 1.0

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray, NDArray]:
        """``(m, v)``, zeros of the weight's dtype."""
        return (
            zeros(weight.shape, weight.context, dtype=weight.dtype),
            zeros(weight.shape, weight.context, dtype=weight.dtype),
        )

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        _check(weight, grad)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        grad = grad * self.rescale_grad + wd * weight
        if self.clip_gradient is not None:
            grad = clip(grad, -self.clip_gradient, self.clip_gradient)
        mom_t = self.beta1 * (1.0 - 0.5 * pow(0.96, t * self.schedule_decay))
        mom_next = self.beta1 * (1.0 - 0.5 * pow(0.96, (t + 1) * self.schedule_decay))
        self.m_schedule = self.m_schedule * mom_t
        m_schedule_next = self.m_schedule * mom_next
        m_t, v_t = state
        m_t[:] *= self.beta1
        m_t[:] += (1.0 - self.beta1) * grad
        v_t[:] *= self.beta2
        v_t[:] += (1.0 - self.beta2) * grad * grad
        grad_prime = grad / (1.0 - self.m_schedule)
        m_t_prime = m_t / (1.0 - m_schedule_next)
        v_t_prime = v_t / (1.0 - pow(self.beta2, t))
        m_t_bar = (1.0 - mom_t) * grad_prime + mom_next * m_t_prime
        weight[:] -= lr * m_t_bar / (sqrt(v_t_prime) + self.epsilon)


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD (Zheng et al., 2016).

    Parameters
    ----------
    momentum : float, optional
        The momentum; 0 keeps no momentum buffer.
    lamda : float, optional
        Scale of the delay compensation.
    **kwargs
        As for :class:`Optimizer`.
    """

    def __init__(self, momentum: float = 0.0, lamda: float = 0.04, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = momentum
        self.weight_previous: dict[Any, Any] = {}
        self.lamda = lamda

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray | None, NDArray]:
        """``(momentum or None, copy of the weight)``."""
        mom = None if self.momentum == 0.0 else zeros(weight.shape, weight.context, dtype=weight.dtype)
        return (mom, weight.copy())

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        _check(weight, grad)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        grad = grad * self.rescale_grad
        if self.clip_gradient is not None:
            grad = clip(grad, -self.clip_gradient, self.clip_gradient)
        mom, previous_weight = state
        step = grad + wd * weight + self.lamda * grad * grad * (weight - previous_weight)
        if mom is not None:
            mom[:] *= self.momentum
            mom[:] += -lr * step
        else:
            assert self.momentum == 0.0
            mom = -lr * step
        previous_weight[:] = weight
        weight[:] += mom


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics: half an SGD step plus Gaussian noise of
    variance ``lr``.

    Parameters
    ----------
    **kwargs
        As for :class:`Optimizer`.
    """

    def create_state(self, index: Any, weight: NDArray) -> None:
        """No state."""
        return None

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        _check(weight, grad)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        grad = grad * self.rescale_grad
        if self.clip_gradient is not None:
            grad = clip(grad, -self.clip_gradient, self.clip_gradient)
        weight[:] += -lr / 2 * (grad + wd * weight)
        weight[:] += normal(
            0, math.sqrt(lr), shape=weight.shape, dtype=weight.dtype, ctx=weight.context
        )


@register
class Test(Optimizer):
    """An optimizer for tests: ``weight += rescale_grad * grad``, and the state keeps a
    copy of the new weight."""

    def create_state(self, index: Any, weight: NDArray) -> NDArray:
        """A float32 buffer that receives the weight after each update."""
        return zeros(weight.shape, weight.context)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """``weight += rescale_grad * grad``; then ``state[:] = weight``."""
        weight[:] += grad * self.rescale_grad
        state[:] = weight

"""Optimizers with per-coordinate step sizes: Adam, AdaGrad, RMSProp, AdaDelta, Ftrl and FTML.

Each update is one fused ``mx.nd`` operator writing the weight in place. AdaGrad and
AdaDelta, which MXNet writes as a chain of NDArray operations, use rsmx's internal fused
operators ``_rsmx_adagrad_update`` and ``_rsmx_adadelta_update``, which compute the same
values. FTML, which has no fused operator in the core, is a chain of NDArray operations
computing what MXNet's ``ftml_update`` does.
"""

from __future__ import annotations

import math
from typing import Any

from ..ndarray import NDArray, zeros
from .optimizer import Optimizer, _nd, register

__all__ = ["Adam", "AdaGrad", "RMSProp", "AdaDelta", "Ftrl", "FTML"]


def _check(weight: Any, grad: Any) -> None:
    assert isinstance(weight, NDArray) and isinstance(grad, NDArray)


@register
class Adam(Optimizer):
    """Adam (Kingma and Ba, 2014).

    At step ``t`` of a weight::

        g = clip(rescale_grad * grad + wd * weight, clip_gradient)
        mean = beta1 * mean + (1 - beta1) * g
        var = beta2 * var + (1 - beta2) * g ** 2
        weight -= lr * sqrt(1 - beta2 ** t) / (1 - beta1 ** t) * mean / (sqrt(var) + epsilon)

    Parameters
    ----------
    learning_rate : float, optional
        The learning rate.
    beta1, beta2 : float, optional
        Decay rates of the first and second moment estimates.
    epsilon : float, optional
        Keeps the denominator away from 0.
    lazy_update : bool, optional
        Update only the rows present in a row-sparse gradient.
    **kwargs
        As for :class:`Optimizer`.
    """

    _FUSED_NAME = "adam"

    def __init__(
        self,
        learning_rate: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        lazy_update: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray, NDArray]:
        """``(mean, var)``, zeros of the weight's dtype."""
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
        coef1 = 1.0 - self.beta1**t
        coef2 = 1.0 - self.beta2**t
        lr *= math.sqrt(coef2) / coef1
        kwargs: dict[str, Any] = {
            "beta1": self.beta1,
            "beta2": self.beta2,
            "epsilon": self.epsilon,
            "rescale_grad": self.rescale_grad,
        }
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        mean, var = state
        _nd("adam_update")(
            weight, grad, mean, var, out=weight, lazy_update=self.lazy_update, lr=lr, wd=wd, **kwargs
        )

    def _fused_hyperparams(self) -> dict[str, Any]:
        return {
            "beta1": self.beta1,
            "beta2": self.beta2,
            "epsilon": self.epsilon,
            "lazy_update": bool(self.lazy_update),
        }


@register
class AdaGrad(Optimizer):
    """AdaGrad (Duchi, Hazan and Singer, 2011).

    Per update::

        g = clip(rescale_grad * grad, clip_gradient)
        history += g ** 2
        weight += -lr * (g / sqrt(history + eps) + wd * weight)

    Parameters
    ----------
    eps : float, optional
        Added to the history under the square root.
    **kwargs
        As for :class:`Optimizer`.
    """

    _FUSED_NAME = "adagrad"

    def __init__(self, eps: float = 1e-7, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index: Any, weight: NDArray) -> NDArray:
        """The squared-gradient history, float32 zeros."""
        return zeros(weight.shape, weight.context)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        _check(weight, grad)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        _nd("_rsmx_adagrad_update")(
            weight,
            grad,
            state,
            out=weight,
            lr=lr,
            wd=wd,
            epsilon=self.float_stable_eps,
            rescale_grad=self.rescale_grad,
            clip_gradient=self._fused_clip(),
        )

    def _fused_clip(self) -> float:
        # AdaGrad clips whenever clip_gradient is set, 0 included.
        return -1.0 if self.clip_gradient is None else self.clip_gradient

    def _fused_hyperparams(self) -> dict[str, Any]:
        return {"eps": self.float_stable_eps}


@register
class RMSProp(Optimizer):
    """RMSProp: Tieleman and Hinton's (2012), or Graves's centered form (2013).

    Plain::

        g = clip(rescale_grad * grad + wd * weight, clip_gradient)
        n = (1 - gamma1) * g ** 2 + gamma1 * n
        weight -= lr * g / sqrt(n + epsilon)

    Centered::

        n = (1 - gamma1) * g ** 2 + gamma1 * n
        gbar = (1 - gamma1) * g + gamma1 * gbar
        delta = gamma2 * delta - lr * g / sqrt(n - gbar ** 2 + epsilon)
        weight += delta

    Parameters
    ----------
    learning_rate : float, optional
        The learning rate.
    gamma1 : float, optional
        Decay of the moving averages.
    gamma2 : float, optional
        Momentum of the centered form.
    epsilon : float, optional
        Keeps the denominator away from 0.
    centered : bool, optional
        Use Graves's centered form.
    clip_weights : float, optional
        Clip weights to ``[-clip_weights, clip_weights]`` after each update.
    **kwargs
        As for :class:`Optimizer`.
    """

    _FUSED_NAME = "rmsprop"

    def __init__(
        self,
        learning_rate: float = 0.001,
        gamma1: float = 0.9,
        gamma2: float = 0.9,
        epsilon: float = 1e-8,
        centered: bool = False,
        clip_weights: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.centered = centered
        self.epsilon = epsilon
        self.clip_weights = clip_weights

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray, ...]:
        """``(n,)``, or ``(n, g, delta)`` when centered; float32 zeros."""
        count = 3 if self.centered else 1
        return tuple(zeros(weight.shape, weight.context) for _ in range(count))

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        _check(weight, grad)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        kwargs: dict[str, Any] = {
            "gamma1": self.gamma1,
            "epsilon": self.epsilon,
            "rescale_grad": self.rescale_grad,
        }
        if self.centered:
            kwargs["gamma2"] = self.gamma2
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        if self.clip_weights:
            kwargs["clip_weights"] = self.clip_weights
        if not self.centered:
            (n,) = state
            _nd("rmsprop_update")(weight, grad, n, out=weight, lr=lr, wd=wd, **kwargs)
        else:
            n, g, delta = state
            _nd("rmspropalex_update")(weight, grad, n, g, delta, out=weight, lr=lr, wd=wd, **kwargs)

    def _fused_hyperparams(self) -> dict[str, Any]:
        return {
            "gamma1": self.gamma1,
            "gamma2": self.gamma2,
            "epsilon": self.epsilon,
            "centered": bool(self.centered),
            "clip_weights": self.clip_weights if self.clip_weights else -1.0,
        }


@register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler, 2012). It uses no learning rate.

    Per update::

        grad *= rescale_grad            # in place, on the caller's array
        g = clip(grad, clip_gradient)
        acc_g = rho * acc_g + (1 - rho) * g ** 2
        delta = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta ** 2
        weight -= delta + wd * weight

    Parameters
    ----------
    rho : float, optional
        Decay of both moving averages.
    epsilon : float, optional
        Keeps the square roots away from 0.
    **kwargs
        As for :class:`Optimizer`.
    """

    _FUSED_NAME = "adadelta"

    def __init__(self, rho: float = 0.90, epsilon: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray, NDArray]:
        """``(acc_g, acc_delta)``, float32 zeros."""
        return (zeros(weight.shape, weight.context), zeros(weight.shape, weight.context))

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight (and rescales ``grad`` in place, as MXNet does)."""
        _check(weight, grad)
        wd = self._get_wd(index)
        self._update_count(index)
        if self.rescale_grad != 1.0:
            grad *= self.rescale_grad
        acc_g, acc_delta = state
        _nd("_rsmx_adadelta_update")(
            weight,
            grad,
            acc_g,
            acc_delta,
            out=weight,
            rho=self.rho,
            epsilon=self.epsilon,
            wd=wd,
            rescale_grad=1.0,
            clip_gradient=self._fused_clip(),
        )

    def _fused_clip(self) -> float:
        # AdaDelta clips whenever clip_gradient is set, 0 included.
        return -1.0 if self.clip_gradient is None else self.clip_gradient

    def _fused_hyperparams(self) -> dict[str, Any]:
        return {"rho": self.rho, "epsilon": self.epsilon}


@register
class Ftrl(Optimizer):
    """FTRL-Proximal (McMahan et al., 2013).

    Per update::

        g = clip(rescale_grad * grad, clip_gradient)
        z += g - (sqrt(n + g ** 2) - sqrt(n)) * weight / lr
        n += g ** 2
        weight = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd) * (abs(z) > lamda1)

    Parameters
    ----------
    lamda1 : float, optional
        L1 regularisation coefficient.
    learning_rate : float, optional
        The learning rate (set after the base constructor, so a scheduler's ``base_lr``
        is left as it is).
    beta : float, optional
        Per-coordinate learning-rate parameter.
    **kwargs
        As for :class:`Optimizer`.
    """

    _FUSED_NAME = "ftrl"

    def __init__(
        self, lamda1: float = 0.01, learning_rate: float = 0.1, beta: float = 1, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.lamda1 = lamda1
        self.beta = beta
        self.lr = learning_rate

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray, NDArray]:
        """``(z, n)``, float32 zeros."""
        return (zeros(weight.shape, weight.context), zeros(weight.shape, weight.context))

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        _check(weight, grad)
        self._update_count(index)
        wd = self._get_wd(index)
        lr = self._get_lr(index)
        kwargs: dict[str, Any] = {
            "lamda1": self.lamda1,
            "beta": self.beta,
            "rescale_grad": self.rescale_grad,
        }
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        z, n = state
        _nd("ftrl_update")(weight, grad, z, n, out=weight, lr=lr, wd=wd, **kwargs)

    def _fused_hyperparams(self) -> dict[str, Any]:
        return {"lamda1": self.lamda1, "beta": self.beta}


@register
class FTML(Optimizer):
    """FTML, Follow the Moving Leader (Zheng and Kwok, 2017).

    At step ``t`` of a weight::

        g = clip(rescale_grad * grad + wd * weight, clip_gradient)
        v = beta2 * v + (1 - beta2) * g ** 2
        d_t = (1 - beta1 ** t) / lr * (sqrt(v / (1 - beta2 ** t)) + epsilon)
        z = beta1 * z + (1 - beta1) * g - (d_t - beta1 * d) * weight
        d = d_t
        weight = -z / d_t

    Parameters
    ----------
    beta1 : float, optional
        Decay of the leader's history, generally close to 0.5.
    beta2 : float, optional
        Decay of the squared-gradient average, generally close to 1.
    epsilon : float, optional
        Keeps ``d_t`` away from 0.
    **kwargs
        As for :class:`Optimizer`.
    """

    def __init__(self, beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray, NDArray, NDArray]:
        """``(d, v, z)``, zeros of the weight's dtype."""
        return tuple(zeros(weight.shape, weight.context, dtype=weight.dtype) for _ in range(3))

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        _check(weight, grad)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        kwargs: dict[str, Any] = {
            "beta1": self.beta1,
            "beta2": self.beta2,
            "epsilon": self.epsilon,
            "rescale_grad": self.rescale_grad,
            "t": t,
        }
        if self.clip_gradient:
            kwargs["clip_grad"] = self.clip_gradient
        prev_d, prev_v, prev_z = state
        _nd("ftml_update")(weight, grad, prev_d, prev_v, prev_z, out=weight, lr=lr, wd=wd, **kwargs)

"""Layer-wise adaptive optimizers for large batches: LARS, LBSGD and LAMB.

LARS and LBSGD scale each weight's learning rate, then take an SGD step with the fused
``sgd_*`` operators. LAMB, which has no fused operator in the core, is a chain of
NDArray operations computing what MXNet's ``lamb_update_phase1/2`` (and their
multi-tensor form) do.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from typing import Any

import numpy as np

from ..ndarray import NDArray, clip, maximum, minimum, ones_like, sqrt, where, zeros
from .optimizer import Optimizer, _nd, register

__all__ = ["LARS", "LBSGD", "LAMB"]


def _as_lists(index: Any, weight: Any, grad: Any, state: Any) -> tuple[list, list, list, list]:
    if isinstance(index, (list, tuple)):
        return list(index), list(weight), list(grad), list(state)
    return [index], [weight], [grad], [state]


def _check(weights: list, grads: list) -> None:
    for w, g in zip(weights, grads, strict=True):
        assert isinstance(w, NDArray) and isinstance(g, NDArray)


def _sgd_step(
    weight: NDArray, grad: NDArray, state: Any, lr: float, wd: float, multi_precision: bool,
    kwargs: dict[str, Any], aggregated: bool = False,
) -> None:
    """One SGD step with the fused operators: ``state`` is the momentum (or None), or
    ``(momentum, float32 master copy)`` with ``multi_precision``. ``aggregated`` rounds
    as MXNet's multi-weight SGD kernels do."""
    if not multi_precision:
        if state is not None:
            _nd("sgd_mom_update")(weight, grad, state, out=weight, lr=lr, wd=wd, **kwargs)
        elif aggregated:
            _nd("_rsmx_agg_sgd_update")(weight, grad, out=weight, lr=lr, wd=wd, **kwargs)
        else:
            _nd("sgd_update")(weight, grad, out=weight, lr=lr, wd=wd, **kwargs)
    elif state[0] is not None:
        _nd("mp_sgd_mom_update")(weight, grad, state[0], state[1], out=weight, lr=lr, wd=wd, **kwargs)
    elif aggregated:
        _nd("_rsmx_agg_mp_sgd_update")(weight, grad, state[1], out=weight, lr=lr, wd=wd, **kwargs)
    else:
        _nd("mp_sgd_update")(weight, grad, state[1], out=weight, lr=lr, wd=wd, **kwargs)


def _norm32(v: NDArray) -> np.float32:
    """The L2 norm of ``v``, computed in float32."""
    return np.float32(v.astype("float32").norm().asscalar())


@register
class LARS(Optimizer):
    """LARS, layer-wise adaptive rate scaling (You, Gitman and Ginsburg, 2017).

    SGD with momentum and weight decay whose learning rate, for every weight not named
    ``*gamma``, ``*beta`` or ``*bias``, is scaled by::

        eta * |w| / (|rescale_grad * g| + wd * |w| + eps)     (when |w| > 0 and |g| > 0)

    Parameters
    ----------
    momentum : float, optional
        The momentum; 0 keeps no state.
    lazy_update : bool, optional
        Kept for MXNet's signature (rsmx arrays are dense).
    eta : float, optional
        The LARS coefficient.
    eps : float, optional
        Added to the denominator of the scale.
    momentum_correction : bool, optional
        Scale the momentum by the ratio of the current to the previous learning rate
        when a schedule changes it (Goyal et al., 2017).
    **kwargs
        As for :class:`Optimizer`.
    """

    def __init__(
        self,
        momentum: float = 0.0,
        lazy_update: bool = True,
        eta: float = 0.001,
        eps: float = 0,
        momentum_correction: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.momentum = momentum
        self.momentum_correction = momentum_correction
        self.lazy_update = lazy_update
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))
        self.eta = eta
        self.eps = eps
        self.skip = 0
        self.last_lr: float | None = None
        self.cur_lr: float | None = None

    def _get_lrs(self, indices: list[Any]) -> list[float]:
        """The learning rates of ``indices``; also remembers the previous global rate for
        the momentum correction."""
        if self.cur_lr is not None:
            self.last_lr = self.cur_lr
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        if self.cur_lr is None:
            self.last_lr = lr
        self.cur_lr = lr
        return [lr * self._mult(i, "lr_mult", self.lr_mult) for i in indices]

    def set_wd_mult(self, args_wd_mult: dict[Any, float]) -> None:
        """As :meth:`Optimizer.set_wd_mult`, except that only names ending in ``_weight``
        keep weight decay by default."""
        self.wd_mult = {}
        for n in self.idx2name.values():
            if not n.endswith("_weight"):
                self.wd_mult[n] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)

    def create_state_multi_precision(self, index: Any, weight: NDArray) -> Any:
        """The state, as ``(momentum, float32 master copy)`` for a float16 weight when
        ``multi_precision`` is set."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (self.create_state(index, master), master)
        self._warn_fp16(weight, "SGD")
        return self.create_state(index, weight)

    def create_state(self, index: Any, weight: NDArray) -> NDArray | None:
        """The momentum buffer, or None when ``momentum`` is 0."""
        if self.momentum == 0.0:
            return None
        return zeros(weight.shape, weight.context, dtype=weight.dtype)

    def _skips_lars(self, index: Any) -> bool:
        name = self.idx2name.get(index, str(index))
        return name.endswith("gamma") or name.endswith("beta") or name.endswith("bias")

    def _lars_lr(self, index: Any, weight: NDArray, grad: NDArray, lr: float, wd: float) -> float:
        """``lr`` scaled by the layer's trust ratio, in float32 as MXNet's ``multi_lars``."""
        if self._skips_lars(index):
            return lr
        w_norm = _norm32(weight)
        g_norm = _norm32(grad)
        if not (w_norm > 0 and g_norm > 0):
            return lr
        f = np.float32
        ratio = f(self.eta) * w_norm / (g_norm * f(self.rescale_grad) + f(wd) * w_norm + f(self.eps))
        return float(f(lr) * ratio)

    def _step_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"rescale_grad": self.rescale_grad}
        if self.momentum > 0:
            corrected = self.momentum_correction and self.last_lr != 0
            kwargs["momentum"] = self.momentum * (self.cur_lr / self.last_lr) if corrected else self.momentum
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        return kwargs

    def _update_impl(self, index: Any, weight: Any, grad: Any, state: Any, multi_precision: bool = False) -> None:
        indices, weights, grads, states = _as_lists(index, weight, grad, state)
        _check(weights, grads)
        self._update_count(indices)
        lrs = self._get_lrs(indices)
        wds = self._get_wds(indices)
        kwargs = self._step_kwargs()
        for i, w, g, s, lr, wd in zip(indices, weights, grads, states, lrs, wds, strict=True):
            lr = self._lars_lr(i, w, g, lr, wd)
            _sgd_step(w, g, s, lr, wd, multi_precision, kwargs, aggregated=True)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Updates one weight, or a list of them (``index`` a list)."""
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """:meth:`update` through the float32 master copies of float16 weights when
        ``multi_precision`` is set."""
        first = weight[0] if isinstance(index, (list, tuple)) else weight
        use_mp = bool(self.multi_precision and first.dtype == np.float16)
        self._update_impl(index, weight, grad, state, multi_precision=use_mp)


@register
class LBSGD(Optimizer):
    """Large-batch SGD: SGD with momentum whose learning rate warms up over the first
    epochs (or follows LARS), and which can emulate a batch ``batch_scale`` times larger
    by accumulating that many gradients before each step.

    Parameters
    ----------
    momentum : float, optional
        The momentum; 0 keeps no state.
    multi_precision : bool, optional
        Keep float32 master copies of float16 weights.
    warmup_strategy : {'linear', 'power2', 'sqrt', 'lars'}, optional
        How the learning-rate multiplier grows to ``batch_scale`` over the warm-up
        (``'lars'``: a per-layer trust ratio instead).
    warmup_epochs : int, optional
        Length of the warm-up, in epochs.
    batch_scale : int, optional
        Gradients accumulated per step, and the multiplier reached after the warm-up.
    updates_per_epoch : int, optional
        Updates per epoch, to count the warm-up.
    begin_epoch : int, optional
        The epoch training starts from.
    num_epochs : int, optional
        Total epochs (kept for MXNet's signature).
    **kwargs
        As for :class:`Optimizer`.
    """

    def __init__(
        self,
        momentum: float = 0.0,
        multi_precision: bool = False,
        warmup_strategy: str = "linear",
        warmup_epochs: int = 5,
        batch_scale: int = 1,
        updates_per_epoch: int = 32,
        begin_epoch: int = 0,
        num_epochs: int = 60,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        logging.info("Running Large-Batch SGD Algorithm")
        logging.info(
            "(Batch_scale=%f, warmup_epochs=%d, warmup_strategy=%s, updates_per_epoch=%d)",
            batch_scale, warmup_epochs, warmup_strategy, updates_per_epoch,
        )
        self.momentum = momentum
        self.multi_precision = multi_precision
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.init_updates = begin_epoch * updates_per_epoch
        self.num_epochs = num_epochs
        self.lbmult = 1
        self.cumgrads: dict[Any, dict[str, Any]] = {}
        self.adaptive = False
        self.admult = 1

    def create_state(self, index: Any, weight: NDArray) -> Any:
        """The momentum (or None); ``(momentum, float32 master copy)`` for a float16
        weight when ``multi_precision`` is set."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            mom = zeros(weight.shape, weight.context, dtype=np.float32) if self.momentum != 0.0 else None
            return (mom, master)
        if weight.dtype == np.float16 and not self.multi_precision:
            warnings.warn(
                "Accumulating with float16 in optimizer can lead to poor accuracy or slow "
                "convergence. Consider using multi_precision=True option of the SGD optimizer",
                stacklevel=2,
            )
        if self.momentum == 0.0:
            return None
        return zeros(weight.shape, weight.context, dtype=weight.dtype)

    def _get_lbmult(self, nup: int) -> float:
        """The warm-up multiplier of the learning rate after ``nup`` accumulated
        gradients."""
        nwup = self.warmup_epochs * self.updates_per_epoch
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        growth = {
            "linear": nup / nwup,
            "power2": (nup * nup) / (nwup * nwup),
            "sqrt": math.sqrt(float(nup) / nwup),
        }
        if self.warmup_strategy not in growth:
            return 1.0
        return 1.0 + (maxmult - 1) * growth[self.warmup_strategy]

    def _l2norm(self, v: NDArray) -> float:
        """The sum of squares of ``v`` (MXNet's name for it)."""
        return float((v * v).asnumpy().sum())

    def _get_lars(self, weight: NDArray, g: NDArray, wd: float) -> float:
        """The layer's trust ratio, within ``[0.01, 100]``."""
        weight2 = self._l2norm(weight)
        grad2 = self._l2norm(g)
        lars = math.sqrt(weight2 / (grad2 + wd * weight2 + 1e-18))
        return min(max(lars, 0.01), 100.0)

    def _reset_cum_gradient(self, index: Any) -> None:
        self.cumgrads[index]["cum_grad"] = 0

    def _get_cum_gradient(self, index: Any) -> dict[str, Any]:
        return self.cumgrads.get(index, {})

    def _put_cum_gradient(self, index: Any, cgrad: dict[str, Any]) -> None:
        self.cumgrads[index] = cgrad

    def _cumulate_gradient(self, grad: NDArray, index: Any) -> dict[str, Any]:
        """Adds ``grad`` to the gradients accumulated for ``index`` (a copy is kept, so
        the caller may reuse its gradient buffer)."""
        cgrad = self._get_cum_gradient(index)
        if cgrad and cgrad["num_cums"] > 0:
            cum_grad = cgrad["cum_grad"] + grad
            num_cums = cgrad["num_cums"] + 1
        else:
            cum_grad = grad.copy()
            num_cums = self.init_updates + 1
        cgrad = {"cum_grad": cum_grad, "num_cums": num_cums}
        self._put_cum_gradient(index, cgrad)
        return cgrad

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Accumulates ``grad``; every ``batch_scale``-th call steps with their mean."""
        _check([weight], [grad])
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        self._update_count(index)
        cgrad = self._cumulate_gradient(grad, index)
        if cgrad["num_cums"] % self.batch_scale != 0:
            return
        grad = cgrad["cum_grad"] / self.batch_scale
        if self.warmup_strategy == "lars":
            lr *= self._get_lars(weight, grad, wd)
        else:
            lr *= self._get_lbmult(cgrad["num_cums"])
        kwargs: dict[str, Any] = {"rescale_grad": self.rescale_grad}
        if self.momentum > 0:
            kwargs["momentum"] = self.momentum
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        _sgd_step(weight, grad, state, lr, wd, isinstance(state, (list, tuple)), kwargs)
        self._reset_cum_gradient(index)


@register
class LAMB(Optimizer):
    """LAMB, layer-wise adaptive moments for large batches (You et al., 2019).

    At step ``t`` of a weight::

        g = clip(rescale_grad * grad, clip_gradient)
        mean = beta1 * mean + (1 - beta1) * g
        var = beta2 * var + (1 - beta2) * g ** 2
        (with bias_correction: mean /= 1 - beta1 ** t; var /= 1 - beta2 ** t)
        u = mean / (sqrt(var) + epsilon) + wd * weight
        r1 = clip(|weight|, lower_bound, upper_bound); r2 = |u|
        weight -= lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1) * u

    Parameters
    ----------
    learning_rate : float, optional
        The learning rate.
    beta1, beta2 : float, optional
        Decay rates of the moment estimates.
    epsilon : float, optional
        Keeps the denominator away from 0.
    lower_bound, upper_bound : float, optional
        Bounds of the weight norm in the trust ratio (unset: none).
    bias_correction : bool, optional
        Correct the moment estimates' bias toward 0.
    **kwargs
        As for :class:`Optimizer`; ``multi_precision`` keeps float32 master copies of
        float16 weights.
    """

    def __init__(
        self,
        learning_rate: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-6,
        lower_bound: float | None = None,
        upper_bound: float | None = None,
        bias_correction: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.bias_correction = bias_correction
        self.aggregate_num = max(1, min(45, int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "45"))))

    def create_state(self, index: Any, weight: NDArray) -> tuple[NDArray, NDArray]:
        """``(mean, var)``, zeros of the weight's dtype."""
        return (
            zeros(weight.shape, weight.context, dtype=weight.dtype),
            zeros(weight.shape, weight.context, dtype=weight.dtype),
        )

    def _direction(self, weight: NDArray, grad: NDArray, mean: NDArray, var: NDArray, wd: float, t: int) -> NDArray:
        """Updates the moments; the step direction ``u``."""
        g = grad * self.rescale_grad
        if self.clip_gradient:
            g = clip(g, -self.clip_gradient, self.clip_gradient)
        mean[:] = self.beta1 * mean + (1.0 - self.beta1) * g
        var[:] = self.beta2 * var + (1.0 - self.beta2) * g * g
        m, v = mean, var
        if self.bias_correction:
            m = mean / (1.0 - self.beta1**t)
            v = var / (1.0 - self.beta2**t)
        return m / (sqrt(v) + self.epsilon) + wd * weight

    def _scaled_lr(self, weight: NDArray, u: NDArray, lr: float) -> NDArray:
        """``lr * r1 / r2`` as a one-element array; ``lr`` where either norm is 0."""
        r1 = weight.norm()
        if self.lower_bound:
            r1 = maximum(r1, self.lower_bound)
        if self.upper_bound:
            r1 = minimum(r1, self.upper_bound)
        r2 = u.norm()
        either_zero = (r1 == 0) + (r2 == 0)
        return where(either_zero, ones_like(r1) * lr, r1 * lr / r2)

    def _step(self, weight: NDArray, grad: NDArray, state: Any, lr: float, wd: float, t: int, multi_precision: bool) -> None:
        if multi_precision:
            master, (mean, var) = state
            u = self._direction(master, grad.astype(np.float32), mean, var, wd, t)
            master[:] = master - self._scaled_lr(master, u, lr) * u
            master.astype(weight.dtype).copyto(weight)
        else:
            mean, var = state
            u = self._direction(weight, grad, mean, var, wd, t)
            weight[:] = weight - self._scaled_lr(weight, u, lr) * u

    def _update_impl(self, index: Any, weight: Any, grad: Any, state: Any, multi_precision: bool = False) -> None:
        if isinstance(index, (list, tuple)) and self.aggregate_num <= 1:
            assert len(index) == self.aggregate_num
            index, weight, grad, state = index[0], weight[0], grad[0], state[0]
        indices, weights, grads, states = _as_lists(index, weight, grad, state)
        _check(weights, grads)
        # Each weight is counted, then its rate read, in turn, as MXNet does.
        plan = []
        for i in indices:
            self._update_count(i)
            plan.append((self._index_update_count[i], self._get_lr(i), self._get_wd(i)))
        for w, g, s, (t, lr, wd) in zip(weights, grads, states, plan, strict=True):
            self._step(w, g, s, lr, wd, t, multi_precision)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Updates one weight, or a list of them (``index`` a list)."""
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """:meth:`update` through the float32 master copies of float16 weights when
        ``multi_precision`` is set."""
        first = weight[0] if isinstance(index, (list, tuple)) else weight
        use_mp = bool(self.multi_precision and first.dtype == np.float16)
        self._update_impl(index, weight, grad, state, multi_precision=use_mp)

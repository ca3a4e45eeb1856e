"""Stochastic gradient descent and its momentum variants: SGD, ccSGD, NAG and Signum.

Each update is one fused ``mx.nd`` operator writing the weight in place
(``sgd_update``, ``sgd_mom_update``, their ``mp_*`` mixed-precision forms,
``nag_mom_update``, ``signsgd_update``, ``signum_update``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..ndarray import NDArray, zeros
from .optimizer import Optimizer, _nd, register

__all__ = ["SGD", "ccSGD", "NAG", "Signum"]


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


class _MomentumMixin:
    """Shared state creation of SGD and NAG: momentum (or None) and, with
    multi-precision float16 weights, ``(momentum, float32 master copy)``."""

    momentum: float
    multi_precision: bool
    _MP_NAME = "SGD"  # the name the float16 warning gives

    def _momentum_state(self, weight: NDArray) -> NDArray | None:
        if self.momentum == 0.0:
            return None
        return zeros(weight.shape, weight.context, dtype=weight.dtype)

    def create_state_multi_precision(self, index: Any, weight: NDArray) -> Any:
        """The state, as ``(momentum, float32 master copy)`` for a float16 weight when
        ``multi_precision`` is set."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (self.create_state(index, master), master)
        self._warn_fp16(weight, self._MP_NAME)
        return self.create_state(index, weight)


@register
class SGD(_MomentumMixin, Optimizer):
    """Stochastic gradient descent with momentum and weight decay.

    Per update::

        rescaled = lr * (clip(rescale_grad * grad, clip_gradient) + wd * weight)
        state = momentum * state + rescaled
        weight = weight - state

    (without momentum, ``weight = weight - rescaled``).

    Parameters
    ----------
    momentum : float, optional
        The momentum; 0 keeps no state.
    lazy_update : bool, optional
        Update only the rows present in a row-sparse gradient (dense arrays are always
        updated in full).
    **kwargs
        As for :class:`Optimizer`; ``multi_precision`` keeps float32 master copies of
        float16 weights.
    """

    _FUSED_NAME = "sgd"

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))

    def create_state(self, index: Any, weight: NDArray) -> NDArray | None:
        """The momentum buffer, or None when ``momentum`` is 0."""
        return self._momentum_state(weight)

    def _update_impl(
        self, indices: Any, weights: Any, grads: Any, states: Any, multi_precision: bool = False
    ) -> None:
        # A list of weights (what the updater hands over when aggregating) is updated as
        # MXNet's multi_sgd_update does: without momentum, its rounding differs.
        aggregate = isinstance(indices, (list, tuple))
        if not aggregate:
            indices, weights, grads, states = [indices], [weights], [grads], [states]
        for w, g in zip(weights, grads, strict=True):
            assert isinstance(w, NDArray) and isinstance(g, NDArray)
        # All counts move first, then every rate is read: a batch of weights shares one
        # scheduler value, as MXNet's aggregated update does.
        self._update_count(list(indices))
        lrs = self._get_lrs(list(indices))
        wds = self._get_wds(list(indices))
        kwargs: dict[str, Any] = {"rescale_grad": self.rescale_grad}
        if self.momentum > 0:
            kwargs["momentum"] = self.momentum
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        for w, g, s, lr, wd in zip(weights, grads, states, lrs, wds, strict=True):
            if not multi_precision:
                if s is not None:
                    _nd("sgd_mom_update")(w, g, s, out=w, lazy_update=self.lazy_update, lr=lr, wd=wd, **kwargs)
                elif aggregate:
                    _nd("_rsmx_agg_sgd_update")(w, g, out=w, lr=lr, wd=wd, **kwargs)
                else:
                    _nd("sgd_update")(w, g, out=w, lazy_update=self.lazy_update, lr=lr, wd=wd, **kwargs)
            elif s[0] is not None:
                _nd("mp_sgd_mom_update")(w, g, s[0], s[1], out=w, lr=lr, wd=wd, **kwargs)
            elif aggregate:
                _nd("_rsmx_agg_mp_sgd_update")(w, g, s[1], out=w, lr=lr, wd=wd, **kwargs)
            else:
                _nd("mp_sgd_update")(w, g, s[1], out=w, lr=lr, wd=wd, **kwargs)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Updates one weight, or a list of them (``index`` a list)."""
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """:meth:`update` with the ``mp_*`` operators for float16 weights when
        ``multi_precision`` is set."""
        first = _as_list(weight)[0]
        use_mp = bool(self.multi_precision and first.dtype == np.float16)
        self._update_impl(index, weight, grad, state, multi_precision=use_mp)

    def _fused_hyperparams(self) -> dict[str, Any]:
        return {
            "momentum": self.momentum,
            "lazy_update": bool(self.lazy_update),
            "aggregate_num": int(self.aggregate_num),
        }


@register
class ccSGD(SGD):  # noqa: N801  (MXNet's name)
    """Deprecated alias of :class:`SGD`, kept for old scripts."""

    _FUSED_NAME = "ccsgd"


@register
class NAG(_MomentumMixin, Optimizer):
    """Nesterov accelerated gradient.

    Per update::

        g = clip(rescale_grad * grad, clip_gradient) + wd * weight
        state = momentum * state + g
        weight = weight - lr * (g + momentum * state)

    (plain SGD without momentum).

    Parameters
    ----------
    momentum : float, optional
        The momentum; 0 keeps no state.
    **kwargs
        As for :class:`Optimizer`; ``multi_precision`` keeps float32 master copies of
        float16 weights.
    """

    _FUSED_NAME = "nag"
    _MP_NAME = "NAG"

    def __init__(self, momentum: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state(self, index: Any, weight: NDArray) -> NDArray | None:
        """The momentum buffer, or None when ``momentum`` is 0."""
        return self._momentum_state(weight)

    def _update_impl(
        self, index: Any, weight: NDArray, grad: NDArray, state: Any, multi_precision: bool = False
    ) -> None:
        assert isinstance(weight, NDArray) and isinstance(grad, NDArray)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        kwargs: dict[str, Any] = {"rescale_grad": self.rescale_grad}
        if self.momentum > 0:
            kwargs["momentum"] = self.momentum
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        if not multi_precision:
            if state is not None:
                _nd("nag_mom_update")(weight, grad, state, out=weight, lr=lr, wd=wd, **kwargs)
            else:
                _nd("sgd_update")(weight, grad, out=weight, lr=lr, wd=wd, **kwargs)
        elif state[0] is not None:
            _nd("mp_nag_mom_update")(weight, grad, state[0], state[1], out=weight, lr=lr, wd=wd, **kwargs)
        else:
            _nd("mp_sgd_update")(weight, grad, state[1], out=weight, lr=lr, wd=wd, **kwargs)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """:meth:`update` with the ``mp_*`` operators for float16 weights when
        ``multi_precision`` is set."""
        use_mp = bool(
            self.multi_precision
            and weight.dtype == np.float16
            and isinstance(state, (tuple, list))
        )
        self._update_impl(index, weight, grad, state, multi_precision=use_mp)

    def _fused_hyperparams(self) -> dict[str, Any]:
        return {"momentum": self.momentum}


@register
class Signum(Optimizer):
    """Signum: steps along the sign of the momentum (signSGD without momentum).

    Per update::

        rescaled = clip(rescale_grad * grad, clip_gradient) + wd * weight
        state = momentum * state + (1 - momentum) * rescaled
        weight = (1 - lr * wd_lh) * weight - lr * sign(state)

    Parameters
    ----------
    learning_rate : float, optional
        The learning rate.
    momentum : float, optional
        The momentum; 0 gives signSGD and keeps no state.
    wd_lh : float, optional
        Decoupled weight decay.
    **kwargs
        As for :class:`Optimizer`.
    """

    _FUSED_NAME = "signum"

    def __init__(
        self, learning_rate: float = 0.01, momentum: float = 0.9, wd_lh: float = 0.0, **kwargs: Any
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index: Any, weight: NDArray) -> NDArray | None:
        """The momentum buffer, or None when ``momentum`` is 0."""
        if self.momentum == 0.0:
            return None
        return zeros(weight.shape, weight.context, dtype=weight.dtype)

    def _update_impl(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        assert isinstance(weight, NDArray) and isinstance(grad, NDArray)
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        kwargs: dict[str, Any] = {"rescale_grad": self.rescale_grad}
        if self.momentum > 0:
            kwargs["momentum"] = self.momentum
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        if self.wd_lh:
            kwargs["wd_lh"] = self.wd_lh
        if state is not None:
            _nd("signum_update")(weight, grad, state, out=weight, lr=lr, wd=wd, **kwargs)
        else:
            _nd("signsgd_update")(weight, grad, out=weight, lr=lr, wd=wd, **kwargs)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates one weight."""
        self._update_impl(index, weight, grad, state)

    def _fused_hyperparams(self) -> dict[str, Any]:
        return {"momentum": self.momentum, "wd_lh": self.wd_lh}

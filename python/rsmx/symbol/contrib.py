"""``mx.sym.contrib``: the ``_contrib_`` operators and contrib functions of symbols."""

from __future__ import annotations

import math
import sys
from typing import Any

from .control_flow import cond, foreach, while_loop
from .register import register_namespace
from .symbol import Symbol

__all__ = ["rand_zipfian", "adamw_update", "mp_adamw_update", "foreach", "while_loop", "cond"]


def rand_zipfian(true_classes: Symbol, num_sampled: int, range_max: int) -> tuple[Symbol, Symbol, Symbol]:
    """Symbols drawing ``num_sampled`` classes in ``[0, range_max)`` from the approximate
    Zipfian distribution, as ``mx.nd.contrib.rand_zipfian`` does: the sampled classes,
    the expected counts of ``true_classes`` and those of the sampled classes."""
    from . import op

    log_range = math.log(range_max + 1)
    draws = op._random_uniform(low=0, high=log_range, shape=(num_sampled,), dtype="float64")
    sampled = op.Cast(draws.exp() - 1, dtype="int64") % range_max

    def expected_count(classes: Symbol) -> Symbol:
        k = op.Cast(classes, dtype="float64")
        return ((k + 2.0) / (k + 1.0)).log() / log_range * num_sampled

    return sampled, expected_count(true_classes), expected_count(sampled)


def _rescale_grad_symbol(rescale_grad: Any) -> Symbol:
    from . import op

    if isinstance(rescale_grad, Symbol):
        return rescale_grad
    return op._full(shape=(1,), value=rescale_grad, dtype="float32")


def adamw_update(
    weight: Symbol, grad: Symbol, mean: Symbol, var: Symbol, rescale_grad: Any, lr: float, eta: float,
    beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8, wd: float = 0,
    clip_gradient: float = -1, name: Any = None, **kwargs: Any,
) -> Symbol:
    """The AdamW update as a symbol (see ``mx.nd.contrib.adamw_update``)."""
    from . import op

    return op._adamw_update(
        weight=weight, grad=grad, mean=mean, var=var, rescale_grad=_rescale_grad_symbol(rescale_grad),
        lr=lr, eta=eta, beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd,
        clip_gradient=clip_gradient, name=name, **kwargs,
    )


def mp_adamw_update(
    weight: Symbol, grad: Symbol, mean: Symbol, var: Symbol, weight32: Symbol, rescale_grad: Any,
    lr: float, eta: float, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
    wd: float = 0, clip_gradient: float = -1, name: Any = None, **kwargs: Any,
) -> Symbol:
    """The multi-precision AdamW update as a symbol."""
    from . import op

    return op._mp_adamw_update(
        weight=weight, grad=grad, mean=mean, var=var, weight32=weight32,
        rescale_grad=_rescale_grad_symbol(rescale_grad), lr=lr, eta=eta, beta1=beta1,
        beta2=beta2, epsilon=epsilon, wd=wd, clip_gradient=clip_gradient, name=name, **kwargs,
    )


register_namespace(sys.modules[__name__], "contrib")

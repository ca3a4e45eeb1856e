"""``mx.nd.contrib``: the ``_contrib_`` operators, element checks and imperative control flow."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .._nesting import flatten, regroup
from ..base import MXNetValueError
from ..context import current_context
from .ndarray import NDArray, concatenate, empty, logical_and
from .register import register_namespace

__all__ = [
    "rand_zipfian",
    "foreach",
    "while_loop",
    "cond",
    "isinf",
    "isfinite",
    "isnan",
    "adamw_update",
    "mp_adamw_update",
]


def isinf(data: NDArray) -> NDArray:
    """1 where ``data`` is +inf or -inf, else 0."""
    return data.abs() == np.inf


def isnan(data: NDArray) -> NDArray:
    """1 where ``data`` is NaN, else 0."""
    return data != data


def isfinite(data: NDArray) -> NDArray:
    """1 where ``data`` is neither infinite nor NaN, else 0."""
    return logical_and(data.abs() != np.inf, data == data)


def rand_zipfian(
    true_classes: NDArray, num_sampled: int, range_max: int, ctx: Any = None
) -> tuple[NDArray, NDArray, NDArray]:
    """Draws ``num_sampled`` classes in ``[0, range_max)`` from the approximate Zipfian
    (log-uniform) distribution ``P(k) = log((k+2)/(k+1)) / log(range_max+1)``.

    Returns the sampled classes (int64), the expected count of each of ``true_classes``
    and the expected count of each sampled class (both float64).
    """
    from .random import uniform

    ctx = ctx or current_context()
    log_range = math.log(range_max + 1)
    draws = uniform(0, log_range, shape=(num_sampled,), dtype="float64", ctx=ctx)
    sampled = (draws.exp() - 1).astype("int64") % range_max

    def expected_count(classes: NDArray) -> NDArray:
        k = classes.as_in_context(ctx).astype("float64")
        return ((k + 2.0) / (k + 1.0)).log() / log_range * num_sampled

    return sampled, expected_count(true_classes), expected_count(sampled)


# ------------------------------------------------------- AdamW


def _rescale_grad_array(rescale_grad: Any, ctx: Any) -> NDArray:
    """``rescale_grad`` as the one-element float32 array the AdamW updates read."""
    from .ndarray import full

    if isinstance(rescale_grad, NDArray):
        return rescale_grad.as_in_context(ctx)
    return full((1,), rescale_grad, ctx=ctx, dtype="float32")


def adamw_update(
    weight: NDArray,
    grad: NDArray,
    mean: NDArray,
    var: NDArray,
    rescale_grad: Any,
    lr: float,
    eta: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
    wd: float = 0,
    clip_gradient: float = -1,
    out: Any = None,
    name: Any = None,
    **kwargs: Any,
) -> Any:
    """AdamW (Adam with decoupled weight decay): updates ``mean`` and ``var`` in place
    and writes the new weight to ``out``. ``rescale_grad`` is a number or a one-element
    array; when it is zero or not finite the update is skipped."""
    from . import _internal

    return _internal._adamw_update(
        weight, grad, mean, var, _rescale_grad_array(rescale_grad, weight.context),
        lr=lr, eta=eta, beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd,
        clip_gradient=clip_gradient, out=out, name=name, **kwargs,
    )


def mp_adamw_update(
    weight: NDArray,
    grad: NDArray,
    mean: NDArray,
    var: NDArray,
    weight32: NDArray,
    rescale_grad: Any,
    lr: float,
    eta: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
    wd: float = 0,
    clip_gradient: float = -1,
    out: Any = None,
    name: Any = None,
    **kwargs: Any,
) -> Any:
    """:func:`adamw_update` on the float32 master copy ``weight32`` of a float16 weight."""
    from . import _internal

    return _internal._mp_adamw_update(
        weight, grad, mean, var, weight32, _rescale_grad_array(rescale_grad, weight.context),
        lr=lr, eta=eta, beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd,
        clip_gradient=clip_gradient, out=out, name=name, **kwargs,
    )


# ------------------------------------------------------- nested outputs


def _flatten(args: Any, what: str) -> tuple[list[NDArray], Any]:
    """The NDArrays of a nested list, and its layout (0 for a bare NDArray)."""
    return flatten(args, NDArray, what)


_regroup = regroup


def _as_bool(value: Any, what: str) -> bool:
    if isinstance(value, NDArray):
        value = value.asscalar()
    try:
        return bool(value)
    except Exception as e:  # noqa: BLE001
        raise MXNetValueError(f"cannot convert {what} to a Python bool") from e


# ------------------------------------------------------- control flow


def foreach(body: Callable[[Any, Any], tuple[Any, Any]], data: Any, init_states: Any) -> tuple[Any, Any]:
    """Runs ``out, states = body(data[i], states)`` for each ``i`` along axis 0 of
    ``data`` (an NDArray or a list of them, sliced together); returns the outputs of
    every step stacked on a new axis 0 (with ``body``'s nesting) and the last states."""
    _flatten(data, "foreach data")
    _flatten(init_states, "foreach init_states")
    single = isinstance(data, NDArray)
    steps = data.shape[0] if single else data[0].shape[0]
    states = init_states
    per_step: list[list[NDArray]] = []
    layout: Any = []
    for i in range(steps):
        outs, states = body(data[i] if single else [d[i] for d in data], states)
        flat, layout = _flatten(outs, "foreach output")
        per_step.append(flat)
    from . import op

    stacked = [op.stack(*column) for column in zip(*per_step, strict=True)]
    outputs, _ = _regroup(stacked, layout) if per_step else ([], [])
    return outputs, states


def _loop_step(func: Callable[..., Any], loop_vars: list[NDArray]) -> tuple[Any, list[NDArray]]:
    """One step of ``while_loop``'s body: ``(step outputs, new loop variables)``."""
    step_output, new_vars = func(*loop_vars)
    step_output = [] if step_output is None else step_output
    new_vars = [] if new_vars is None else new_vars
    new_vars = [new_vars] if isinstance(new_vars, NDArray) else list(new_vars)
    if len(new_vars) != len(loop_vars):
        raise MXNetValueError("The length of loop_vars should be consistent during the loop")
    return list(step_output) if isinstance(step_output, tuple) else step_output, new_vars


def _stack_padded(items: list[NDArray], length: int) -> NDArray:
    """``items`` stacked on a new axis 0, padded with uninitialised rows to ``length``."""
    rows = [x.expand_dims(0) for x in items]
    if len(rows) < length:
        first = items[0]
        rows.append(empty((length - len(rows), *first.shape), ctx=first.context, dtype=first.dtype))
    try:
        return concatenate(rows, axis=0)
    except ValueError as e:
        shapes = ", ".join(str(x.shape) for x in items)
        raise MXNetValueError(f"step outputs have inconsistent shapes: {shapes}") from e


def while_loop(
    cond: Callable[..., Any], func: Callable[..., Any], loop_vars: Any, max_iterations: Any = None
) -> tuple[Any, Any]:
    """Runs ``step_output, loop_vars = func(*loop_vars)`` while ``cond(*loop_vars)`` is
    true, at most ``max_iterations`` times; returns each step output stacked on axis 0
    (padded to ``max_iterations`` rows, the padding undefined) and the final loop
    variables."""
    if max_iterations is None:
        raise MXNetValueError("max_iterations should be specified")
    if isinstance(max_iterations, NDArray):
        max_iterations = max_iterations.asscalar()
    max_iterations = int(max_iterations)
    single = isinstance(loop_vars, NDArray)
    variables = [loop_vars] if single else list(loop_vars)
    if not variables:
        raise MXNetValueError("loop_vars should contain at least one element")
    per_step: list[list[NDArray]] = []
    layout: Any = None
    while len(per_step) < max_iterations and _as_bool(cond(*variables), "the value of cond"):
        step_output, variables = _loop_step(func, variables)
        flat, layout = _flatten(step_output, "while_loop output")
        if per_step and len(flat) != len(per_step[0]):
            raise MXNetValueError("Number of elements in step_output should be the same in each step")
        per_step.append(flat)
    stacked = [_stack_padded(list(col), max_iterations) for col in zip(*per_step, strict=True)]
    if layout is not None:
        stacked, _ = _regroup(stacked, layout)
    return stacked, variables[0] if single else variables


def cond(pred: Any, then_func: Callable[[], Any], else_func: Callable[[], Any]) -> Any:
    """``then_func()`` if the scalar ``pred`` is true, else ``else_func()``."""
    return then_func() if _as_bool(pred, "pred") else else_func()


register_namespace(sys.modules[__name__], "contrib")

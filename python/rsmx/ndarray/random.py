"""Random samplers of ``mx.nd.random``: distributions, multinomial draws, shuffling."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetError, MXNetTypeError, MXNetValueError, _Null
from ..context import current_context

__all__ = [
    "uniform",
    "normal",
    "randn",
    "poisson",
    "exponential",
    "gamma",
    "multinomial",
    "negative_binomial",
    "generalized_negative_binomial",
    "shuffle",
    "randint",
]

_NUMBERS = (int, float, np.generic)


class MixedParameterError(MXNetTypeError, AssertionError):
    """Distribution parameters mixing arrays and numbers (an ``AssertionError`` in
    MXNet, hence both)."""


def _op(name: str) -> Any:
    from . import op

    return getattr(op, name)


def _is_array(v: Any) -> bool:
    from .ndarray import NDArray

    return isinstance(v, NDArray)


def _check_params(params: list[Any]) -> bool:
    """True when the distribution parameters are arrays, False when they are numbers."""
    first = params[0]
    if _is_array(first):
        kind = _is_array
    elif isinstance(first, _NUMBERS):
        kind = lambda v: isinstance(v, _NUMBERS)  # noqa: E731
    else:
        raise MXNetValueError(
            f"Distribution parameters must be either NDArray or numbers, but got {type(first)}."
        )
    for p in params[1:]:
        if not kind(p):
            raise MixedParameterError(
                "Distribution parameters must all have the same type, but got "
                f"both {type(first)} and {type(p)}."
            )
    return kind is _is_array


def _sample(
    scalar_op: str,
    array_op: str | None,
    params: dict[str, Any],
    shape: Any,
    dtype: Any,
    ctx: Any,
    out: Any,
    kwargs: dict,
) -> Any:
    """Draws with ``scalar_op`` for number parameters, or ``array_op`` (one set of
    ``shape`` draws per element) for NDArray parameters."""
    if _check_params(list(params.values())):
        if array_op is None:
            raise MXNetTypeError(f"{scalar_op}: distribution parameters must be numbers")
        return _op(array_op)(*params.values(), shape=shape, dtype=dtype, out=out, **kwargs)
    if shape is _Null and out is None:
        shape = (1,)
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    if out is not None and shape is _Null:
        shape = out.shape
    if out is not None and dtype is _Null:
        # As MXNet infers it: the sample takes the type of the array it is written into.
        dtype = out.dtype
    return _op(scalar_op)(
        **params, shape=shape, dtype=dtype, ctx=ctx or current_context(), out=out, **kwargs
    )


def uniform(low: Any = 0, high: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the uniform distribution on ``[low, high)``.

    With NDArray ``low`` and ``high`` of shape ``(x, y)`` the result has shape
    ``(x, y) + shape``: ``shape`` draws for each pair.
    """
    return _sample("_random_uniform", "_sample_uniform", {"low": low, "high": high}, shape, dtype, ctx, out, kwargs)


def normal(loc: Any = 0, scale: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the normal distribution with mean ``loc`` and deviation ``scale``."""
    return _sample("_random_normal", "_sample_normal", {"loc": loc, "scale": scale}, shape, dtype, ctx, out, kwargs)


def randn(*shape: Any, **kwargs: Any) -> Any:
    """Samples from the normal distribution, the shape given as positional integers:
    ``randn(2, 3, loc=5, scale=1)``."""
    loc = kwargs.pop("loc", 0)
    scale = kwargs.pop("scale", 1)
    dtype = kwargs.pop("dtype", _Null)
    ctx = kwargs.pop("ctx", None)
    out = kwargs.pop("out", None)
    return _sample("_random_normal", "_sample_normal", {"loc": loc, "scale": scale}, shape, dtype, ctx, out, kwargs)


def randint(low: int, high: int, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples integers uniformly from ``[low, high)`` (``int32`` unless ``dtype`` says
    ``int64``)."""
    return _sample("_random_randint", None, {"low": low, "high": high}, shape, dtype, ctx, out, kwargs)


def exponential(scale: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the exponential distribution with scale ``scale`` (1/rate)."""
    return _sample("_random_exponential", "_sample_exponential", {"lam": 1.0 / scale}, shape, dtype, ctx, out, kwargs)


def gamma(alpha: Any = 1, beta: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the gamma distribution with shape ``alpha`` and scale ``beta``."""
    return _sample("_random_gamma", "_sample_gamma", {"alpha": alpha, "beta": beta}, shape, dtype, ctx, out, kwargs)


def poisson(lam: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the Poisson distribution with rate ``lam`` (as floating point)."""
    return _sample("_random_poisson", "_sample_poisson", {"lam": lam}, shape, dtype, ctx, out, kwargs)


def negative_binomial(k: Any = 1, p: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the negative binomial distribution: failures before the ``k``-th
    success, each trial succeeding with probability ``p``."""
    return _sample("_random_negative_binomial", "_sample_negative_binomial", {"k": k, "p": p}, shape, dtype, ctx, out, kwargs)


def generalized_negative_binomial(mu: Any = 1, alpha: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the generalized negative binomial distribution with mean ``mu`` and
    dispersion ``alpha``."""
    return _sample(
        "_random_generalized_negative_binomial",
        "_sample_generalized_negative_binomial",
        {"mu": mu, "alpha": alpha},
        shape,
        dtype,
        ctx,
        out,
        kwargs,
    )


# The largest index each sample type holds exactly, as MXNet checks it.
_MAX_INDEX = {"uint8": 255, "int8": 127, "int32": 2**31 - 1, "int64": 2**63 - 1,
              "float16": 2**11, "float32": 2**24, "float64": 2**53}


def _check_index_range(data: Any, dtype: Any) -> None:
    limit = _MAX_INDEX.get(np.dtype(dtype).name)
    if limit is not None and data.shape and data.shape[-1] > limit:
        raise MXNetError(
            f"_sample_multinomial: 'dtype' {np.dtype(dtype).name} does not have a sufficient "
            f"precision to represent the indices of the input array ({data.shape[-1]} outcomes)"
        )


def multinomial(data: Any, shape: Any = _Null, get_prob: bool = False, out: Any = None, dtype: Any = "int32", **kwargs: Any) -> Any:
    """Draws outcome indices from the distributions along the last axis of ``data``.

    For ``data`` of shape ``(d1, ..., k)`` the result has shape ``(d1, ...) + shape``.
    With ``get_prob`` the result is ``[samples, log_likelihoods]``.
    """
    _check_index_range(data, dtype)
    return _op("_sample_multinomial")(data, shape=shape, get_prob=get_prob, out=out, dtype=dtype, **kwargs)


def shuffle(data: Any, **kwargs: Any) -> Any:
    """A copy of ``data`` with its first axis randomly permuted."""
    return _op("_shuffle")(data, **kwargs)


def _like(op_name: str, data: Any, params: dict[str, Any], out: Any, kwargs: dict) -> Any:
    kwargs.pop("name", None)
    return _op(op_name)(data, out=out, **params, **kwargs)


def uniform_like(data: Any = None, low: Any = _Null, high: Any = _Null, out: Any = None, **kwargs: Any) -> Any:
    """Uniform samples on ``[low, high)`` of the shape and type of ``data``."""
    return _like("_random_uniform_like", data, {"low": low, "high": high}, out, kwargs)


def normal_like(data: Any = None, loc: Any = _Null, scale: Any = _Null, out: Any = None, **kwargs: Any) -> Any:
    """Normal samples of the shape and type of ``data``."""
    return _like("_random_normal_like", data, {"loc": loc, "scale": scale}, out, kwargs)


def exponential_like(data: Any = None, lam: Any = _Null, out: Any = None, **kwargs: Any) -> Any:
    """Exponential samples of rate ``lam``, of the shape and type of ``data``."""
    return _like("_random_exponential_like", data, {"lam": lam}, out, kwargs)


def gamma_like(data: Any = None, alpha: Any = _Null, beta: Any = _Null, out: Any = None, **kwargs: Any) -> Any:
    """Gamma samples of the shape and type of ``data``."""
    return _like("_random_gamma_like", data, {"alpha": alpha, "beta": beta}, out, kwargs)


def poisson_like(data: Any = None, lam: Any = _Null, out: Any = None, **kwargs: Any) -> Any:
    """Poisson samples of the shape and type of ``data``."""
    return _like("_random_poisson_like", data, {"lam": lam}, out, kwargs)


def negative_binomial_like(data: Any = None, k: Any = _Null, p: Any = _Null, out: Any = None, **kwargs: Any) -> Any:
    """Negative binomial samples of the shape and type of ``data``."""
    return _like("_random_negative_binomial_like", data, {"k": k, "p": p}, out, kwargs)


def generalized_negative_binomial_like(data: Any = None, mu: Any = _Null, alpha: Any = _Null, out: Any = None, **kwargs: Any) -> Any:
    """Generalized negative binomial samples of the shape and type of ``data``."""
    return _like("_random_generalized_negative_binomial_like", data, {"mu": mu, "alpha": alpha}, out, kwargs)

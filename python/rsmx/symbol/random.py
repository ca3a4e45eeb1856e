"""Random samplers of ``mx.sym.random``: the ``mx.nd.random`` functions as Symbols."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..base import MXNetTypeError, MXNetValueError, _Null
from ..ndarray.random import MixedParameterError
from .symbol import Symbol

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


def _op(name: str) -> Any:
    from . import op

    return getattr(op, name)


def _check_params(params: list[Any]) -> bool:
    """True when the distribution parameters are Symbols, False when they are numbers."""
    first = params[0]
    if isinstance(first, Symbol):
        kind: Any = Symbol
    elif isinstance(first, _NUMBERS):
        kind = _NUMBERS
    else:
        raise MXNetValueError(
            f"Distribution parameters must be either Symbol or numbers, but got {type(first)}."
        )
    for p in params[1:]:
        if not isinstance(p, kind):
            raise MixedParameterError(
                "Distribution parameters must all have the same type, but got "
                f"both {type(first)} and {type(p)}."
            )
    return kind is Symbol


def _sample(
    scalar_op: str, array_op: str | None, params: dict[str, Any], shape: Any, dtype: Any, kwargs: dict
) -> Symbol:
    """A node of ``scalar_op`` for number parameters, or of ``array_op`` (one set of
    ``shape`` draws per element) for Symbol parameters."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    if _check_params(list(params.values())):
        if array_op is None:
            raise MXNetTypeError(f"{scalar_op}: distribution parameters must be numbers")
        return _op(array_op)(*params.values(), shape=shape, dtype=dtype, **kwargs)
    # The number form has no inputs: MXNet drops Symbols given to it (``data=``).
    kwargs = {k: v for k, v in kwargs.items() if not isinstance(v, Symbol)}
    return _op(scalar_op)(**params, shape=shape, dtype=dtype, **kwargs)


def uniform(low: Any = 0, high: Any = 1, shape: Any = _Null, dtype: Any = _Null, **kwargs: Any) -> Symbol:
    """Samples from the uniform distribution on ``[low, high)``."""
    return _sample("_random_uniform", "_sample_uniform", {"low": low, "high": high}, shape, dtype, kwargs)


def normal(loc: Any = 0, scale: Any = 1, shape: Any = _Null, dtype: Any = _Null, **kwargs: Any) -> Symbol:
    """Samples from the normal distribution with mean ``loc`` and deviation ``scale``."""
    return _sample("_random_normal", "_sample_normal", {"loc": loc, "scale": scale}, shape, dtype, kwargs)


def randn(*shape: Any, **kwargs: Any) -> Symbol:
    """Samples from the normal distribution, the shape given as positional integers."""
    loc = kwargs.pop("loc", 0)
    scale = kwargs.pop("scale", 1)
    dtype = kwargs.pop("dtype", _Null)
    return _sample("_random_normal", "_sample_normal", {"loc": loc, "scale": scale}, shape, dtype, kwargs)


def poisson(lam: Any = 1, shape: Any = _Null, dtype: Any = _Null, **kwargs: Any) -> Symbol:
    """Samples from the Poisson distribution with rate ``lam``."""
    return _sample("_random_poisson", "_sample_poisson", {"lam": lam}, shape, dtype, kwargs)


def exponential(scale: Any = 1, shape: Any = _Null, dtype: Any = _Null, **kwargs: Any) -> Symbol:
    """Samples from the exponential distribution with scale ``scale`` (1/rate)."""
    return _sample("_random_exponential", "_sample_exponential", {"lam": 1.0 / scale}, shape, dtype, kwargs)


def gamma(alpha: Any = 1, beta: Any = 1, shape: Any = _Null, dtype: Any = _Null, **kwargs: Any) -> Symbol:
    """Samples from the gamma distribution with shape ``alpha`` and scale ``beta``."""
    return _sample("_random_gamma", "_sample_gamma", {"alpha": alpha, "beta": beta}, shape, dtype, kwargs)


def negative_binomial(k: Any = 1, p: Any = 1, shape: Any = _Null, dtype: Any = _Null, **kwargs: Any) -> Symbol:
    """Samples from the negative binomial distribution."""
    return _sample("_random_negative_binomial", "_sample_negative_binomial", {"k": k, "p": p}, shape, dtype, kwargs)


def generalized_negative_binomial(mu: Any = 1, alpha: Any = 1, shape: Any = _Null, dtype: Any = _Null, **kwargs: Any) -> Symbol:
    """Samples from the generalized negative binomial distribution."""
    return _sample(
        "_random_generalized_negative_binomial",
        "_sample_generalized_negative_binomial",
        {"mu": mu, "alpha": alpha},
        shape,
        dtype,
        kwargs,
    )


def randint(low: int, high: int, shape: Any = _Null, dtype: Any = _Null, **kwargs: Any) -> Symbol:
    """Samples integers uniformly from ``[low, high)``."""
    return _sample("_random_randint", None, {"low": low, "high": high}, shape, dtype, kwargs)


def multinomial(data: Symbol, shape: Any = _Null, get_prob: bool = True, dtype: Any = "int32", **kwargs: Any) -> Symbol:
    """Draws outcome indices from the distributions along the last axis of ``data``; with
    ``get_prob`` (the default here, as in MXNet) a second output holds their log
    likelihoods."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    return _op("_sample_multinomial")(data, shape=shape, get_prob=get_prob, dtype=dtype, **kwargs)


def shuffle(data: Symbol, **kwargs: Any) -> Symbol:
    """``data`` with its first axis randomly permuted."""
    return _op("_shuffle")(data, **kwargs)


@functools.cache
def _named_op(op_name: str, func_name: str) -> Any:
    """The Symbol function of ``op_name`` whose nodes are named after ``func_name``
    (``uniform_like0``), as MXNet names the nodes of ``mx.sym.random``'s own operators."""
    from .. import _core
    from .register import make_sym_function

    for name, _aliases, inputs, variadic, params, doc in _core.list_ops():
        if name == op_name:
            return make_sym_function(func_name, op_name, inputs, variadic, params, doc)
    raise MXNetValueError(f"operator '{op_name}' is not available in this rsmx build")


def _like(op_name: str, data: Any, params: dict[str, Any], kwargs: dict) -> Symbol:
    if data is not None:
        kwargs["data"] = data
    return _named_op(op_name, op_name[len("_random_"):])(**params, **kwargs)


def uniform_like(data: Any = None, low: Any = _Null, high: Any = _Null, **kwargs: Any) -> Symbol:
    """Uniform samples on ``[low, high)`` of the shape and type of ``data``."""
    return _like("_random_uniform_like", data, {"low": low, "high": high}, kwargs)


def normal_like(data: Any = None, loc: Any = _Null, scale: Any = _Null, **kwargs: Any) -> Symbol:
    """Normal samples of the shape and type of ``data``."""
    return _like("_random_normal_like", data, {"loc": loc, "scale": scale}, kwargs)


def exponential_like(data: Any = None, lam: Any = _Null, **kwargs: Any) -> Symbol:
    """Exponential samples of rate ``lam``, of the shape and type of ``data``."""
    return _like("_random_exponential_like", data, {"lam": lam}, kwargs)


def gamma_like(data: Any = None, alpha: Any = _Null, beta: Any = _Null, **kwargs: Any) -> Symbol:
    """Gamma samples of the shape and type of ``data``."""
    return _like("_random_gamma_like", data, {"alpha": alpha, "beta": beta}, kwargs)


def poisson_like(data: Any = None, lam: Any = _Null, **kwargs: Any) -> Symbol:
    """Poisson samples of the shape and type of ``data``."""
    return _like("_random_poisson_like", data, {"lam": lam}, kwargs)


def negative_binomial_like(data: Any = None, k: Any = _Null, p: Any = _Null, **kwargs: Any) -> Symbol:
    """Negative binomial samples of the shape and type of ``data``."""
    return _like("_random_negative_binomial_like", data, {"k": k, "p": p}, kwargs)


def generalized_negative_binomial_like(data: Any = None, mu: Any = _Null, alpha: Any = _Null, **kwargs: Any) -> Symbol:
    """Generalized negative binomial samples of the shape and type of ``data``."""
    return _like("_random_generalized_negative_binomial_like", data, {"mu": mu, "alpha": alpha}, kwargs)

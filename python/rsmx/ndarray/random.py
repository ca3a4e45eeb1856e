"""Random samplers: ``mx.nd.random.uniform``, ``normal``, ``randint`` and friends."""

from __future__ import annotations

from typing import Any

from ..base import _Null
from ..context import current_context

__all__ = ["uniform", "normal", "randint", "exponential", "gamma", "poisson"]


def _op(name: str) -> Any:
    from . import op

    return getattr(op, name)


def _sample(
    scalar_op: str, array_op: str | None, params: dict[str, Any], shape: Any, dtype: Any, ctx: Any, out: Any, kwargs: dict
) -> Any:
    from .ndarray import NDArray

    arrays = [v for v in params.values() if isinstance(v, NDArray)]
    if arrays and array_op is None:
        from ..base import MXNetTypeError

        raise MXNetTypeError(f"{scalar_op}: distribution parameters must be numbers")
    if arrays:
        if len(arrays) != len(params):
            from ..base import MXNetTypeError

            raise MXNetTypeError(
                f"{array_op}: distribution parameters must be all NDArrays or all numbers"
            )
        return _op(array_op)(*arrays, shape=shape, dtype=dtype, out=out, **kwargs)
    if shape is _Null and out is None:
        shape = (1,)
    if isinstance(shape, int):
        shape = (shape,)
    if out is not None and shape is _Null:
        shape = out.shape
    if out is not None and dtype is _Null:
        # As MXNet infers it: the sample takes the type of the array it is written into.
        dtype = out.dtype
    return _op(scalar_op)(
        **params, shape=shape, dtype=dtype, ctx=ctx or current_context(), out=out, **kwargs
    )


def uniform(low: Any = 0, high: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the uniform distribution on ``[low, high)``."""
    return _sample("_random_uniform", "_sample_uniform", {"low": low, "high": high}, shape, dtype, ctx, out, kwargs)


def normal(loc: Any = 0, scale: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the normal distribution with mean ``loc`` and deviation ``scale``."""
    return _sample("_random_normal", "_sample_normal", {"loc": loc, "scale": scale}, shape, dtype, ctx, out, kwargs)


def randint(low: int, high: int, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples integers uniformly from ``[low, high)``."""
    return _sample("_random_randint", None, {"low": low, "high": high}, shape, dtype, ctx, out, kwargs)


def exponential(scale: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the exponential distribution with scale ``scale`` (1/rate)."""
    lam = 1.0 / scale if not hasattr(scale, "shape") else 1.0 / scale
    return _sample("_random_exponential", "_sample_exponential", {"lam": lam}, shape, dtype, ctx, out, kwargs)


def gamma(alpha: Any = 1, beta: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the gamma distribution with shape ``alpha`` and scale ``beta``."""
    return _sample("_random_gamma", "_sample_gamma", {"alpha": alpha, "beta": beta}, shape, dtype, ctx, out, kwargs)


def poisson(lam: Any = 1, shape: Any = _Null, dtype: Any = _Null, ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples from the Poisson distribution with rate ``lam``."""
    return _sample("_random_poisson", "_sample_poisson", {"lam": lam}, shape, dtype, ctx, out, kwargs)

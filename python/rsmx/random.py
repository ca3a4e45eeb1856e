"""Random number generation: seeding and the samplers of ``mx.nd.random``."""

from __future__ import annotations

from typing import Any

from . import _core
from .context import Context
from .ndarray.random import (
    exponential,
    gamma,
    generalized_negative_binomial,
    multinomial,
    negative_binomial,
    normal,
    poisson,
    randint,
    randn,
    shuffle,
    uniform,
)

__all__ = [
    "seed",
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


def _seed_value(seed_state: Any) -> int:
    """The seed as the core takes it: a C ``int``, as MXNet passes it (so seeds that
    differ by a multiple of 2**32 give the same draws)."""
    import numpy as np

    from .base import MXNetValueError

    if not isinstance(seed_state, (int, np.integer)):
        raise MXNetValueError("seed_state must be int")
    value = int(seed_state) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def seed(seed_state: int, ctx: str | Context = "all") -> None:
    """Seeds the random generators of every device (``ctx='all'``) or of one device.

    Draws after the same seed are the same on the same device; every device seeded with
    the same number draws the same numbers.

    Parameters
    ----------
    seed_state : int
        The seed.
    ctx : Context or 'all', optional
        The device whose generators to seed; all of them by default.
    """
    value = _seed_value(seed_state) & ((1 << 64) - 1)
    if isinstance(ctx, str) and ctx == "all":
        _core.random_seed(value)
    else:
        _core.random_seed(value, Context(ctx)._pair)

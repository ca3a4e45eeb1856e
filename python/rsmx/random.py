"""Random number generation: seeding and the samplers of ``mx.nd.random``."""

from __future__ import annotations

from . import _core
from .context import Context
from .ndarray.random import normal, randint, uniform

__all__ = ["seed", "uniform", "normal", "randint"]


def seed(seed_state: int, ctx: str | Context = "all") -> None:
    """Seeds the random generators of every device (``ctx='all'``) or of one device.

    Draws after the same seed are the same on the same device.
    """
    from .base import MXNetValueError

    if not isinstance(seed_state, int):
        raise MXNetValueError(f"seed_state must be an int, got {type(seed_state).__name__}")
    seed_state &= (1 << 64) - 1
    if ctx == "all":
        _core.random_seed(seed_state)
    else:
        _core.random_seed(seed_state, Context(ctx)._pair)

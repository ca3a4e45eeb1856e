"""``mx.sym.contrib``: the ``_contrib_`` operators and contrib functions of symbols."""

from __future__ import annotations

import math
import sys

from .register import register_namespace
from .symbol import Symbol

__all__ = ["rand_zipfian"]


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


register_namespace(sys.modules[__name__], "contrib")

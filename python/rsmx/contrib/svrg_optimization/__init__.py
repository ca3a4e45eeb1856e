"""``mx.contrib.svrg_optimization``: training by stochastic variance-reduced gradients
(SVRG): :class:`SVRGModule` and the optimizers it runs."""

from __future__ import annotations

from .svrg_module import SVRGModule
from .svrg_optimizer import _AssignmentOptimizer, _SVRGOptimizer

__all__ = ["SVRGModule", "_AssignmentOptimizer", "_SVRGOptimizer"]

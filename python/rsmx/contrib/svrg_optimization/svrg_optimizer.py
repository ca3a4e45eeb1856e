"""The optimizers of :class:`SVRGModule`: ``_SVRGOptimizer`` sends a parameter's update to
the user's optimizer and a full gradient's (keys ending ``_full``) to
``_AssignmentOptimizer``, which stores what it is given."""

from __future__ import annotations

from typing import Any

from ... import optimizer as opt
from ...ndarray.ndarray import NDArray

__all__ = ["_AssignmentOptimizer", "_SVRGOptimizer"]

# The arguments of the base Optimizer, which _SVRGOptimizer keeps for itself.
_BASE_PARAMS = ("rescale_grad", "param_idx2name", "wd", "clip_gradient", "learning_rate",
                "lr_scheduler", "sym", "begin_num_update", "multi_precision", "param_dict")


@opt.register
class _AssignmentOptimizer(opt.Optimizer):
    """Sets the weight to the gradient: how full gradients accumulate in a KVStore."""

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        weight[:] = grad


@opt.register
class _SVRGOptimizer(opt.Optimizer):
    """Updates parameters with ``default_optimizer`` (a name or an Optimizer) and full
    gradients (names containing ``full``) with :class:`_AssignmentOptimizer`."""

    def __init__(self, default_optimizer: Any, **kwargs: Any) -> None:
        super().__init__(**{k: v for k, v in kwargs.items() if k in _BASE_PARAMS})
        if isinstance(default_optimizer, str):
            self.default_opt = opt.create(default_optimizer, **kwargs)
        else:
            self.default_opt = default_optimizer
        self.aux_opt = opt.create(_AssignmentOptimizer.__name__)

    def _name(self, index: Any) -> str:
        return index if index in self.idx2name.values() else self.idx2name[index]

    def _for(self, index: Any) -> opt.Optimizer:
        return self.aux_opt if "full" in self._name(index) else self.default_opt

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._for(index).update(index, weight, grad, state)

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return self._for(index).create_state(index, weight)

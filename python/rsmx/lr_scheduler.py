"""Learning-rate schedules: functions of the update count that the optimizers query.

Every scheduler is a callable ``scheduler(num_update) -> float`` with MXNet 1.x's rules,
including its mutable state (``FactorScheduler`` and ``MultiFactorScheduler`` lower
``base_lr`` in place as updates pass their steps) and its ``logging.info`` messages.

The built-in schedulers can also describe themselves as a JSON object (see
:meth:`LRScheduler._fused_config`) so the Rust ``FusedOptimizer`` can run the same
schedule without calling back into Python. Once an optimizer runs in the core, its
scheduler is bound to the core's copy: calling it and its changing fields (``base_lr``,
``count``, ``cur_step_ind``) read and write the core's state, which is the only one. A
user subclass has no description, and the KVStore then runs the Python updater instead.
"""

from __future__ import annotations

import json
import logging
from math import cos, pi
from typing import Any

from .base import MXNetValueError

__all__ = [
    "LRScheduler",
    "FactorScheduler",
    "MultiFactorScheduler",
    "PolyScheduler",
    "CosineScheduler",
]


class _CoreField:
    """An attribute of an object that a core optimizer may own.

    Unbound (the object's ``_fused`` is None), the value lives in the instance's
    ``__dict__`` under the same name, so pickles and plain use see an ordinary attribute.
    Bound, ``get(obj, fused)`` and ``put(obj, fused, value)`` read and write the core's
    state instead.
    """

    def __init__(self, get: Any, put: Any) -> None:
        self.get = get
        self.put = put
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        fused = obj.__dict__.get("_fused")
        if fused is not None:
            return self.get(obj, fused)
        try:
            return obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {self.name!r}") from None

    def __set__(self, obj: Any, value: Any) -> None:
        fused = obj.__dict__.get("_fused")
        if fused is None:
            obj.__dict__[self.name] = value
        else:
            self.put(obj, fused, value)


def _sched_field(name: str) -> _CoreField:
    """A field of the scheduler's state, kept in the core's schedule once bound."""

    def get(obj: Any, fused: Any) -> Any:
        state = json.loads(fused.lr_scheduler_state())
        if name not in state:
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
        return state[name]

    def put(obj: Any, fused: Any, value: Any) -> None:
        state = json.loads(fused.lr_scheduler_state())
        state[name] = value
        fused.set_lr_scheduler_state(json.dumps(state))

    return _CoreField(get, put)


class LRScheduler:
    """Base class of learning-rate schedulers.

    Parameters
    ----------
    base_lr : float, optional
        The learning rate the schedule starts from after warm-up.
    warmup_steps : int, optional
        How many updates warm-up lasts before the schedule proper begins.
    warmup_begin_lr : float, optional
        The learning rate at the first warm-up step.
    warmup_mode : {'linear', 'constant'}, optional
        ``'linear'`` raises the rate in equal increments from ``warmup_begin_lr`` to
        ``base_lr``; ``'constant'`` holds it at ``warmup_begin_lr`` during warm-up.

    Attributes
    ----------
    warmup_final_lr : float
        The rate warm-up climbs towards: ``base_lr`` as given to the constructor.
    """

    def __init__(
        self,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        self.base_lr = base_lr
        assert isinstance(warmup_steps, int)
        self.warmup_steps = warmup_steps
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        if self.warmup_begin_lr > self.warmup_final_lr:
            raise MXNetValueError("Base lr has to be higher than warmup_begin_lr")
        if self.warmup_steps < 0:
            raise MXNetValueError("Warmup steps has to be positive or 0")
        if warmup_mode not in ("linear", "constant"):
            raise MXNetValueError("Supports only linear and constant modes of warmup")
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update: int) -> float:
        """The learning rate during warm-up, at update ``num_update < warmup_steps``."""
        assert num_update < self.warmup_steps
        if self.warmup_mode == "linear":
            step = (self.warmup_final_lr - self.warmup_begin_lr) * float(num_update)
            return self.warmup_begin_lr + step / float(self.warmup_steps)
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        raise MXNetValueError(f"Invalid warmup mode {self.warmup_mode}")

    def __call__(self, num_update: int) -> float:
        """The learning rate after ``num_update`` updates.

        Parameters
        ----------
        num_update : int
            The largest number of updates applied so far to any one weight.

        Returns
        -------
        float
            The learning rate to use.
        """
        raise NotImplementedError("must override this")

    # ------------------------------------------------------------ Rust description

    def _warmup_config(self) -> dict[str, Any]:
        return {
            "base_lr": float(self.base_lr),
            "warmup_steps": int(self.warmup_steps),
            "warmup_begin_lr": float(self.warmup_begin_lr),
            "warmup_final_lr": float(self.warmup_final_lr),
            "warmup_mode": self.warmup_mode,
        }

    def _config(self) -> dict[str, Any] | None:
        """The scheduler's type and state as a dict, or None where the core cannot
        reproduce it. Overridden by every built-in scheduler."""
        return None

    def _fused_config(self) -> str | None:
        """The scheduler as the JSON object the Rust ``FusedOptimizer`` parses.

        Returns
        -------
        str or None
            A JSON object: ``"type"`` (the class name), ``"base_lr"`` (its current
            value), the warm-up settings, and the schedule's own fields and current
            state (``count``, ``cur_step_ind``, ``base_lr_orig``); None for a scheduler
            the core cannot reproduce (any class other than the built-in ones,
            subclasses included).
        """
        if type(self) not in _BUILTIN:
            return None
        cfg = self._config()
        return None if cfg is None else json.dumps(cfg, sort_keys=True)


class _CoreSchedule(LRScheduler):
    """A built-in schedule, which the core can run: once bound to a core optimizer (by
    :meth:`_bind`), its rate and changing fields are the core's."""

    _fused: Any = None
    base_lr = _sched_field("base_lr")
    count = _sched_field("count")
    cur_step_ind = _sched_field("cur_step_ind")

    def _bind(self, fused: Any) -> None:
        """Hands the schedule's state over to ``fused``'s copy, which owns it from now on."""
        for name in ("base_lr", "count", "cur_step_ind"):
            self.__dict__.pop(name, None)
        self.__dict__["_fused"] = fused

    def __call__(self, num_update: int) -> float:
        fused = self._fused
        if fused is not None:
            rate = fused.scheduler_rate(num_update)
            self._log_core_steps()
            return rate
        return self._rate(num_update)

    def _log_core_steps(self) -> None:
        """Logs the steps the core's copy of the schedule made, as MXNet's scheduler logs
        each step as it makes it."""
        fused = self._fused
        if fused is None:
            return
        for num_update, lr, floored in fused.take_lr_changes():
            if floored:
                logging.info("Update[%d]: now learning rate arrived at %0.5e, will not change in the future", num_update, lr)
            else:
                logging.info("Update[%d]: Change learning rate to %0.5e", num_update, lr)

    def _rate(self, num_update: int) -> float:
        raise NotImplementedError("must override this")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        fused = state.pop("_fused", None)
        if fused is not None:
            core = json.loads(fused.lr_scheduler_state())
            for name in ("base_lr", "count", "cur_step_ind"):
                if name in core:
                    state[name] = core[name]
        return state


class FactorScheduler(_CoreSchedule):
    """Multiplies the learning rate by ``factor`` every ``step`` updates.

    After warm-up the rate is ``base_lr * factor ** floor((num_update - 1) / step)``,
    bounded below by ``stop_factor_lr``; the scheduler lowers ``base_lr`` in place as
    updates pass each step.

    Parameters
    ----------
    step : int
        Updates between two changes of the rate (at least 1).
    factor : float, optional
        The multiplier (at most 1).
    stop_factor_lr : float, optional
        The rate never goes below this value.
    base_lr, warmup_steps, warmup_begin_lr, warmup_mode
        As for :class:`LRScheduler`.
    """

    def __init__(
        self,
        step: int,
        factor: float = 1,
        stop_factor_lr: float = 1e-8,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise MXNetValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise MXNetValueError("Factor must be no more than 1 to make lr reduce")
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr
        self.count = 0

    def _rate(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        # A loop, not a test: a resumed run may jump several steps at once.
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
                logging.info(
                    "Update[%d]: now learning rate arrived at %0.5e, will not change in the future",
                    num_update,
                    self.base_lr,
                )
            else:
                logging.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
        return self.base_lr

    def _config(self) -> dict[str, Any]:
        cfg = self._warmup_config()
        cfg.update(
            type="FactorScheduler",
            step=int(self.step),
            factor=float(self.factor),
            stop_factor_lr=float(self.stop_factor_lr),
            count=int(self.count),
        )
        return cfg


class MultiFactorScheduler(_CoreSchedule):
    """Multiplies the learning rate by ``factor`` as updates pass each listed step.

    After warm-up, with ``k`` steps strictly below ``num_update``, the rate is
    ``base_lr * factor ** k``; the scheduler lowers ``base_lr`` in place.

    Parameters
    ----------
    step : list of int
        Strictly increasing update counts, each at least 1.
    factor : float, optional
        The multiplier (at most 1).
    base_lr, warmup_steps, warmup_begin_lr, warmup_mode
        As for :class:`LRScheduler`.
    """

    def __init__(
        self,
        step: list[int],
        factor: float = 1,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        assert isinstance(step, list) and len(step) >= 1
        for i, s in enumerate(step):
            if i > 0 and step[i] <= step[i - 1]:
                raise MXNetValueError("Schedule step must be an increasing integer list")
            if s < 1:
                raise MXNetValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise MXNetValueError("Factor must be no more than 1 to make lr reduce")
        self.step = step
        self.cur_step_ind = 0
        self.factor = factor
        self.count = 0

    def _rate(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind < len(self.step) and num_update > self.step[self.cur_step_ind]:
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
            logging.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
        return self.base_lr

    def _config(self) -> dict[str, Any]:
        cfg = self._warmup_config()
        cfg.update(
            type="MultiFactorScheduler",
            step=[int(s) for s in self.step],
            factor=float(self.factor),
            cur_step_ind=int(self.cur_step_ind),
            count=int(self.count),
        )
        return cfg


class _Decay(_CoreSchedule):
    """A decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates after
    warm-up; ``_decayed(span, done)`` is what is left of ``span`` after ``done`` of the
    ``max_steps`` decay steps."""

    def __init__(
        self,
        max_update: int,
        base_lr: float,
        final_lr: float,
        warmup_steps: int,
        warmup_begin_lr: float,
        warmup_mode: str,
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        assert isinstance(max_update, int)
        if max_update < 1:
            raise MXNetValueError("maximum number of updates must be strictly positive")
        self.base_lr_orig = self.base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def _decayed(self, span: float, done: int) -> float:
        raise NotImplementedError("must override this")

    def _rate(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            span = self.base_lr_orig - self.final_lr
            self.base_lr = self.final_lr + self._decayed(span, num_update - self.warmup_steps)
        return self.base_lr

    def _config(self) -> dict[str, Any]:
        cfg = self._warmup_config()
        cfg.update(
            type=type(self).__name__,
            max_update=int(self.max_update),
            base_lr_orig=float(self.base_lr_orig),
            final_lr=float(self.final_lr),
        )
        return cfg


class PolyScheduler(_Decay):
    """Polynomial decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates.

    After warm-up, while ``num_update <= max_update``, the rate is
    ``final_lr + (base_lr - final_lr) * (1 - (num_update - warmup_steps) / max_steps) ** pwr``
    with ``max_steps = max_update - warmup_steps``; later it stays at the last value.

    Parameters
    ----------
    max_update : int
        The update count at which the rate reaches ``final_lr`` (at least 1).
    base_lr : float, optional
        The rate decay starts from.
    pwr : int, optional
        The power of the polynomial.
    final_lr : float, optional
        The rate at and after ``max_update``.
    warmup_steps, warmup_begin_lr, warmup_mode
        As for :class:`LRScheduler`.
    """

    def __init__(
        self,
        max_update: int,
        base_lr: float = 0.01,
        pwr: float = 2,
        final_lr: float = 0,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.power = pwr

    def _decayed(self, span: float, done: int) -> float:
        return span * pow(1 - float(done) / float(self.max_steps), self.power)

    def _config(self) -> dict[str, Any]:
        cfg = super()._config()
        cfg["pwr"] = float(self.power)
        return cfg


class CosineScheduler(_Decay):
    """Cosine decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates.

    After warm-up, while ``num_update <= max_update``, the rate is
    ``final_lr + (base_lr - final_lr) * (1 + cos(pi * (num_update - warmup_steps) /
    max_steps)) / 2`` with ``max_steps = max_update - warmup_steps``; later it stays at
    the last value.

    Parameters
    ----------
    max_update : int
        The update count at which the rate reaches ``final_lr`` (at least 1).
    base_lr : float, optional
        The rate decay starts from.
    final_lr : float, optional
        The rate at and after ``max_update``.
    warmup_steps, warmup_begin_lr, warmup_mode
        As for :class:`LRScheduler`.
    """

    def __init__(
        self,
        max_update: int,
        base_lr: float = 0.01,
        final_lr: float = 0,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)

    def _decayed(self, span: float, done: int) -> float:
        return span * (1 + cos(pi * done / self.max_steps)) / 2


_BUILTIN = (FactorScheduler, MultiFactorScheduler, PolyScheduler, CosineScheduler)

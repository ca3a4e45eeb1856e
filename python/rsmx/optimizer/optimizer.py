"""The optimizer base class and the registry that maps names to optimizer classes.

An optimizer turns a gradient into an in-place change of a weight. It keeps the global
learning rate (or a schedule), weight decay, gradient rescaling and clipping, the
per-parameter multipliers of both rates, and the update counts that drive schedules and
bias corrections, all with MXNet 1.x's names and rules.

Who owns those rules and that state: a built-in optimizer with a built-in schedule (or
none) that a KVStore runs is bound to the core's ``FusedOptimizer`` (see
:meth:`Optimizer._core_optimizer`), which from then on owns the counts, the learning rate,
the schedule and the gradient scale; the Python attributes read and write it, and
counting and rate look-ups made from Python go to it. Any other optimizer (a user
subclass, a custom schedule, or one not yet bound) counts and looks up rates here.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np

from .. import _core
from ..base import MXNetNotImplementedError, MXNetValueError
from ..lr_scheduler import LRScheduler, _CoreField
from ..ndarray import NDArray, cast

__all__ = ["Optimizer", "register", "create"]


def _nd(name: str) -> Any:
    """The ``mx.nd`` operator ``name``, looked up when first used (so the package imports
    with a core that lacks some update operators)."""
    from .. import ndarray

    f = getattr(ndarray.op, name, None)
    if f is None:
        raise MXNetNotImplementedError(f"operator '{name}' is not available in this rsmx build")
    return f


def _set_num_update(obj: Any, fused: Any, value: int) -> None:
    fused.set_counts(fused.get_counts(), int(value))


def _current_counts(obj: Any, fused: Any) -> dict[Any, int]:
    return fused.get_counts().get(obj.__dict__.get("_device_id", 0), {})


def _set_current_counts(obj: Any, fused: Any, value: dict[Any, int]) -> None:
    counts = fused.get_counts()
    counts[obj.__dict__.get("_device_id", 0)] = dict(value)
    fused.set_counts(counts, fused.num_update)


# What a bound optimizer keeps in the core (the rest is settings, sent on change).
_CORE_STATE = ("num_update", "_all_index_update_counts", "_index_update_count", "lr", "rescale_grad")


class Optimizer:
    """Base class of every optimizer.

    Parameters
    ----------
    rescale_grad : float, optional
        Gradients are multiplied by this before use (often ``1 / batch_size``).
    param_idx2name : dict of int to str, optional
        Parameter names by index. When given, parameters whose names end neither in
        ``_weight`` nor ``_gamma`` get a weight-decay multiplier of 0.
    wd : float, optional
        Weight decay (L2 regularisation) coefficient.
    clip_gradient : float, optional
        Rescaled gradients are clipped to ``[-clip_gradient, clip_gradient]``.
    learning_rate : float, optional
        The learning rate. Overrides the scheduler's ``base_lr`` when both are given;
        0.01 when neither is.
    lr_scheduler : LRScheduler, optional
        A schedule of the learning rate over updates.
    sym : Symbol, optional
        A symbol whose arguments' ``__lr_mult__`` and ``__wd_mult__`` attributes set
        per-parameter multipliers.
    begin_num_update : int, optional
        The update count to start from.
    multi_precision : bool, optional
        Keep a float32 master copy of float16 weights and update that.
    param_dict : dict of int to Parameter, optional
        Parameters by index whose ``lr_mult`` and ``wd_mult`` take precedence.

    Attributes
    ----------
    num_update : int
        The largest number of updates applied to any one weight (on the current device).
    learning_rate : float
        The current learning rate (the scheduler's value when there is one).
    """

    opt_registry: dict[str, type] = {}

    # The core's optimizer owning this one's counts, rate and schedule, once bound.
    _fused: Any = None
    num_update = _CoreField(lambda o, f: f.num_update, _set_num_update)
    _all_index_update_counts = _CoreField(
        lambda o, f: f.get_counts(), lambda o, f, v: f.set_counts(dict(v))
    )
    _index_update_count = _CoreField(_current_counts, _set_current_counts)
    lr = _CoreField(lambda o, f: f.lr, lambda o, f, v: f.set_lr(float(v)))
    rescale_grad = _CoreField(lambda o, f: f.rescale_grad, lambda o, f, v: f.set_rescale_grad(float(v)))

    def __init__(
        self,
        rescale_grad: float = 1.0,
        param_idx2name: dict[int, str] | None = None,
        wd: float = 0.0,
        clip_gradient: float | None = None,
        learning_rate: float | None = None,
        lr_scheduler: LRScheduler | None = None,
        sym: Any = None,
        begin_num_update: int = 0,
        multi_precision: bool = False,
        param_dict: dict[int, Any] | None = None,
    ) -> None:
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is None and learning_rate is None:
            learning_rate = 0.01
        self.lr = learning_rate
        if lr_scheduler is not None and learning_rate is not None:
            if lr_scheduler.base_lr != learning_rate:
                print(
                    UserWarning(
                        "learning rate from ``lr_scheduler`` has been overwritten by "
                        "``learning_rate`` in optimizer."
                    )
                )
                lr_scheduler.base_lr = learning_rate
        self.wd = wd
        self.lr_mult: dict[Any, float] = {}
        self.wd_mult: dict[Any, float] = {}
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts: dict[int, dict[Any, int]] = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.aggregate_num = 0
        if param_idx2name is None:
            param_idx2name = {}
        assert isinstance(param_idx2name, dict), (
            "param_idx2name should be a dict of param indexes to names."
        )
        self.idx2name = param_idx2name.copy()
        self.sym_info: tuple = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        self.param_dict = param_dict if param_dict else {}
        self.allow_np_array = False
        self.set_lr_mult({})
        self.set_wd_mult({})

    # ------------------------------------------------------------------ registry

    @staticmethod
    def register(klass: type) -> type:
        """Registers an optimizer class under its lower-cased class name.

        Usable as a class decorator; a later class of the same name replaces the earlier
        one with a warning.

        Parameters
        ----------
        klass : type
            A subclass of :class:`Optimizer`.

        Returns
        -------
        type
            ``klass`` itself.
        """
        assert isinstance(klass, type)
        name = klass.__name__.lower()
        old = Optimizer.opt_registry.get(name)
        if old is not None:
            warnings.warn(
                f"WARNING: New optimizer {klass.__module__}.{klass.__name__} is overriding "
                f"existing optimizer {old.__module__}.{old.__name__}",
                stacklevel=2,
            )
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name: str, **kwargs: Any) -> Optimizer:
        """Makes an optimizer of a registered class, by case-insensitive name.

        Parameters
        ----------
        name : str
            The registered name (``'sgd'``, ``'Adam'``, ...).
        **kwargs
            Constructor arguments.

        Returns
        -------
        Optimizer
            The new optimizer.

        Raises
        ------
        MXNetValueError
            If no optimizer is registered under ``name``.
        """
        klass = Optimizer.opt_registry.get(name.lower())
        if klass is None:
            raise MXNetValueError(f"Cannot find optimizer {name}")
        return klass(**kwargs)

    # ------------------------------------------------------------- learning rate

    @property
    def learning_rate(self) -> float:
        """The current learning rate."""
        if self._fused is not None:
            return self._fused.learning_rate
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr: float) -> None:
        """Sets the learning rate; not allowed when a scheduler sets it.

        Raises
        ------
        UserWarning
            If the optimizer has a scheduler.
        """
        if self.lr_scheduler is not None:
            raise UserWarning(
                "LRScheduler of the optimizer has already been defined. Note that "
                "set_learning_rate can mutate the value of the learning rate of the optimizer "
                "only when the LRScheduler of the optimizer is undefined."
            )
        self.lr = lr

    def set_lr_scale(self, args_lrscale: Any) -> None:
        """Deprecated; use :meth:`set_lr_mult`."""
        raise DeprecationWarning

    def set_lr_mult(self, args_lr_mult: dict[Any, float]) -> None:
        """Sets per-parameter learning-rate multipliers.

        The symbol's ``__lr_mult__`` attributes (when ``sym`` was given) come first, then
        the entries of ``args_lr_mult``, keyed by parameter name or index.

        Parameters
        ----------
        args_lr_mult : dict of str or int to float
            Multipliers by parameter name or index.
        """
        self.lr_mult = {}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__lr_mult__" in attr[name]:
                    self.lr_mult[name] = float(attr[name]["__lr_mult__"])
        self.lr_mult.update(args_lr_mult)
        self._reconfigure()

    def set_wd_mult(self, args_wd_mult: dict[Any, float]) -> None:
        """Sets per-parameter weight-decay multipliers.

        Parameters named in ``param_idx2name`` whose names end neither in ``_weight`` nor
        ``_gamma`` get 0; then the symbol's ``__wd_mult__`` attributes apply, then the
        entries of ``args_wd_mult``, keyed by parameter name or index.

        Parameters
        ----------
        args_wd_mult : dict of str or int to float
            Multipliers by parameter name or index.
        """
        self.wd_mult = {}
        for n in self.idx2name.values():
            if not (n.endswith("_weight") or n.endswith("_gamma")):
                self.wd_mult[n] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)
        self._reconfigure()

    def _set_current_context(self, device_id: int) -> None:
        """Switches to the update counts of device ``device_id``."""
        self.__dict__["_device_id"] = device_id
        if self._fused is not None:
            return
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]

    def _update_count(self, index: Any) -> None:
        """Counts one more update of ``index`` (an index or a list of them)."""
        if not isinstance(index, (list, tuple)):
            index = [index]
        fused = self._fused
        if fused is not None:
            for idx in index:
                fused.count_update(idx, self.__dict__.get("_device_id", 0))
            return
        for idx in index:
            if idx not in self._index_update_count:
                self._index_update_count[idx] = self.begin_num_update
            self._index_update_count[idx] += 1
            self.num_update = max(self._index_update_count[idx], self.num_update)

    def _mult(self, index: Any, attr: str, table: dict[Any, float]) -> float:
        if index in self.param_dict:
            return getattr(self.param_dict[index], attr)
        if index in table:
            return table[index]
        if index in self.idx2name:
            return table.get(self.idx2name[index], 1.0)
        return 1.0

    def _get_lrs(self, indices: list[Any]) -> list[float]:
        """The learning rates of the parameters ``indices``, multipliers applied."""
        if self._fused is not None:
            return self._fused.lrs(list(indices))
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        return [lr * self._mult(i, "lr_mult", self.lr_mult) for i in indices]

    def _get_lr(self, index: Any) -> float:
        """The learning rate of parameter ``index``, multipliers applied."""
        return self._get_lrs([index])[0]

    def _get_wds(self, indices: list[Any]) -> list[float]:
        """The weight decays of the parameters ``indices``, multipliers applied."""
        if self._fused is not None:
            return self._fused.wds(list(indices))
        return [self.wd * self._mult(i, "wd_mult", self.wd_mult) for i in indices]

    def _get_wd(self, index: Any) -> float:
        """The weight decay of parameter ``index``, multipliers applied."""
        return self._get_wds([index])[0]

    # ------------------------------------------------------------------- updates

    def create_state(self, index: Any, weight: NDArray) -> Any:
        """Makes the auxiliary state (such as momentum) of one weight.

        Parameters
        ----------
        index : int or str
            The weight's key.
        weight : NDArray
            The weight.

        Returns
        -------
        Any
            The state: None, an NDArray or a tuple of them.
        """
        return None

    def create_state_multi_precision(self, index: Any, weight: NDArray) -> Any:
        """Makes the state of one weight, plus a float32 master copy of a float16 weight
        when ``multi_precision`` is set: ``(master_copy, state)``."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (master, self.create_state(index, master))
        self._warn_fp16(weight)
        return self.create_state(index, weight)

    def _warn_fp16(self, weight: NDArray, who: str = "") -> None:
        if weight.dtype == np.float16 and not self.multi_precision:
            warnings.warn(
                "Accumulating with float16 in optimizer can lead to poor accuracy or slow "
                "convergence. Consider using multi_precision=True option of the "
                + (f"{who} optimizer" if who else "optimizer"),
                stacklevel=3,
            )

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """Updates ``weight`` in place from ``grad`` and ``state``.

        Parameters
        ----------
        index : int or str
            The weight's key (selects its multipliers and update count).
        weight : NDArray
            The weight, changed in place.
        grad : NDArray
            Its gradient.
        state : Any
            What :meth:`create_state` made for it.
        """
        raise NotImplementedError()

    def update_multi_precision(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """:meth:`update`, through the float32 master copy when ``multi_precision`` is
        set and the weight is float16."""
        if self.multi_precision and weight.dtype == np.float16:
            master, inner = state
            self.update(index, master, grad.astype(np.float32), inner)
            cast(master, dtype=weight.dtype, out=weight)
        else:
            self.update(index, weight, grad, state)

    # --------------------------------------------------------- Rust description

    # The core's name for the optimizer, set by each built-in class in its own body (a
    # subclass does not inherit it: the core cannot know what a subclass changes).
    _FUSED_NAME: str | None = None

    def _fused_hyperparams(self) -> dict[str, Any] | None:
        """The optimizer's own hyperparameters for the core, or None where it has no
        fused counterpart. Overridden by the built-in optimizers."""
        return None

    def _fused_config(self) -> tuple[str, dict[str, str]] | None:
        """The optimizer as the Rust ``FusedOptimizer`` takes it.

        Returns
        -------
        tuple of (str, dict of str to str) or None
            The core's (lower-case) optimizer name and its settings, each value a string:
            numbers as Python writes them, booleans as ``"True"``/``"False"``, ``"None"``
            for unset values, the scheduler as its JSON description, ``lr_mult``,
            ``wd_mult`` and ``idx2name`` as JSON lists of ``[key, value]`` pairs (keys
            being int indices or str names). Multipliers of ``param_dict`` entries are
            folded in under their int index. None when the optimizer's class or its
            scheduler's is not one the core reproduces (a user subclass included); the
            KVStore then runs the Python updater.
        """
        name = type(self).__dict__.get("_FUSED_NAME")
        if name is None:
            return None
        own = self._fused_hyperparams()
        if own is None:
            return None
        cfg: dict[str, str] = {"lr_scheduler": "None"}
        if self.lr_scheduler is not None:
            sched = self.lr_scheduler._fused_config()
            if sched is None:
                return None
            cfg["lr_scheduler"] = sched
        lr_mult = dict(self.lr_mult)
        wd_mult = dict(self.wd_mult)
        for idx, param in self.param_dict.items():
            lr_mult[idx] = param.lr_mult
            wd_mult[idx] = param.wd_mult
        cfg["learning_rate"] = _fmt(self.lr)
        cfg["wd"] = _fmt(self.wd)
        cfg["rescale_grad"] = _fmt(self.rescale_grad)
        cfg["clip_gradient"] = _fmt(self._fused_clip())
        cfg["multi_precision"] = _fmt(bool(self.multi_precision))
        cfg["begin_num_update"] = _fmt(int(self.begin_num_update))
        cfg["num_update"] = _fmt(int(self.num_update))
        cfg["lr_mult"] = _pairs_json(lr_mult)
        cfg["wd_mult"] = _pairs_json(wd_mult)
        cfg["idx2name"] = _pairs_json(self.idx2name)
        for k, v in own.items():
            cfg[k] = _fmt(v)
        return (name, cfg)

    def _core_optimizer(self) -> Any:
        """The core's ``FusedOptimizer`` that owns this optimizer's rules and state, made
        and bound on the first call; None when the core cannot reproduce the optimizer
        (see :meth:`_fused_config`).

        Binding hands the update counts, learning rate, gradient scale and schedule state
        over to the core object, which owns them from then on: this object's attributes
        and its scheduler read and write the core's values, and later changes of the
        settings (``wd``, ``set_lr_mult``, ...) are sent to it.
        """
        fused = self._fused
        if fused is not None:
            return fused
        config = self._fused_config()
        if config is None:
            return None
        fused = _core.FusedOptimizer(*config)
        fused.set_counts(self._all_index_update_counts, self.num_update)
        for name in _CORE_STATE:
            self.__dict__.pop(name, None)
        self.__dict__["_fused"] = fused
        if self.lr_scheduler is not None:
            self.lr_scheduler._bind(fused)
        return fused

    def _reconfigure(self) -> None:
        """Sends the settings to the bound core optimizer, if any."""
        fused = self.__dict__.get("_fused")
        if fused is not None:
            config = self._fused_config()
            if config is None:
                raise MXNetValueError(
                    "this optimizer runs in the core, which cannot reproduce its new settings"
                )
            fused.reconfigure(config[1])

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "lr_scheduler" and self.__dict__.get("_fused") is not None:
            raise MXNetValueError(
                "cannot replace the lr_scheduler of an optimizer a KVStore runs in the core; "
                "create a new optimizer and call set_optimizer again"
            )
        object.__setattr__(self, name, value)
        if not name.startswith("_") and name not in _CORE_STATE:
            self._reconfigure()

    def _fused_clip(self) -> float:
        """Gradient clipping as the fused operators take it: off (-1) unless set to a
        non-zero value, as the operator-based updates test it."""
        return self.clip_gradient if self.clip_gradient else -1.0

    # ------------------------------------------------------------------ pickling

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["param_dict"]
        if state.pop("_fused", None) is not None:
            # A snapshot of what the core owns, for an unbound copy.
            for name in ("num_update", "lr", "rescale_grad"):
                state[name] = getattr(self, name)
            counts = self._all_index_update_counts
            state["_all_index_update_counts"] = counts
            state["_index_update_count"] = counts.setdefault(state.get("_device_id", 0), {})
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__ = state
        self.param_dict = {}


def _fmt(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (np.floating, np.integer)):
        v = v.item()
    return str(v)


def _pairs_json(table: dict[Any, Any]) -> str:
    """A dict as a JSON list of ``[key, value]`` pairs, int keys kept as ints."""
    pairs = []
    for k, v in table.items():
        key = int(k) if isinstance(k, (int, np.integer)) else str(k)
        pairs.append([key, float(v) if isinstance(v, (int, float, np.number)) else v])
    return json.dumps(pairs)


register = Optimizer.register
create = Optimizer.create_optimizer


def __getattr__(name: str) -> Any:
    # ``mx.optimizer.optimizer.SGD`` and friends, as MXNet's module of that name has them.
    from .. import optimizer as package

    if name in package.__all__:
        return getattr(package, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

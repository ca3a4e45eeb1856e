"""``mx.initializer`` (also ``mx.init``): how parameters get their first values.

An initializer is called with a parameter's description (an ``InitDesc``: its name, its
attributes and the global initializer) and the NDArray to fill, and picks a rule from the
name's suffix: ``weight`` gets the initializer's own rule, ``bias`` and ``beta`` zeros,
``gamma`` ones, and so on; an ``__init__`` attribute (a JSON initializer config) on the
parameter overrides the name. Random rules draw through ``mx.random`` into the array, so
values follow ``mx.random.seed``.
"""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections.abc import Callable
from math import sqrt
from typing import Any

import numpy as np

from . import ndarray
from . import random as _random
from . import registry as _registry
from .base import MXNetNotImplementedError, MXNetTypeError, MXNetValueError
from .ndarray import NDArray

__all__ = [
    "InitDesc",
    "Initializer",
    "register",
    "alias",
    "create",
    "Load",
    "Mixed",
    "Zero",
    "One",
    "Constant",
    "Uniform",
    "Normal",
    "Orthogonal",
    "Xavier",
    "MSRAPrelu",
    "Bilinear",
    "LSTMBias",
    "FusedRNN",
]


class InitDesc(str):
    """A parameter's name, carrying its attributes and the global initializer.

    Parameters
    ----------
    name : str
        The parameter's name.
    attrs : dict of str to str, optional
        The parameter's symbol attributes; ``'__init__'`` names an initializer for it.
    global_init : Initializer, optional
        The initializer in charge of the whole model.
    """

    def __new__(cls, name: str, attrs: dict | None = None, global_init: Any = None) -> InitDesc:
        ret = super().__new__(cls, name)
        ret.attrs = attrs or {}
        ret.global_init = global_init
        return ret


# Rules for names without an '__init__' attribute, checked in order: (suffix, method).
_DESC_RULES = (
    ("weight", "_init_weight"),
    ("bias", "_init_bias"),
    ("gamma", "_init_gamma"),
    ("beta", "_init_beta"),
    ("min", "_init_zero"),
    ("max", "_init_one"),
    ("weight_quantize", "_init_quantized_weight"),
    ("bias_quantize", "_init_quantized_bias"),
    # Running statistics of normalisation layers. MXNet's symbols carry an '__init__'
    # attribute for these; the rules below give the same values when it is absent.
    ("moving_mean", "_init_zero"),
    ("moving_var", "_init_one"),
    ("moving_inv_var", "_init_zero"),
    ("moving_avg", "_init_zero"),
)

_LEGACY_RULES = (
    ("bias", "_init_bias"),
    ("gamma", "_init_gamma"),
    ("beta", "_init_beta"),
    ("weight", "_init_weight"),
    ("moving_mean", "_init_zero"),
    ("moving_var", "_init_one"),
    ("moving_inv_var", "_init_zero"),
    ("moving_avg", "_init_zero"),
    ("min", "_init_zero"),
    ("max", "_init_one"),
)


def _bilinear_kernel(shape: tuple) -> np.ndarray:
    """Bilinear upsampling weights for a ``(..., H, W)`` kernel, as float32."""
    if len(shape) < 4:
        raise MXNetValueError(f"bilinear initialization needs a 4-d weight, got shape {shape}")
    f = np.ceil(shape[3] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    wx = 1 - np.abs(np.arange(shape[3]) / f - c)
    wy = 1 - np.abs(np.arange(shape[2]) / f - c)
    return np.broadcast_to((wy[:, None] * wx[None, :]).astype(np.float32), shape)


class Initializer:
    """The base of all initializers.

    Subclasses implement ``_init_weight(name, arr)``; the other rules (zeros for biases,
    ones for ``gamma``, ...) are shared. ``**kwargs`` are the constructor arguments,
    kept for ``dumps``.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._verbose = False
        self._print_func: Callable[[NDArray], str] | None = None

    def set_verbosity(self, verbose: bool = False, print_func: Callable[[NDArray], str] | None = None) -> Initializer:
        """Whether to log each initialized parameter, with ``print_func(arr)`` (by default
        the root mean square of its values).

        Returns
        -------
        Initializer
            This initializer.
        """
        self._verbose = verbose
        if print_func is None:

            def rms(x: NDArray) -> str:
                return str((ndarray.norm(x) / sqrt(x.size)).asscalar())

            print_func = rms
        self._print_func = print_func
        return self

    def _verbose_print(self, desc: str, init: str, arr: NDArray) -> None:
        if self._verbose and self._print_func:
            logging.info("Initialized %s as %s: %s", desc, init, self._print_func(arr))

    def dumps(self) -> str:
        """The initializer as a JSON string ``'["name", {kwargs}]'`` that ``create`` reads."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, desc: Any, arr: NDArray) -> None:
        """Fills ``arr`` with the initial values of the parameter ``desc``.

        Parameters
        ----------
        desc : InitDesc or str
            The parameter. A plain string uses the older, name-only rules (deprecated).
        arr : NDArray
            The array to fill in place.
        """
        if not isinstance(desc, InitDesc):
            self._legacy_init(desc, arr)
            return
        if desc.global_init is None:
            desc.global_init = self
        init = desc.attrs.get("__init__", "")
        if init:
            create(init)._init_weight(desc, arr)
            self._verbose_print(desc, init, arr)
            return
        for suffix, method in _DESC_RULES:
            if desc.endswith(suffix):
                getattr(self, method)(desc, arr)
                self._verbose_print(desc, suffix, arr)
                return
        self._init_default(desc, arr)

    def _legacy_init(self, name: Any, arr: Any) -> None:
        warnings.warn(
            "Calling an initializer with (str, NDArray) is deprecated; call it with "
            "(mx.init.InitDesc(...), NDArray)",
            DeprecationWarning,
            stacklevel=3,
        )
        if not isinstance(name, str):
            raise MXNetTypeError(f"the parameter name must be a str, got {type(name).__name__}")
        if not isinstance(arr, NDArray):
            raise MXNetTypeError(f"the array to initialize must be an NDArray, got {type(arr).__name__}")
        if name.startswith("upsampling"):
            self._init_bilinear(name, arr)
        elif name.startswith("stn_loc") and name.endswith("weight"):
            self._init_zero(name, arr)
        elif name.startswith("stn_loc") and name.endswith("bias"):
            self._init_loc_bias(name, arr)
        else:
            for suffix, method in _LEGACY_RULES:
                if name.endswith(suffix):
                    getattr(self, method)(name, arr)
                    return
            self._init_default(name, arr)

    def _init_bilinear(self, _: str, arr: NDArray) -> None:
        arr[:] = _bilinear_kernel(arr.shape)

    def _init_loc_bias(self, name: str, arr: NDArray) -> None:
        if arr.shape[0] != 6:
            raise MXNetValueError(f"{name}: a spatial transformer's location bias needs 6 values, got shape {arr.shape}")
        arr[:] = np.array([1.0, 0, 0, 0, 1.0, 0])

    def _init_zero(self, _: str, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_one(self, _: str, arr: NDArray) -> None:
        arr[:] = 1.0

    def _init_bias(self, _: str, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_quantized_bias(self, _: str, arr: NDArray) -> None:
        arr[:] = 0

    def _init_gamma(self, _: str, arr: NDArray) -> None:
        arr[:] = 1.0

    def _init_beta(self, _: str, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_weight(self, name: str, arr: NDArray) -> None:
        """The rule for weights; subclasses define it."""
        raise MXNetNotImplementedError(f"{type(self).__name__} does not define how to initialize weights ({name})")

    def _init_quantized_weight(self, _: str, arr: NDArray) -> None:
        value = _random.randint(-127, 127, shape=(1,), dtype="int32").asnumpy()
        arr[:] = np.int8(value)

    def _init_default(self, name: str, _: NDArray) -> None:
        raise MXNetValueError(
            f"Unknown initialization pattern for {name}. Default initialization is limited to "
            f'"weight", "bias", "gamma" (1.0) and "beta" (0.0); use '
            f"mx.sym.Variable(init=mx.init.*) to choose an initializer for this parameter"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self._kwargs == other._kwargs

    __hash__ = None  # type: ignore[assignment]


_register = _registry.get_register_func(Initializer, "initializer")
alias = _registry.get_alias_func(Initializer, "initializer")
create = _registry.get_create_func(Initializer, "initializer")


def register(klass: type) -> type:
    """Registers an ``Initializer`` subclass under its lower-cased class name, so that
    ``create`` and ``__init__`` attributes can name it.

    Returns
    -------
    type
        ``klass``, so this can be used as a class decorator.
    """
    return _register(klass)


def _fill_random(kind: str, a: float, b: float, arr: NDArray) -> None:
    """Draws into ``arr`` in place with ``mx.random`` (its dtype and device)."""
    sampler = _random.uniform if kind == "uniform" else _random.normal
    sampler(a, b, arr.shape, dtype=arr.dtype, ctx=arr.context, out=arr)


class Load:
    """Initializes parameters from saved arrays, with a fallback initializer for the rest.

    Parameters
    ----------
    param : str or dict of str to NDArray
        A ``.params`` file or its dict; ``arg:``/``aux:`` name prefixes are dropped.
    default_init : Initializer, optional
        For parameters not in ``param``.
    verbose : bool, optional
        Whether to log each parameter's source.
    """

    def __init__(self, param: str | dict, default_init: Any = None, verbose: bool = False) -> None:
        if isinstance(param, str):
            param = ndarray.load(param)
        if not isinstance(param, dict):
            raise MXNetTypeError(f"Load needs a dict of arrays (or a file of one), got {type(param).__name__}")
        self.param: dict[str, NDArray] = {}
        for name, arr in param.items():
            key = name[4:] if name.startswith("arg:") or name.startswith("aux:") else name
            self.param[key] = arr
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name: str, arr: NDArray) -> None:
        if name in self.param:
            src = self.param[name]
            if arr.shape != src.shape:
                raise MXNetValueError(
                    f"Parameter {name} cannot be initialized from loading. Shape mismatch, "
                    f"target {arr.shape} vs loaded {src.shape}"
                )
            arr[:] = src
            if self.verbose:
                logging.info("Initialized %s by loading", name)
            return
        if self.default_init is None:
            raise MXNetValueError(
                f"Cannot initialize {name}: it is not in the loaded parameters and no default "
                f"initializer was given"
            )
        self.default_init(name, arr)
        if self.verbose:
            logging.info("Initialized %s by default", name)


class Mixed:
    """Picks an initializer by the first regular expression that matches the name.

    Parameters
    ----------
    patterns : list of str
        Regular expressions, tried in order with ``re.match``.
    initializers : list of Initializer
        One per pattern.
    """

    def __init__(self, patterns: list[str], initializers: list) -> None:
        if len(patterns) != len(initializers):
            raise MXNetValueError(
                f"Mixed: {len(patterns)} patterns but {len(initializers)} initializers"
            )
        self.map = list(zip([re.compile(p) for p in patterns], initializers, strict=True))

    def __call__(self, name: str, arr: NDArray) -> None:
        for prog, init in self.map:
            if prog.match(name):
                init(name, arr)
                return
        raise MXNetValueError(
            f'Parameter name {name} did not match any pattern. Consider adding a ".*" pattern '
            f"at the end with a default initializer."
        )


@register
@alias("zeros")
class Zero(Initializer):
    """Weights are 0."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: str, arr: NDArray) -> None:
        arr[:] = 0


@register
@alias("ones")
class One(Initializer):
    """Weights are 1."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: str, arr: NDArray) -> None:
        arr[:] = 1


@register
class Constant(Initializer):
    """Weights are a given value.

    Parameters
    ----------
    value : float, numpy.ndarray or NDArray
        The value, broadcast to the weight's shape.
    """

    def __init__(self, value: Any) -> None:
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _: str, arr: NDArray) -> None:
        arr[:] = self.value

    def dumps(self) -> str:
        val = self._kwargs["value"]
        if not np.isscalar(val):
            self._kwargs["value"] = val.tolist() if isinstance(val, np.ndarray) else val.asnumpy().tolist()
        return json.dumps([type(self).__name__.lower(), self._kwargs])


@register
class Uniform(Initializer):
    """Weights drawn uniformly from ``[-scale, scale)``.

    Parameters
    ----------
    scale : float, optional
        The bound.
    """

    def __init__(self, scale: float = 0.07) -> None:
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _: str, arr: NDArray) -> None:
        _fill_random("uniform", -self.scale, self.scale, arr)


@register
class Normal(Initializer):
    """Weights drawn from a normal distribution with mean 0.

    Parameters
    ----------
    sigma : float, optional
        The standard deviation.
    """

    def __init__(self, sigma: float = 0.01) -> None:
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _: str, arr: NDArray) -> None:
        _fill_random("normal", 0, self.sigma, arr)


@register
class Orthogonal(Initializer):
    """Weights whose rows (or columns) are orthonormal, times ``scale``: the singular
    vectors of a random ``(shape[0], prod(shape[1:]))`` matrix.

    Parameters
    ----------
    scale : float, optional
        The factor.
    rand_type : {'uniform', 'normal'}, optional
        The distribution of the random matrix.
    """

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform") -> None:
        super().__init__(scale=scale, rand_type=rand_type)
        if rand_type not in ("uniform", "normal"):
            raise MXNetValueError(f"Orthogonal: rand_type must be 'uniform' or 'normal', got {rand_type!r}")
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _: str, arr: NDArray) -> None:
        nout = arr.shape[0]
        nin = int(np.prod(arr.shape[1:]))
        if self.rand_type == "uniform":
            tmp = _random.uniform(-1.0, 1.0, shape=(nout, nin)).asnumpy()
        else:
            tmp = _random.normal(0.0, 1.0, shape=(nout, nin)).asnumpy()
        u, _s, v = np.linalg.svd(tmp, full_matrices=False)
        res = u if u.shape == tmp.shape else v
        arr[:] = self.scale * res.reshape(arr.shape)


@register
class Xavier(Initializer):
    """Weights with a variance scaled by the number of inputs and outputs (Glorot and
    Bengio): ``scale = sqrt(magnitude / factor)``, ``factor`` being the fan-in, the fan-out
    or their mean (fans count the kernel's spatial size).

    Parameters
    ----------
    rnd_type : {'uniform', 'gaussian'}, optional
        Uniform on ``[-scale, scale)`` or normal with deviation ``scale``.
    factor_type : {'avg', 'in', 'out'}, optional
        Which fan sets the factor.
    magnitude : float, optional
        The numerator of the variance.
    """

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3) -> None:
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name: str, arr: NDArray) -> None:
        shape = arr.shape
        if len(shape) < 2:
            raise MXNetValueError(
                f"Xavier initializer cannot be applied to vector {name}. It requires at least 2D."
            )
        hw_scale = np.prod(shape[2:]) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factors = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}
        if self.factor_type not in factors:
            raise MXNetValueError(f"Incorrect factor type {self.factor_type!r}; use 'avg', 'in' or 'out'")
        scale = float(np.sqrt(self.magnitude / factors[self.factor_type]))
        if self.rnd_type == "uniform":
            _fill_random("uniform", -scale, scale, arr)
        elif self.rnd_type == "gaussian":
            _fill_random("normal", 0, scale, arr)
        else:
            raise MXNetValueError(f"Unknown random type {self.rnd_type!r}; use 'uniform' or 'gaussian'")


@register
class MSRAPrelu(Xavier):
    """He et al.'s initialization for PReLU networks: Gaussian Xavier with magnitude
    ``2 / (1 + slope**2)``.

    Parameters
    ----------
    factor_type : {'avg', 'in', 'out'}, optional
        As for ``Xavier``.
    slope : float, optional
        The negative slope of the activations.
    """

    def __init__(self, factor_type: str = "avg", slope: float = 0.25) -> None:
        magnitude = 2.0 / (1 + slope**2)
        super().__init__("gaussian", factor_type, magnitude)
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Weights of a bilinear upsampling kernel, for ``Deconvolution`` layers."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: str, arr: NDArray) -> None:
        arr[:] = _bilinear_kernel(arr.shape)


@register
class LSTMBias(Initializer):
    """LSTM biases: 0 except the forget gate's (the second quarter), which is
    ``forget_bias``.

    Parameters
    ----------
    forget_bias : float, optional
        The forget gate's bias.
    """

    def __init__(self, forget_bias: float = 1.0) -> None:
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name: str, arr: NDArray) -> None:
        arr[:] = 0.0
        num_hidden = int(arr.shape[0] / 4)
        arr[num_hidden : 2 * num_hidden] = self.forget_bias


@register
class FusedRNN(Initializer):
    """The flat parameter vector of a ``FusedRNNCell``: each weight and bias in it is
    initialized on its own, as the unfused cells' would be.

    Parameters
    ----------
    init : Initializer or str, optional
        For the unpacked pieces (a JSON config string is accepted); the global
        initializer when None.
    num_hidden, num_layers, mode, bidirectional : as given to the ``FusedRNNCell``
    forget_bias : float, optional
        The value of LSTM forget gate biases.
    """

    def __init__(
        self,
        init: Any,
        num_hidden: int,
        num_layers: int,
        mode: str,
        bidirectional: bool = False,
        forget_bias: float = 1.0,
    ) -> None:
        if isinstance(init, str):
            init = create(init)
        super().__init__(
            init=init.dumps() if init is not None else None,
            num_hidden=num_hidden,
            num_layers=num_layers,
            mode=mode,
            bidirectional=bidirectional,
            forget_bias=forget_bias,
        )
        self._init = init
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._forget_bias = forget_bias

    def _init_weight(self, desc: Any, arr: NDArray) -> None:
        from .rnn.rnn_cell import FusedRNNCell

        cell = FusedRNNCell(
            self._num_hidden,
            self._num_layers,
            self._mode,
            self._bidirectional,
            forget_bias=self._forget_bias,
            prefix="",
        )
        global_init = getattr(desc, "global_init", None)
        pieces = cell.unpack_weights({"parameters": arr})
        for name, piece in pieces.items():
            if self._mode == "lstm" and name.endswith("_f_bias"):
                piece[:] = self._forget_bias
            elif self._init is not None:
                self._init(InitDesc(name, global_init=global_init), piece)
            elif global_init is not None:
                global_init(InitDesc(name, global_init=global_init), piece)
            else:
                raise MXNetValueError(f"FusedRNN: no initializer for {name}; give one or a global initializer")
        arr[:] = cell.pack_weights(pieces)["parameters"]

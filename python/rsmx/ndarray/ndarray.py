"""The NDArray class (a subclass of the core's NDArrayBase with MXNet's Python methods)
and the functions that create arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from ..base import MXNetTypeError, MXNetValueError, integer_types, numeric_types
from ..context import Context, current_context

__all__ = [
    "NDArray",
    "array",
    "empty",
    "zeros",
    "ones",
    "full",
    "arange",
    "eye",
    "waitall",
    "concatenate",
    "moveaxis",
    "onehot_encode",
    "add",
    "subtract",
    "multiply",
    "divide",
    "modulo",
    "power",
    "maximum",
    "hypot",
    "minimum",
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "lesser",
    "lesser_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "true_divide",
    "negative",
]

# numpy scalar types in MXNet's dtype-flag order.
_FLAG_TYPES = [
    np.float32,
    np.float64,
    np.float16,
    np.uint8,
    np.int32,
    np.int8,
    np.int64,
    np.bool_,
]
_core._set_numpy_types(_FLAG_TYPES)
_DTYPE_TO_FLAG = {np.dtype(t): i for i, t in enumerate(_FLAG_TYPES)}
mx_real_t = np.float32


def _flag(dtype: Any) -> int:
    try:
        return _DTYPE_TO_FLAG[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise MXNetTypeError(
            f"unsupported dtype {dtype!r}: rsmx supports "
            + ", ".join(np.dtype(t).name for t in _FLAG_TYPES)
        ) from None


def _op(name: str) -> Any:
    from . import op

    return getattr(op, name)


def _ctx(ctx: Any) -> Context:
    if ctx is None:
        return current_context()
    if isinstance(ctx, Context):
        return ctx
    if isinstance(ctx, str):
        t, _, rest = ctx.partition("(")
        return Context(t, int(rest.rstrip(")") or 0))
    raise MXNetTypeError(f"expected a Context, got {type(ctx).__name__}")


# ---------------------------------------------------------------- creation


def empty(shape: Any, ctx: Any = None, dtype: Any = None) -> NDArray:
    """A new array with uninitialised contents."""
    if isinstance(shape, integer_types):
        shape = (shape,)
    c = _ctx(ctx)
    return _core.empty(tuple(int(s) for s in shape), _flag(dtype or mx_real_t), *c._pair)


def array(source_array: Any, ctx: Any = None, dtype: Any = None) -> NDArray:
    """An array with a copy of ``source_array`` (an NDArray, numpy array or nested list).

    The dtype is ``source_array``'s for an NDArray, else float32 unless ``dtype`` is given,
    as in MXNet 1.x.
    """
    if isinstance(source_array, NDArray):
        dtype = source_array.dtype if dtype is None else dtype
        return source_array.as_in_context(_ctx(ctx)).astype(dtype, copy=True)
    if dtype is None:
        dtype = mx_real_t
    try:
        src = np.asarray(source_array)
    except Exception as e:  # noqa: BLE001
        raise MXNetTypeError(f"cannot make an NDArray from {type(source_array).__name__}: {e}") from e
    if src.dtype == object:
        raise MXNetTypeError(f"cannot make an NDArray from {type(source_array).__name__}")
    flag = _flag(dtype)
    src = np.asarray(src, dtype=_FLAG_TYPES[flag], order="C")
    return _core.from_numpy(src, flag, *_ctx(ctx)._pair)


def zeros(shape: Any, ctx: Any = None, dtype: Any = None, **kwargs: Any) -> NDArray:
    """An array of zeros."""
    return _filled("_zeros", shape, ctx, dtype, **kwargs)


def ones(shape: Any, ctx: Any = None, dtype: Any = None, **kwargs: Any) -> NDArray:
    """An array of ones."""
    return _filled("_ones", shape, ctx, dtype, **kwargs)


def _filled(op: str, shape: Any, ctx: Any, dtype: Any, out: Any = None, **kwargs: Any) -> NDArray:
    """``_zeros`` or ``_ones``, the operators MXNet's ``zeros`` and ``ones`` run."""
    if isinstance(shape, integer_types):
        shape = (shape,)
    kwargs.pop("stype", None)
    shape = tuple(int(d) for d in shape)
    return _op(op)(shape=shape, dtype=np.dtype(dtype or mx_real_t).name, ctx=_ctx(ctx), out=out)


def full(shape: Any, val: Any, ctx: Any = None, dtype: Any = mx_real_t, out: Any = None, **kwargs: Any) -> NDArray:
    """An array filled with ``val``."""
    if isinstance(shape, integer_types):
        shape = (shape,)
    kwargs.pop("stype", None)
    return _op("_full")(
        shape=tuple(shape), value=float(val), dtype=np.dtype(dtype or mx_real_t).name, ctx=_ctx(ctx), out=out
    )


def eye(N: int, M: int = 0, k: int = 0, ctx: Any = None, dtype: Any = mx_real_t, **kwargs: Any) -> NDArray:  # noqa: N803
    """An ``N`` by ``M`` (``N`` when 0) array with ones on diagonal ``k`` and zeros
    elsewhere."""
    return _op("_eye")(N=N, M=M, k=k, ctx=_ctx(ctx), dtype=np.dtype(dtype or mx_real_t).name, **kwargs)


def arange(
    start: float,
    stop: float | None = None,
    step: float = 1.0,
    repeat: int = 1,
    infer_range: bool = False,
    ctx: Any = None,
    dtype: Any = mx_real_t,
) -> NDArray:
    """Evenly spaced values in ``[start, stop)``, each repeated ``repeat`` times."""
    return _op("_arange")(
        start=start,
        stop="None" if stop is None else stop,
        step=step,
        repeat=repeat,
        dtype=np.dtype(dtype or mx_real_t).name,
        ctx=_ctx(ctx),
    )


def waitall() -> None:
    """Blocks until all pushed work is done; raises the first error an op raised."""
    _core.waitall()


def concatenate(arrays: list[NDArray], axis: int = 0, always_copy: bool = True) -> NDArray:
    """Joins arrays along ``axis``."""
    if not always_copy and len(arrays) == 1:
        return arrays[0]
    return _op("Concat")(*arrays, dim=axis)


def _axes_tuple(axes: Any, ndim: int, what: str) -> list[int]:
    """``axes`` (an int or a sequence) as distinct non-negative axes of an ``ndim``-d
    array; ``ValueError`` for an axis out of range or repeated."""
    axes = [axes] if isinstance(axes, integer_types) else list(axes)
    out = []
    for a in axes:
        if not -ndim <= int(a) < ndim:
            raise MXNetValueError(f"{what} axis {a} is out of bounds for array of dimension {ndim}")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise MXNetValueError(f"repeated axis in `{what}` argument")
    return out


def moveaxis(tensor: NDArray, source: Any, destination: Any) -> NDArray:
    """Moves the axes ``source`` (an int or a sequence) to the positions
    ``destination``; the other axes keep their order."""
    src = _axes_tuple(source, tensor.ndim, "source")
    dst = _axes_tuple(destination, tensor.ndim, "destination")
    if len(src) != len(dst):
        raise MXNetValueError("`source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(tensor.ndim) if n not in src]
    for d, s_ in sorted(zip(dst, src, strict=True)):
        order.insert(d, s_)
    return _op("transpose")(tensor, axes=tuple(order))


def onehot_encode(indices: NDArray, out: NDArray) -> NDArray:
    """Writes the one-hot encoding of ``indices`` into ``out``."""
    return _op("one_hot")(indices, depth=out.shape[1], out=out, dtype=out.dtype)


# ------------------------------------------------------- binary functions


def _ufunc(lhs: Any, rhs: Any, array_op: str, scalar_op: str, rscalar_op: str | None, py: Any) -> Any:
    if isinstance(lhs, NDArray):
        if isinstance(rhs, NDArray):
            return _op(array_op)(lhs, rhs)
        if isinstance(rhs, numeric_types):
            return _op(scalar_op)(lhs, scalar=float(rhs))
        raise MXNetTypeError(f"type {type(rhs).__name__} is not supported")
    if isinstance(rhs, NDArray):
        if isinstance(lhs, numeric_types):
            return _op(rscalar_op or scalar_op)(rhs, scalar=float(lhs))
        raise MXNetTypeError(f"type {type(lhs).__name__} is not supported")
    return py(lhs, rhs)


def add(lhs: Any, rhs: Any) -> Any:
    """Element-wise ``lhs + rhs`` with broadcasting."""
    return _ufunc(lhs, rhs, "broadcast_add", "_plus_scalar", None, lambda a, b: a + b)


def subtract(lhs: Any, rhs: Any) -> Any:
    """Element-wise ``lhs - rhs`` with broadcasting."""
    return _ufunc(lhs, rhs, "broadcast_sub", "_minus_scalar", "_rminus_scalar", lambda a, b: a - b)


def multiply(lhs: Any, rhs: Any) -> Any:
    """Element-wise ``lhs * rhs`` with broadcasting."""
    return _ufunc(lhs, rhs, "broadcast_mul", "_mul_scalar", None, lambda a, b: a * b)


def divide(lhs: Any, rhs: Any) -> Any:
    """Element-wise ``lhs / rhs`` with broadcasting."""
    return _ufunc(lhs, rhs, "broadcast_div", "_div_scalar", "_rdiv_scalar", lambda a, b: a / b)


true_divide = divide


def modulo(lhs: Any, rhs: Any) -> Any:
    """Element-wise ``lhs % rhs`` with broadcasting."""
    return _ufunc(lhs, rhs, "broadcast_mod", "_mod_scalar", "_rmod_scalar", lambda a, b: a % b)


def power(base: Any, exp: Any) -> Any:
    """Element-wise ``base ** exp`` with broadcasting."""
    return _ufunc(base, exp, "broadcast_power", "_power_scalar", "_rpower_scalar", lambda a, b: a**b)


def hypot(lhs: Any, rhs: Any) -> Any:
    """Element-wise ``sqrt(lhs**2 + rhs**2)`` with broadcasting."""
    return _ufunc(lhs, rhs, "broadcast_hypot", "_hypot_scalar", "_hypot_scalar", np.hypot)


def maximum(lhs: Any, rhs: Any) -> Any:
    """Element-wise maximum with broadcasting."""
    return _ufunc(lhs, rhs, "broadcast_maximum", "_maximum_scalar", None, max)


def minimum(lhs: Any, rhs: Any) -> Any:
    """Element-wise minimum with broadcasting."""
    return _ufunc(lhs, rhs, "broadcast_minimum", "_minimum_scalar", None, min)


def _cmp(array_op: str, scalar_op: str, rscalar_op: str, py: Any) -> Any:
    def f(lhs: Any, rhs: Any) -> Any:
        return _ufunc(lhs, rhs, array_op, scalar_op, rscalar_op, lambda a, b: float(py(a, b)))

    return f


equal = _cmp("broadcast_equal", "_equal_scalar", "_equal_scalar", lambda a, b: a == b)
not_equal = _cmp("broadcast_not_equal", "_not_equal_scalar", "_not_equal_scalar", lambda a, b: a != b)
greater = _cmp("broadcast_greater", "_greater_scalar", "_lesser_scalar", lambda a, b: a > b)
greater_equal = _cmp(
    "broadcast_greater_equal", "_greater_equal_scalar", "_lesser_equal_scalar", lambda a, b: a >= b
)
lesser = _cmp("broadcast_lesser", "_lesser_scalar", "_greater_scalar", lambda a, b: a < b)
lesser_equal = _cmp(
    "broadcast_lesser_equal", "_lesser_equal_scalar", "_greater_equal_scalar", lambda a, b: a <= b
)
logical_and = _cmp("broadcast_logical_and", "_logical_and_scalar", "_logical_and_scalar", lambda a, b: a and b)
logical_or = _cmp("broadcast_logical_or", "_logical_or_scalar", "_logical_or_scalar", lambda a, b: a or b)
logical_xor = _cmp(
    "broadcast_logical_xor", "_logical_xor_scalar", "_logical_xor_scalar", lambda a, b: bool(a) != bool(b)
)


def negative(data: NDArray) -> NDArray:
    """Element-wise ``-data``."""
    return _op("negative")(data)


# ------------------------------------------------------------ the methods


class NDArray(_core.NDArrayBase):
    """An n-dimensional array on a device, computed on asynchronously by the engine.

    The arithmetic operators, views and properties are the core's (``NDArrayBase``);
    every array the core returns is of this class.
    """

    __slots__ = ()
    __array_priority__ = 1000.0

    @property
    def context(self) -> Context:
        """The device the array lives on."""
        t, i = self._ctx
        return Context(Context.devtype2str[t], i)

    ctx = context

    @property
    def stype(self) -> str:
        """Storage type: always ``'default'`` (dense)."""
        return "default"

    @property
    def T(self) -> NDArray:  # noqa: N802
        """The transpose (the array itself below two dimensions)."""
        if self.ndim < 2:
            return self
        return _op("transpose")(self)

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the contents (waits for pending writes)."""
        out = np.empty(self.shape, dtype=self.dtype)
        self._copy_to_numpy(out)
        return out

    def asscalar(self) -> Any:
        """The value of a one-element array as a numpy scalar."""
        if self.size != 1:
            raise MXNetValueError("The current array is not a scalar")
        return self.asnumpy().reshape(-1)[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.asnumpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def copy(self) -> NDArray:
        """A deep copy on the same context."""
        return self.copyto(self.context)

    def copyto(self, other: Any) -> NDArray:
        """Copies into ``other`` (an NDArray) or onto a new array on context ``other``."""
        if isinstance(other, NDArray):
            if other is self:
                return other
            if other.dtype != self.dtype:
                _op("Cast")(self.as_in_context(other.context), dtype=other.dtype, out=other)
                return other
            _core.copy_into(self, other)
            return other
        if isinstance(other, Context):
            out = empty(self.shape, other, self.dtype)
            _core.copy_into(self, out)
            return out
        raise MXNetTypeError(f"copyto does not support type {type(other).__name__}")

    def as_in_context(self, context: Context) -> NDArray:
        """The array on ``context`` (itself if already there)."""
        if self.context == context:
            return self
        return self.copyto(context)

    as_in_ctx = as_in_context

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        """A copy converted to ``dtype`` (itself if ``copy=False`` and already of it)."""
        if not copy and np.dtype(dtype) == np.dtype(self.dtype):
            return self
        if np.dtype(dtype) == np.dtype(self.dtype):
            return self.copy()
        return _op("Cast")(self, dtype=np.dtype(dtype).name)

    def attach_grad(self, grad_req: str = "write", stype: str | None = None) -> None:
        """Marks the array for gradients: ``backward`` writes (``'write'``), adds
        (``'add'``) or skips (``'null'``) its gradient, in a zeroed buffer ``grad``."""
        if stype not in (None, "default"):
            raise MXNetValueError(f"attach_grad: storage type '{stype}' is not supported")
        grad = _op("zeros_like")(self)
        _core.autograd_mark_variables([self], [grad], [grad_req])

    @property
    def grad(self) -> NDArray | None:
        """The gradient buffer ``attach_grad`` gave the array, else ``None``."""
        return _core.autograd_get_grad(self)

    @property
    def _fresh_grad(self) -> bool:
        """True once ``backward`` wrote the gradient, until cleared."""
        return _core.autograd_fresh_grad(self)

    @_fresh_grad.setter
    def _fresh_grad(self, state: bool) -> None:
        _core.autograd_set_fresh_grad(self, bool(state))

    def detach(self) -> NDArray:
        """The same data outside any recorded graph."""
        return _core.autograd_detach(self)

    def backward(self, out_grad: NDArray | None = None, retain_graph: bool = False, train_mode: bool = True) -> None:  # noqa: FBT001, FBT002
        """Computes the gradients of this array with respect to the marked variables."""
        heads = [self]
        grads = [] if out_grad is None else [out_grad]
        _core.autograd_backward(heads, grads, None, bool(retain_graph), False, bool(train_mode))

    def to_dlpack_for_read(self) -> Any:
        """A DLPack capsule sharing this array's memory for reading (see
        ``mx.nd.to_dlpack_for_read``)."""
        return _core.dlpack_export(self, False)

    def to_dlpack_for_write(self) -> Any:
        """A DLPack capsule sharing this array's memory for writing."""
        return _core.dlpack_export(self, True)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        """The DLPack protocol (``numpy.from_dlpack``, ``torch.from_dlpack``): the
        memory, shared once pending writes are done."""
        return _core.dlpack_export(self, False)

    def __dlpack_device__(self) -> tuple[int, int]:
        """DLPack's (device type, id) of the array: (1, 0) for the CPU."""
        t, i = self._ctx
        return (1, 0) if t == 1 else (2, i)

    def wait_to_write(self) -> None:
        """Blocks until all pending reads and writes of the array are done."""
        self._wait_to_write()

    def tostype(self, stype: str) -> NDArray:
        """Storage conversion; only ``'default'`` is supported."""
        if stype != "default":
            raise MXNetValueError(f"storage type '{stype}' is not supported")
        return self

    def reshape(self, *shape: Any, **kwargs: Any) -> NDArray:
        """The same data with a new shape (MXNet's special values 0, -1, -2, -3, -4 and
        ``reverse`` allowed), sharing memory."""
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        if "shape" in kwargs:
            shape = tuple(kwargs.pop("shape"))
        reverse = kwargs.pop("reverse", False)
        if kwargs:
            raise MXNetTypeError(f"reshape: unknown arguments {sorted(kwargs)}")
        attrs = {"shape": _shape_str(shape), "reverse": str(bool(reverse))}
        target = _core.infer_shape("Reshape", attrs, [list(self.shape)])[0]
        return self._reshape_view(target)

    def flatten(self, inplace: bool = False) -> NDArray:  # noqa: FBT001, FBT002
        """The array as 2-D ``(shape[0], rest)``; with ``inplace`` a view sharing memory."""
        return self.reshape((0, -1)) if inplace else _op("Flatten")(self)

    def expand_dims(self, axis: int, inplace: bool = False) -> NDArray:  # noqa: FBT001, FBT002
        """A new axis of size 1 at ``axis``; with ``inplace`` a view sharing memory."""
        if not inplace:
            return _op("expand_dims")(self, axis=axis)
        if not -self.ndim - 1 <= axis <= self.ndim:
            raise MXNetValueError(f"axis {axis} is out of range for {self.ndim}d array")
        shape = list(self.shape)
        shape.insert(axis % (self.ndim + 1), 1)
        return self._reshape_view(shape)

    def squeeze(self, axis: Any = None, inplace: bool = False) -> NDArray:  # noqa: FBT001, FBT002
        """Drops axes of size 1 (those in ``axis``, or all); with ``inplace`` a view
        sharing memory. Squeezing every axis leaves shape ``(1,)``."""
        if not inplace:
            return _op("squeeze")(self, axis=axis)
        return self._reshape_view(_squeezed_shape(self.shape, axis))

    def broadcast_to(self, shape: Any) -> NDArray:
        """The array broadcast to ``shape``; missing leading axes count as size 1."""
        shape = tuple(int(d) for d in shape)
        cur = (1,) * (len(shape) - self.ndim) + self.shape
        if len(shape) < self.ndim or any(c not in (1, t) for c, t in zip(cur, shape, strict=True)):
            raise MXNetValueError(f"operands could not be broadcast together with remapped shapes"
                                  f"[original->remapped]: {self.shape} and requested shape {shape}")
        src = self if cur == self.shape else self.reshape(cur)
        return _op("broadcast_to")(src, shape=shape)

    @staticmethod
    def _basic_indexing_slice_is_contiguous(key: tuple, shape: tuple) -> bool:
        """Whether the slices ``key`` select one block of a row-major array of ``shape``
        (such basic indexing gives a view)."""
        from .indexing import is_contiguous

        return is_contiguous(key, shape)

    def reshape_like(self, *args: Any, **kwargs: Any) -> NDArray:
        """Reshapes to the shape of another array."""
        return _op("reshape_like")(self, *args, **kwargs)

    def __neg__(self) -> NDArray:
        return _op("negative")(self)

    def __abs__(self) -> NDArray:
        return _op("abs")(self)

    def __pos__(self) -> NDArray:
        return self

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return equal(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return not_equal(self, other)

    def __gt__(self, other: Any) -> Any:
        return greater(self, other)

    def __ge__(self, other: Any) -> Any:
        return greater_equal(self, other)

    def __lt__(self, other: Any) -> Any:
        return lesser(self, other)

    def __le__(self, other: Any) -> Any:
        return lesser_equal(self, other)

    def __hash__(self) -> int:
        return id(self) // 16

    def __bool__(self) -> bool:
        if self.size == 0:
            return False
        if self.size == 1:
            return bool(self.asnumpy().reshape(-1)[0])
        raise MXNetValueError(
            "The truth value of an NDArray with multiple elements is ambiguous."
        )

    __nonzero__ = __bool__

    def __iter__(self) -> Any:
        for i in range(self.shape[0] if self.ndim else 0):
            yield self[i]

    def __str__(self) -> str:
        return self.__repr__()

    def __repr__(self) -> str:
        shape_info = "x".join(str(s) for s in self.shape)
        return f"\n{self.asnumpy()}\n<{type(self).__name__} {shape_info} @{self.context}>"

    def __getstate__(self) -> dict[str, Any]:
        """``{'handle': bytes}``: the array in MXNet's single-array format, as MXNet's
        NDArrays give it."""
        from .utils import to_raw_bytes

        return {"handle": bytearray(to_raw_bytes(self))}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Takes the values of a state from ``__getstate__`` (MXNet's or rsmx's); the
        array keeps its memory, so the saved array must have its shape."""
        from .utils import from_raw_bytes

        if state.get("handle") is None:
            return
        loaded = from_raw_bytes(state["handle"])
        if loaded.shape != self.shape:
            raise MXNetValueError(
                f"__setstate__: the state holds an array of shape {loaded.shape}, "
                f"this array has shape {self.shape}"
            )
        loaded.as_in_context(self.context).copyto(self)

    def __reduce__(self) -> Any:
        return (_rebuild, (self.asnumpy(),))

    def __getitem__(self, key: Any) -> NDArray:
        from .indexing import get_item

        return get_item(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        from .indexing import set_item

        set_item(self, key, value)

    def pad(self, *args: Any, **kwargs: Any) -> NDArray:
        """Same as ``mx.nd.pad(self, ...)``."""
        return _op("Pad")(self, *args, **kwargs)

    def split_v2(self, *args: Any, **kwargs: Any) -> Any:
        """Same as ``mx.nd.split_v2(self, ...)``."""
        from .composed import split_v2

        return split_v2(self, *args, **kwargs)

    def slice_assign(self, rhs: NDArray, begin: Any, end: Any, step: Any) -> NDArray:
        """Sets ``self[begin:end:step]`` (one entry per axis, None for a default) to
        ``rhs``; returns the array."""
        from .composed import _slice_assign

        return _slice_assign(self, rhs, begin, end, step, out=self)

    def slice_assign_scalar(self, value: float, begin: Any, end: Any, step: Any) -> NDArray:
        """Sets ``self[begin:end:step]`` to the number ``value``; returns the array."""
        from .composed import _slice_assign_scalar

        return _slice_assign_scalar(self, value, begin, end, step, out=self)

    def __matmul__(self, other: Any) -> NDArray:
        return _op("dot")(self, other)

    def __floordiv__(self, other: Any) -> NDArray:
        return (self / other).floor()

    def __div__(self, other: Any) -> NDArray:
        return self.__truediv__(other)


# MXNet's module names the builtin so; its tests import it from here.
py_slice = slice


def _squeezed_shape(shape: tuple, axis: Any) -> list[int]:
    """``shape`` without the size-1 axes ``axis`` (all of them when None); ``[1]`` when
    nothing is left."""
    if axis is None:
        kept = [d for d in shape if d != 1]
    else:
        axes = [axis] if isinstance(axis, integer_types) else list(axis)
        norm = {int(a) % len(shape) for a in axes}
        if len(norm) != len(axes):
            raise MXNetValueError(f"squeeze: repeated axis in {axis}")
        if any(shape[a] != 1 for a in norm):
            raise MXNetValueError(f"squeeze: cannot select an axis whose size is not 1: {axis}")
        kept = [d for i, d in enumerate(shape) if i not in norm]
    return kept or [1]


def _rebuild(a: np.ndarray) -> NDArray:
    return array(a, dtype=a.dtype)


def _shape_str(shape: Any) -> str:
    if isinstance(shape, integer_types):
        shape = (shape,)
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


# Operator methods: ``x.sum(axis=1)`` is ``mx.nd.sum(x, axis=1)``.
_OP_METHODS = [
    "sum", "nansum", "mean", "max", "min", "prod", "nanprod", "norm", "argmax", "argmin",
    "argmax_channel", "transpose", "flatten", "expand_dims", "squeeze", "tile", "repeat", "flip",
    "clip", "abs", "sign", "sqrt", "rsqrt", "cbrt", "rcbrt", "square", "reciprocal", "exp",
    "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "degrees", "radians", "sigmoid",
    "softsign", "relu", "floor", "ceil", "round", "rint", "fix", "trunc", "one_hot", "take", "pick",
    "topk", "sort", "argsort", "split", "slice", "slice_axis", "slice_like", "broadcast_to",
    "broadcast_like", "broadcast_axes", "swapaxes", "zeros_like", "ones_like", "dot", "softmax",
    "log_softmax", "diag", "space_to_depth", "depth_to_space", "broadcast_axis", "softmin",
    "shape_array", "size_array",
]


def _make_method(name: str) -> Any:
    def method(self: NDArray, *args: Any, **kwargs: Any) -> Any:
        return _op(name)(self, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"NDArray.{name}"
    method.__doc__ = f"Same as ``mx.nd.{name}(self, ...)``."
    return method


def _registered_ops() -> set[str]:
    return {n for name, aliases, *_ in _core.list_ops() for n in (name, *aliases)}


# Methods the class defines itself (``flatten(inplace=...)``...) are kept.
_OWN_METHODS = {"flatten", "expand_dims", "squeeze", "broadcast_to"}
for _name in sorted(set(_OP_METHODS) & _registered_ops() - _OWN_METHODS):
    setattr(NDArray, _name, _make_method(_name))
_core._set_array_class(NDArray)

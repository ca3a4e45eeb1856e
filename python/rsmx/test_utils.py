"""Helpers for users' tests (MXNet's ``mx.test_utils``): tolerances and array comparison,
random shapes and arrays, numeric gradient checks, forward and backward checks of symbols,
consistency across contexts, environment settings, and the MNIST data read from local
copies or downloaded once."""

from __future__ import annotations

import contextlib
import numbers
import os
import sys
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import rsmx as mx  # noqa: F401  (``from mxnet.test_utils import *`` gives ``mx``, as in MXNet)

from . import io as _io
from . import ndarray as _nd
from . import symbol as _sym
from .base import MXNetError
from .context import Context, current_context, num_gpus
from .io.mnist import read_mnist_images, read_mnist_labels
from .ndarray import array  # noqa: F401  (``from mxnet.test_utils import *`` gives it)

_FLOATS = (np.float16, np.float32, np.float64)


# ---------------------------------------------------------------- contexts, dtypes, tolerances


def default_context() -> Context:
    """The context tests run on: the current default context."""
    return current_context()


def set_default_context(ctx: Context) -> None:
    """Makes ``ctx`` the default context of this thread."""
    Context._default_ctx.value = ctx


def default_dtype() -> type:
    """The element type tests use unless told otherwise."""
    return np.float32


def _by_dtype(floats: tuple[float, float, float]) -> dict[np.dtype, float]:
    table = {np.dtype(t): 0.0 for t in (np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64)}
    table.update({np.dtype(t): v for t, v in zip(_FLOATS, floats, strict=True)})
    return table


def default_rtols() -> dict[np.dtype, float]:
    """Relative tolerance per element type."""
    return _by_dtype((1e-2, 1e-4, 1e-5))


def default_atols() -> dict[np.dtype, float]:
    """Absolute tolerance per element type."""
    return _by_dtype((1e-1, 1e-3, 1e-20))


def default_numeric_eps() -> dict[np.dtype, float]:
    """Finite-difference step per float type (powers of two, exact as input deltas)."""
    return {np.dtype(np.float16): 2.0**-6, np.dtype(np.float32): 2.0**-9, np.dtype(np.float64): 2.0**-14}


def effective_dtype(dat: Any) -> np.dtype:
    """The element type that decides the tolerance for ``dat``."""
    return np.dtype(dat.dtype)


def get_tolerance(dat: Any, tol: Any, default_tol: dict) -> float:
    """``tol`` itself if a number; else its entry (or the default's) for ``dat``'s type."""
    if isinstance(tol, numbers.Number):
        return float(tol)
    dtype = effective_dtype(dat)
    return (tol or {}).get(dtype, default_tol[dtype])


def get_tols(x: Any, y: Any, rtol: Any, atol: Any) -> tuple[float, float]:
    """The relative and absolute tolerances to compare ``x`` with ``y``: the looser of
    the two element types' unless given."""
    x = np.array(x) if isinstance(x, numbers.Number) else x
    y = np.array(y) if isinstance(y, numbers.Number) else y
    r = max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols()))
    a = max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols()))
    return r, a


def get_atol(atol: float | None = None, dtype: Any = np.float64) -> float:
    """``atol``, or the default absolute tolerance of ``dtype``."""
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def get_rtol(rtol: float | None = None, dtype: Any = np.float64) -> float:
    """``rtol``, or the default relative tolerance of ``dtype``."""
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_etol(etol: float | None = None) -> float:
    """``etol``, the share of elements allowed to differ, or 0."""
    return 0 if etol is None else etol


# ---------------------------------------------------------------- random data


def random_arrays(*shapes: Any) -> Any:
    """Standard-normal numpy arrays of the default type, one per shape (a single array
    for a single shape)."""
    arrays = [
        np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0 else np.random.randn(*s).astype(default_dtype())
        for s in shapes
    ]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes: Any, low: float = 0.0, high: float = 1.0, dtype: Any = None) -> list:
    """Uniform numpy arrays in ``[low, high)``, one per shape."""
    dtype = default_dtype() if dtype is None else dtype
    return [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]


def random_sample(population: list, k: int) -> list:
    """``k`` elements of ``population`` in random order."""
    if not 0 <= k <= len(population):
        raise ValueError(f"random_sample: k={k} is not within 0..{len(population)}")
    chosen = list(population)
    np.random.shuffle(chosen)
    return chosen[:k]


def rand_shape_2d(dim0: int = 10, dim1: int = 10, allow_zero_size: bool = False) -> tuple[int, int]:
    """A random 2-d shape with sizes up to ``dim0`` and ``dim1``."""
    low = 0 if allow_zero_size else 1
    return int(np.random.randint(low, dim0 + 1)), int(np.random.randint(low, dim1 + 1))


def rand_shape_3d(dim0: int = 10, dim1: int = 10, dim2: int = 10, allow_zero_size: bool = False) -> tuple[int, int, int]:
    """A random 3-d shape with sizes up to ``dim0``, ``dim1`` and ``dim2``."""
    low = 0 if allow_zero_size else 1
    return tuple(int(np.random.randint(low, d + 1)) for d in (dim0, dim1, dim2))  # type: ignore[return-value]


def rand_shape_nd(num_dim: int, dim: int = 10, allow_zero_size: bool = False) -> tuple[int, ...]:
    """A random shape of ``num_dim`` sizes up to ``dim``."""
    low = 0 if allow_zero_size else 1
    return tuple(int(v) for v in np.random.randint(low, dim + 1, size=num_dim))


def rand_coord_2d(x_low: int, x_high: int, y_low: int, y_high: int) -> tuple[int, int]:
    """A random point of the given ranges."""
    return int(np.random.randint(x_low, x_high)), int(np.random.randint(y_low, y_high))


def rand_ndarray(
    shape: Any,
    stype: str = "default",
    density: float | None = None,
    dtype: Any = None,
    modifier_func: Callable | None = None,
    shuffle_csr_indices: bool = False,
    distribution: str | None = None,
    ctx: Context | None = None,
) -> Any:
    """A standard-normal NDArray of ``shape`` on ``ctx``. rsmx arrays are dense: a sparse
    ``stype`` is an error."""
    if stype != "default":
        raise MXNetError(f"rand_ndarray: storage type '{stype}' is not supported (rsmx arrays are dense)")
    values = random_arrays(tuple(shape))
    if modifier_func is not None:
        values = np.vectorize(modifier_func)(values)
    return _nd.array(values, dtype=dtype, ctx=ctx or default_context())


def create_vector(size: int, dtype: Any = np.int64) -> Any:
    """The NDArray ``0, 1, ..., size - 1``."""
    return _nd.arange(0, size, dtype=dtype)


def create_2d_tensor(rows: int, columns: int, dtype: Any = np.int64) -> Any:
    """A ``rows × columns`` NDArray whose row ``i`` holds ``i``."""
    return _nd.array(np.repeat(np.arange(rows)[:, None], columns, axis=1), dtype=dtype)


def assign_each(the_input: np.ndarray, function: Callable | None) -> np.ndarray:
    """``function`` applied to every element (a copy when ``function`` is None)."""
    if function is None:
        return np.array(the_input)
    return np.vectorize(function)(the_input).astype(np.asarray(the_input).dtype)


def assign_each2(input1: np.ndarray, input2: np.ndarray, function: Callable | None) -> np.ndarray:
    """``function`` applied to every pair of elements (a copy of ``input1`` when None)."""
    if function is None:
        return np.array(input1)
    return np.vectorize(function)(input1, input2).astype(np.asarray(input1).dtype)


def np_reduce(dat: np.ndarray, axis: Any, keepdims: bool, numpy_reduce_func: Callable) -> np.ndarray:
    """Reduces ``dat`` over ``axis`` (an int, a list, or None for all) one axis at a time."""
    axes = [axis] if isinstance(axis, int) else (list(axis) if axis is not None else list(range(dat.ndim)))
    out = dat
    for a in sorted(axes, reverse=True):
        out = numpy_reduce_func(out, axis=a)
    if keepdims:
        shape = list(dat.shape)
        for a in axes:
            shape[a] = 1
        out = np.reshape(out, shape)
    return out


# ---------------------------------------------------------------- comparisons


def _numpy(a: Any) -> Any:
    return a.asnumpy() if hasattr(a, "asnumpy") else a


def same(a: Any, b: Any) -> bool:
    """True if the arrays are equal element for element."""
    return bool(np.array_equal(_numpy(a), _numpy(b)))


def same_array(array1: Any, array2: Any) -> bool:
    """True if the two NDArrays share their memory (a change to one shows in the other)."""
    array1[:] += 1
    shared = same(array1, array2)
    array1[:] -= 1
    return shared and same(array1, array2)


def checkShapes(a: Any, b: Any) -> None:  # noqa: N802 - MXNet's name
    """Raises ``AssertionError`` if the shapes differ."""
    if np.shape(a) != np.shape(b):
        raise AssertionError(f"a.shape = {np.shape(a)} and b.shape = {np.shape(b)} are not equal")


def almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None, equal_nan: bool = False, use_broadcast: bool = True) -> bool:
    """True if ``|a - b| <= atol + rtol * |b|`` everywhere."""
    a, b = _numpy(a), _numpy(b)
    if not use_broadcast:
        checkShapes(a, b)
    return bool(np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan))


def _find_max_violation(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> tuple[tuple, float]:
    """Where ``|a - b|`` exceeds its tolerance the most, and by what factor."""
    diff = np.where(np.equal(a, b), 0, np.abs(a - b))
    ratio = diff / (atol + rtol * np.abs(b) + 1e-20)
    where = np.unravel_index(np.argmax(ratio), ratio.shape) if ratio.size else ()
    return tuple(int(i) for i in where), float(np.max(ratio)) if ratio.size else 0.0


def locationError(a: np.ndarray, b: np.ndarray, index: tuple, names: tuple, maxError: bool = False) -> str:  # noqa: N802, N803
    """Says where two arrays differ and their values there."""
    kind = "maximum " if maxError else ""
    return f"Location of {kind}error: {index}, {names[0]}={float(a[index]):.8f}, {names[1]}={float(b[index]):.8f}"


def _mismatch_message(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, names: tuple, equal_nan: bool) -> str:
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    index, worst = _find_max_violation(a.astype(np.float64), b.astype(np.float64), rtol, atol)
    share = 100.0 * np.count_nonzero(bad) / max(bad.size, 1)
    where = locationError(a, b, index, names, maxError=True) if index != () else ""
    return (
        f"Error {worst:f} exceeds tolerance rtol={rtol:e}, atol={atol:e} (mismatch {share:f}%).\n{where}\n"
        f" {names[0]}: {np.array2string(a, threshold=8)}\n {names[1]}: {np.array2string(b, threshold=8)}"
    )


def assert_almost_equal(
    a: Any,
    b: Any,
    rtol: Any = None,
    atol: Any = None,
    names: tuple = ("a", "b"),
    equal_nan: bool = False,
    use_broadcast: bool = True,
    mismatches: tuple = (10, 10),
) -> None:
    """Raises ``AssertionError``, saying where and by how much, unless ``a`` and ``b``
    (numpy arrays, NDArrays or numbers) agree within ``atol + rtol * |b|``; the default
    tolerances follow the element types."""
    if not use_broadcast:
        checkShapes(a, b)
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = _numpy(a), _numpy(b)
    if getattr(a, "dtype", None) == np.bool_ and getattr(b, "dtype", None) == np.bool_:
        np.testing.assert_equal(a, b)
        return
    if np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan):
        return
    raise AssertionError(_mismatch_message(a, b, rtol, atol, names, equal_nan))


def assert_allclose(a: Any, b: Any, rtol: float = 1e-07, atol: float = 0, equal_nan: bool = True) -> None:
    """``assert_almost_equal`` with numpy's ``assert_allclose`` defaults."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(
    a: Any,
    b: Any,
    rtol: Any = None,
    atol: Any = None,
    etol: float | None = None,
    names: tuple = ("a", "b"),
    equal_nan: bool = False,
    mismatches: tuple = (10, 10),
) -> None:
    """As ``assert_almost_equal``, but up to a share ``etol`` of the elements may differ."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=names, equal_nan=equal_nan)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = _numpy(a), _numpy(b)
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if 1 - np.count_nonzero(close) / close.size > etol:
        raise AssertionError(_mismatch_message(a, b, rtol, atol, names, equal_nan))


def assert_almost_equal_ignore_nan(a: Any, b: Any, rtol: Any = None, atol: Any = None, names: tuple = ("a", "b")) -> None:
    """``assert_almost_equal`` with every place where either holds NaN left out."""
    a, b = np.copy(_numpy(a)), np.copy(_numpy(b))
    nan = np.logical_or(np.isnan(a), np.isnan(b))
    a[nan] = 0
    b[nan] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f: Callable, exception_type: type, *args: Any, **kwargs: Any) -> None:
    """Raises ``AssertionError`` unless ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise {exception_type.__name__}")


def retry(n: int) -> Callable:
    """Decorates a stochastic test to be tried up to ``n`` times before it fails."""
    if n <= 0:
        raise ValueError("retry: n must be positive")

    def decorate(f: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> None:
            for i in range(n):
                try:
                    f(*args, **kwargs)
                    return
                except AssertionError:
                    if i == n - 1:
                        raise
                    _nd.waitall()

        return wrapper

    return decorate


def compare_ndarray_tuple(t1: Any, t2: Any, rtol: Any = None, atol: Any = None) -> None:
    """Compares two (nested) tuples of arrays element by element."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        # Pairs up to the shorter tuple, as MXNet's helper does.
        for s1, s2 in zip(t1, t2, strict=False):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def _dense_pair(shape: Any, dtype: Any, stype: str, what: str) -> tuple[Any, Any]:
    """Two equal uniform arrays of ``shape``; rsmx arrays are dense only."""
    if stype != "default":
        raise MXNetError(
            f"compare_optimizer: {what} storage type '{stype}' is not supported "
            "(rsmx arrays are dense)"
        )
    from .ndarray.random import uniform

    second = uniform(shape=shape, ctx=default_context(), dtype=dtype)
    return second.copyto(default_context()), second


def compare_optimizer(
    opt1: Any,
    opt2: Any,
    shape: Any,
    dtype: Any,
    w_stype: str = "default",
    g_stype: str = "default",
    rtol: float = 1e-4,
    atol: float = 1e-5,
    compare_states: bool = True,
    ntensors: int = 1,
) -> None:
    """Runs one update of ``opt1`` and of ``opt2`` from the same random weights and
    gradients and asserts that states and weights agree.

    ``shape`` a list of shapes updates ``ntensors`` weights at once with ``opt2`` (one
    list of indices) and one by one with ``opt1``.
    """
    if isinstance(shape, list):
        _compare_optimizer_multi(opt1, opt2, shape, dtype, rtol, atol, compare_states, ntensors)
        return
    assert ntensors == 1
    w1, w2 = _dense_pair(shape, dtype, w_stype, "weight")
    g1, g2 = _dense_pair(shape, dtype, g_stype, "gradient")
    state1 = opt1.create_state_multi_precision(0, w1)
    state2 = opt2.create_state_multi_precision(0, w2)
    if compare_states:
        compare_ndarray_tuple(state1, state2)
    opt1.update_multi_precision(0, w1, g1, state1)
    opt2.update_multi_precision(0, w2, g2, state2)
    if compare_states:
        compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
    assert_almost_equal(w1, w2, rtol=rtol, atol=atol)


def _compare_optimizer_multi(
    opt1: Any, opt2: Any, shapes: list, dtype: Any, rtol: float, atol: float,
    compare_states: bool, ntensors: int,
) -> None:
    """``compare_optimizer`` of a list of weights: ``opt2`` updates them all in one call."""
    from .ndarray.random import uniform

    ctx = default_context()
    pairs = [(uniform(shape=s, ctx=ctx, dtype=dtype), uniform(shape=s, ctx=ctx, dtype=dtype))
             for s in shapes]
    w1 = tuple(p[0] for p in pairs)
    g1 = tuple(p[1] for p in pairs)
    w2 = tuple(w.copy() for w in w1)
    g2 = tuple(g.copy() for g in g1)
    state2 = [opt2.create_state_multi_precision(0, w2[i]) for i in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), w2, g2, state2)
    for i in range(ntensors):
        state1 = opt1.create_state_multi_precision(i, w1[i])
        opt1.update_multi_precision(i, w1[i], g1[i], state1)
        if compare_states:
            compare_ndarray_tuple(state1, state2[i], rtol, atol)
        compare_ndarray_tuple(w1[i], w2[i], rtol, atol)


def same_symbol_structure(sym1: Any, sym2: Any) -> bool:
    """True if two symbols have the same operators wired the same way (names aside)."""
    import json

    def ops(s: Any) -> list:
        nodes = json.loads(s.tojson())["nodes"]
        return [(n["op"], [i[:2] for i in n["inputs"]]) for n in nodes]

    return ops(sym1) == ops(sym2)


# ---------------------------------------------------------------- symbol checks


def simple_forward(sym: Any, ctx: Context | None = None, is_train: bool = False, **inputs: Any) -> Any:
    """Runs ``sym`` on the numpy arrays ``inputs`` (by argument name); the output as a
    numpy array, or a list of them."""
    ctx = ctx or default_context()
    exe = sym.bind(ctx, args={k: _nd.array(v, ctx=ctx) for k, v in inputs.items()})
    exe.forward(is_train=is_train)
    outputs = [x.asnumpy() for x in exe.outputs]
    return outputs[0] if len(outputs) == 1 else outputs


def _check_dtype(dtype: Any, what: str) -> None:
    if not (isinstance(dtype, str) and dtype == "asnumpy") and dtype not in _FLOATS:
        raise MXNetError(f"{what}: dtype must be 'asnumpy', np.float16, np.float32 or np.float64, got {dtype!r}")


def _as_nd(v: Any, ctx: Context, dtype: Any) -> Any:
    if isinstance(v, np.ndarray) or np.isscalar(v):
        v = np.asarray(v)
        return _nd.array(v, ctx=ctx, dtype=v.dtype if isinstance(dtype, str) else dtype)
    return v


def _parse_location(sym: Any, location: Any, ctx: Context, dtype: Any = np.float32) -> dict:
    """The arguments' values by name, as NDArrays on ``ctx``, from a dict or a list in
    ``sym.list_arguments()`` order."""
    names = sym.list_arguments()
    if isinstance(location, dict):
        if set(location) != set(names):
            raise ValueError(
                f"Symbol arguments and keys of the given location do not match. "
                f"symbol args: {sorted(names)}, location keys: {sorted(location)}"
            )
    elif isinstance(location, (list, tuple)):
        if len(location) != len(names):
            raise ValueError(f"{len(location)} values given for the {len(names)} arguments {names}")
        location = dict(zip(names, location, strict=True))
    else:
        raise ValueError("location must be a dict, list or tuple of arrays")
    return {k: _as_nd(location[k], ctx, dtype) for k in sorted(location)}


def _parse_aux_states(sym: Any, aux_states: Any, ctx: Context, dtype: Any = np.float32) -> dict | None:
    """The auxiliary states by name, as NDArrays on ``ctx`` (None stays None)."""
    if aux_states is None:
        return None
    names = sym.list_auxiliary_states()
    if isinstance(aux_states, dict):
        if set(aux_states) != set(names):
            raise ValueError(
                f"Symbol aux_states names and given aux_states do not match. "
                f"symbol aux names: {sorted(names)}, aux_states keys: {sorted(aux_states)}"
            )
    else:
        aux_states = dict(zip(names, aux_states, strict=True))
    return {k: _as_nd(v, ctx, dtype) for k, v in aux_states.items()}


def numeric_grad(
    executor: Any,
    location: dict,
    aux_states: dict | None = None,
    eps: float = 1e-4,
    use_forward_train: bool = True,
    dtype: Any = np.float32,
) -> dict:
    """Central differences of the sum of the executor's first output with respect to
    every float argument in ``location`` (name to numpy array)."""
    if dtype not in _FLOATS:
        raise MXNetError(f"numeric_grad: dtype must be a float type, got {dtype!r}")
    grads = {k: np.zeros(np.shape(v), dtype=dtype) for k, v in location.items()}
    for k, v in location.items():
        executor.arg_dict[k][:] = np.asarray(v, dtype=dtype)
    for k, v in location.items():
        v = np.array(v, dtype=np.asarray(v).dtype, order="C")
        if v.dtype.kind != "f":
            continue
        original = v.copy()
        flat = v.reshape(-1)
        for i in range(flat.size):
            sides = []
            for delta in (eps / 2.0, -eps / 2.0):
                flat[i] = original.reshape(-1)[i] + delta
                executor.arg_dict[k][:] = v.astype(dtype)
                for name, val in (aux_states or {}).items():
                    executor.aux_dict[name][:] = val
                executor.forward(is_train=use_forward_train)
                sides.append(executor.outputs[0].asnumpy().astype(np.float64).sum())
            grads[k].reshape(-1)[i] = (sides[0] - sides[1]) / eps
            flat[i] = original.reshape(-1)[i]
        executor.arg_dict[k][:] = original.astype(dtype)
    return grads


def check_numeric_gradient(
    sym: Any,
    location: Any,
    aux_states: Any = None,
    numeric_eps: Any = None,
    rtol: Any = None,
    atol: Any = None,
    grad_nodes: Any = None,
    use_forward_train: bool = True,
    ctx: Context | None = None,
    grad_stype_dict: dict | None = None,
    dtype: Any = np.float32,
) -> None:
    """Checks the symbol's gradients against central differences: its output is weighed
    by a fixed random projection, so every output element counts; ``grad_nodes`` (names,
    or a dict of name to grad_req) chooses the arguments checked."""
    if dtype not in _FLOATS:
        raise MXNetError(f"check_numeric_gradient: dtype must be a float type, got {dtype!r}")
    if grad_stype_dict and any(v != "default" for v in grad_stype_dict.values()):
        raise MXNetError("check_numeric_gradient: sparse gradients are not supported (rsmx arrays are dense)")
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    location_np = {k: v.asnumpy() for k, v in location.items()}
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    aux_np = None if aux is None else {k: v.asnumpy() for k, v in aux.items()}
    if grad_nodes is None:
        grad_req = {k: "write" for k in sym.list_arguments()}
    elif isinstance(grad_nodes, (list, tuple)):
        grad_req = {k: "write" for k in grad_nodes}
    elif isinstance(grad_nodes, dict):
        grad_req = dict(grad_nodes)
    else:
        raise ValueError("grad_nodes must be None, a list of names or a dict of name to grad_req")
    _, out_shapes, _ = sym.infer_shape(**{k: v.shape for k, v in location.items()})
    proj_name = "__random_proj"
    out = _sym.make_loss(sym * _sym.Variable(proj_name))
    args = dict(location)
    args[proj_name] = _nd.array(np.random.rand(*out_shapes[0]) + 0.1, ctx=ctx, dtype=dtype)
    start_grads = {k: np.random.normal(0, 0.01, size=args[k].shape) for k in list(grad_req) + [proj_name]}
    args_grad = {k: _nd.array(v, ctx=ctx, dtype=dtype) for k, v in start_grads.items()}
    executor = out.bind(ctx, args=args, args_grad=args_grad, grad_req=grad_req, aux_states=aux)
    executor.forward(is_train=True)
    eps = get_tolerance(executor.outputs[0], numeric_eps, default_numeric_eps())
    executor.backward()
    numeric = numeric_grad(executor, location_np, aux_np, eps=eps, use_forward_train=use_forward_train, dtype=dtype)
    for name, req in grad_req.items():
        # A 'null' gradient is not written: the array given for it keeps its values.
        bound = executor.grad_dict.get(name)
        got = (args_grad[name] if bound is None else bound).asnumpy()
        labels = (f"NUMERICAL_{name}", f"BACKWARD_{name}")
        if req == "write":
            assert_almost_equal(numeric[name], got, rtol, atol, labels)
        elif req == "add":
            assert_almost_equal(numeric[name], got - start_grads[name], rtol, atol, labels)
        elif req == "null":
            assert_almost_equal(start_grads[name], got, rtol, atol, labels)
        else:
            raise ValueError(f"Invalid grad_req {req} for argument {name}")


def check_symbolic_forward(
    sym: Any,
    location: Any,
    expected: Any,
    rtol: Any = None,
    atol: Any = None,
    aux_states: Any = None,
    ctx: Context | None = None,
    equal_nan: bool = False,
    dtype: Any = np.float32,
) -> list:
    """Runs ``sym`` forward (inference) at ``location`` and compares each output with
    ``expected`` (a list in output order, or a dict by output name); returns the
    outputs."""
    _check_dtype(dtype, "check_symbolic_forward")
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    if isinstance(expected, dict):
        expected = [expected[k] for k in sym.list_outputs()]
    grads = {k: _nd.zeros(v.shape, ctx=ctx, dtype=v.dtype) for k, v in location.items()}
    executor = sym.bind(ctx=ctx, args=location, args_grad=grads, aux_states=aux)
    executor.forward(is_train=False)
    for name, want, got in zip(sym.list_outputs(), expected, executor.outputs, strict=False):
        assert_almost_equal(want, got, rtol, atol, (f"EXPECTED_{name}", f"FORWARD_{name}"), equal_nan=equal_nan)
    return executor.outputs


def check_symbolic_backward(
    sym: Any,
    location: Any,
    out_grads: Any,
    expected: Any,
    rtol: Any = None,
    atol: Any = None,
    aux_states: Any = None,
    grad_req: Any = "write",
    ctx: Context | None = None,
    grad_stypes: dict | None = None,
    equal_nan: bool = False,
    dtype: Any = np.float32,
) -> dict:
    """Runs ``sym`` forward and backward with the output gradients ``out_grads`` and
    compares the argument gradients with ``expected`` (a list in argument order, or a
    dict by name); ``grad_req`` may be one string, a list or a dict. Returns the
    gradient arrays."""
    _check_dtype(dtype, "check_symbolic_backward")
    if grad_stypes and any(v not in (None, "default") for v in grad_stypes.values()):
        raise MXNetError("check_symbolic_backward: sparse gradients are not supported (rsmx arrays are dense)")
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(sym.list_arguments(), expected, strict=False))
    start = {k: np.random.normal(size=np.shape(v)) for k, v in sorted(expected.items())}
    grads = {
        k: _nd.array(v, ctx=ctx, dtype=np.asarray(expected[k]).dtype if isinstance(dtype, str) else dtype)
        for k, v in start.items()
    }
    if isinstance(grad_req, str):
        grad_req = {k: grad_req for k in sym.list_arguments()}
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(sym.list_arguments(), grad_req, strict=False))
    executor = sym.bind(ctx=ctx, args=location, args_grad=grads, aux_states=aux, grad_req=grad_req)
    executor.forward(is_train=True)
    if isinstance(out_grads, (list, tuple)):
        out_grads = [_as_nd(g, ctx, dtype) for g in out_grads]
    elif isinstance(out_grads, dict):
        out_grads = {k: _as_nd(g, ctx, dtype) for k, g in out_grads.items()}
    elif out_grads is not None:
        raise ValueError("out_grads must be None, a list or a dict of arrays")
    executor.backward(out_grads)
    for name in expected:
        labels = (f"EXPECTED_{name}", f"BACKWARD_{name}")
        req = grad_req.get(name, "null")
        if req == "write":
            assert_almost_equal(expected[name], grads[name], rtol, atol, labels, equal_nan=equal_nan)
        elif req == "add":
            assert_almost_equal(expected[name], grads[name].asnumpy() - start[name], rtol, atol, labels, equal_nan=equal_nan)
        elif req == "null":
            assert_almost_equal(start[name], grads[name], rtol, atol, labels, equal_nan=equal_nan)
        else:
            raise ValueError(f"Invalid grad_req {req} for argument {name}")
    return grads


def check_speed(sym: Any, location: dict | None = None, ctx: Context | None = None, N: int = 20, grad_req: Any = None, typ: str = "whole", **kwargs: Any) -> float:  # noqa: N803
    """Seconds per forward-backward (``typ='whole'``) or forward (``'forward'``) pass of
    ``sym``, averaged over ``N`` runs."""
    ctx = ctx or default_context()
    grad_req = grad_req or "write"
    if location is None:
        exe = sym.simple_bind(grad_req=grad_req, ctx=ctx, **kwargs)
        location = {k: np.random.normal(size=a.shape) for k, a in exe.arg_dict.items()}
    else:
        exe = sym.simple_bind(grad_req=grad_req, ctx=ctx, **{k: v.shape for k, v in location.items()})
    for name, value in location.items():
        exe.arg_dict[name][:] = value.astype(exe.arg_dict[name].dtype)
    if typ not in ("whole", "forward"):
        raise ValueError(f"check_speed: typ must be 'whole' or 'forward', got {typ!r}")

    def run() -> None:
        if typ == "whole":
            exe.forward(is_train=True)
            exe.backward(out_grads=exe.outputs)
        else:
            exe.forward(is_train=False)

    run()
    _nd.waitall()
    tic = time.time()
    for _ in range(N):
        run()
    _nd.waitall()
    return (time.time() - tic) / N


def check_consistency(
    sym: Any,
    ctx_list: list,
    scale: float = 1.0,
    grad_req: Any = "write",
    arg_params: dict | None = None,
    aux_params: dict | None = None,
    rtol: Any = None,
    atol: Any = None,
    raise_on_err: bool = True,
    ground_truth: dict | None = None,
    equal_nan: bool = False,
    use_uniform: bool = False,
    rand_type: Any = np.float64,
) -> dict:
    """Runs ``sym`` (or one symbol per entry) on every entry of ``ctx_list`` (dicts of
    ``ctx``, input shapes and ``type_dict``) from the same random values, and checks the
    inference outputs, then the training outputs and gradients, against the run with the
    widest output type (or ``ground_truth``). Returns the ground truth: outputs by output
    name and gradients by argument name."""
    if len(ctx_list) < 2:
        raise ValueError("check_consistency: needs at least two entries to compare")
    syms = sym if isinstance(sym, (list, tuple)) else [sym] * len(ctx_list)
    if len(syms) != len(ctx_list):
        raise ValueError("check_consistency: one symbol per context entry, or a single symbol")
    output_names, arg_names = syms[0].list_outputs(), syms[0].list_arguments()
    exes = []
    for s, spec in zip(syms, ctx_list, strict=True):
        if s.list_arguments() != arg_names or s.list_outputs() != output_names:
            raise ValueError("check_consistency: the symbols must have the same arguments and outputs")
        exes.append(s.simple_bind(grad_req=grad_req, **spec))
    arg_params = dict(arg_params or {})
    aux_params = dict(aux_params or {})
    for name, arr in sorted(exes[0].arg_dict.items()):
        if name not in arg_params:
            if use_uniform:
                arg_params[name] = np.random.uniform(-0.92 * scale, 0.92 * scale, size=arr.shape).astype(rand_type)
            else:
                arg_params[name] = np.random.normal(size=arr.shape, scale=scale).astype(rand_type)
    for name in exes[0].aux_dict:
        aux_params.setdefault(name, 0)
    for exe in exes:
        for name, arr in exe.arg_dict.items():
            arr[:] = arg_params[name]
        for name, arr in exe.aux_dict.items():
            arr[:] = aux_params[name]
        if grad_req == "add":
            for arr in exe.grad_arrays:
                if arr is not None:
                    arr[:] = 0
    dtypes = [np.dtype(exe.outputs[0].dtype) for exe in exes]
    ref = int(np.argmax([d.itemsize for d in dtypes]))
    truth = ground_truth
    if truth is None:
        truth = dict(exes[ref].output_dict)
        if grad_req != "null":
            truth.update(exes[ref].grad_dict)

    def compare(stage: str, i: int, pairs: Any) -> None:
        for name, arr in pairs:
            want = truth.get(name)
            if want is None or arr is None:
                continue
            narrow = arr if np.dtype(arr.dtype).itemsize <= np.dtype(want.dtype).itemsize else want
            r, a = get_tols(narrow, narrow, rtol, atol)
            try:
                assert_almost_equal(arr, want, rtol=r, atol=a, equal_nan=equal_nan, names=(f"ctx {i} {name}", f"ground truth {name}"))
            except AssertionError:
                print(f"{stage} Err: ctx {i} vs ctx {ref} at {name}", file=sys.stderr)
                if raise_on_err:
                    raise

    for exe in exes:
        exe.forward(is_train=False)
    for i, exe in enumerate(exes):
        if i != ref:
            compare("Predict", i, zip(output_names, exe.outputs, strict=True))
    if grad_req != "null":
        for exe in exes:
            exe.forward(is_train=True)
        narrowest = [min((np.dtype(e.outputs[k].dtype) for e in exes), key=lambda d: d.itemsize) for k in range(len(output_names))]
        golden = [exes[0].outputs[k].asnumpy().astype(narrowest[k]) for k in range(len(output_names))]
        for exe in exes:
            exe.backward([_nd.array(g, ctx=o.context, dtype=o.dtype) for g, o in zip(golden, exe.outputs, strict=True)])
        for i, exe in enumerate(exes):
            if i != ref:
                pairs = list(zip(output_names, exe.outputs, strict=True)) + list(zip(arg_names, exe.grad_arrays, strict=True))
                compare("Train", i, pairs)
    return truth


# ---------------------------------------------------------------- environment, devices


def list_gpus() -> range:
    """The GPU ids: ``range(number of GPUs)``."""
    return range(num_gpus())


@contextlib.contextmanager
def environment(*args: Any) -> Iterator[None]:
    """Sets environment variables for the ``with`` block: ``environment(name, value)`` or
    ``environment({name: value, ...})``; a value of None unsets the variable. The old
    values come back afterwards."""
    if len(args) == 2:
        settings = {args[0]: args[1]}
    elif len(args) == 1 and isinstance(args[0], dict):
        settings = dict(args[0])
    else:
        raise ValueError("environment: expected (name, value) or a dict of name to value")
    saved = {k: os.environ.get(k) for k in settings}

    def apply(values: dict) -> None:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)

    apply(settings)
    try:
        yield
    finally:
        apply(saved)


def is_cd_run() -> bool:
    """True in a continuous-delivery run (``CD_JOB=1``)."""
    return os.environ.get("CD_JOB") == "1"


@contextlib.contextmanager
def discard_stderr() -> Iterator[None]:
    """Silences the process's standard error (file descriptor 2) for the block."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class DummyIter(_io.DataIter):
    """Yields the first batch of ``real_iter`` for ever: for timing without I/O."""

    def __init__(self, real_iter: Any):
        super().__init__()
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.batch_size = real_iter.batch_size
        self.the_batch = next(real_iter)

    def __iter__(self) -> DummyIter:
        return self

    def next(self) -> Any:
        return self.the_batch


# ---------------------------------------------------------------- data


def download(url: str, fname: str | None = None, dirname: str | None = None, overwrite: bool = False, retries: int = 5) -> str:
    """Downloads ``url`` to ``dirname/fname`` (the URL's last part by default) unless that
    file is there already; returns its path."""
    if retries <= 0:
        raise ValueError("download: retries must be at least 1")
    fname = fname or url.split("/")[-1]
    if dirname is not None:
        os.makedirs(dirname, exist_ok=True)
        fname = os.path.join(dirname, fname)
    elif os.path.dirname(fname):
        os.makedirs(os.path.dirname(fname), exist_ok=True)
    if os.path.exists(fname) and not overwrite:
        return fname
    last: Exception | None = None
    for _ in range(retries):
        try:
            with urllib.request.urlopen(url, timeout=60) as r, open(fname + ".part", "wb") as f:
                while chunk := r.read(1 << 20):
                    f.write(chunk)
            os.replace(fname + ".part", fname)
            return fname
        except OSError as e:
            last = e
    raise MXNetError(f"download: could not fetch {url} into {fname}: {last}")


_MNIST_URL = "http://data.mxnet.io/data/mnist/"
_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def get_mnist() -> dict:
    """MNIST as arrays (images float32 in [0, 1], shape (n, 1, 28, 28); labels int8),
    from ``*-ubyte.gz`` files in the current directory, downloaded if missing."""
    def read(labels: str, images: str) -> tuple[np.ndarray, np.ndarray]:
        lbl = read_mnist_labels(download(_MNIST_URL + labels)).astype(np.int8)
        img = read_mnist_images(download(_MNIST_URL + images))
        return lbl, img.reshape(img.shape[0], 1, 28, 28).astype(np.float32) / 255

    train_lbl, train_img = read("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz")
    test_lbl, test_img = read("t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz")
    return {"train_data": train_img, "train_label": train_lbl, "test_data": test_img, "test_label": test_lbl}


def get_mnist_ubyte() -> None:
    """Makes sure ``data/`` holds the four uncompressed MNIST idx files, downloading and
    unpacking MXNet's archive only if one is missing."""
    os.makedirs("data", exist_ok=True)
    if all(os.path.exists(os.path.join("data", f)) for f in _MNIST_FILES):
        return
    archive = download("http://data.mxnet.io/mxnet/data/mnist.zip", dirname="data")
    with zipfile.ZipFile(archive) as z:
        z.extractall("data")


def get_mnist_pkl() -> None:
    """Makes sure ``data/mnist.pkl.gz`` is there, downloading it if missing."""
    os.makedirs("data", exist_ok=True)
    if not os.path.exists("data/mnist.pkl.gz"):
        download("http://deeplearning.net/data/mnist/mnist.pkl.gz", dirname="data")


def get_cifar10() -> None:
    """Makes sure ``data/cifar`` holds CIFAR-10's record files, downloading them if
    missing."""
    os.makedirs("data", exist_ok=True)
    wanted = ("train.rec", "test.rec", "train.lst", "test.lst")
    if all(os.path.exists(os.path.join("data", "cifar", f)) for f in wanted):
        return
    archive = download("http://data.mxnet.io/mxnet/data/cifar10.zip", dirname="data")
    with zipfile.ZipFile(archive) as z:
        z.extractall("data")


def get_mnist_iterator(batch_size: int, input_shape: tuple, num_parts: int = 1, part_index: int = 0) -> tuple:
    """Training and validation ``MNISTIter``s over the files in ``data/`` (fetched once if
    missing), flat unless ``input_shape`` has three dimensions."""
    get_mnist_ubyte()
    common = {"input_shape": input_shape, "batch_size": batch_size, "flat": len(input_shape) != 3, "num_parts": num_parts, "part_index": part_index}
    train = _io.MNISTIter(image="data/train-images-idx3-ubyte", label="data/train-labels-idx1-ubyte", shuffle=True, **common)
    val = _io.MNISTIter(image="data/t10k-images-idx3-ubyte", label="data/t10k-labels-idx1-ubyte", **common)
    return train, val


# ---------------------------------------------------------------- random generators


def gen_buckets_probs_with_ppf(ppf: Callable, nbuckets: int) -> tuple[list, list]:
    """``nbuckets`` buckets of equal probability from a distribution's inverse CDF."""
    probs = [1.0 / nbuckets] * nbuckets
    edges = [ppf(i / nbuckets) for i in range(nbuckets + 1)]
    return [(edges[i], edges[i + 1]) for i in range(nbuckets)], probs


def mean_check(generator: Callable, mu: float, sigma: float, nsamples: int = 1000000) -> bool:
    """True if the sample mean of ``generator(nsamples)`` is within 3 standard errors of
    ``mu``."""
    samples = np.asarray(generator(nsamples), dtype=np.float64)
    return bool(abs(samples.mean() - mu) < 3 * sigma / np.sqrt(nsamples))


def var_check(generator: Callable, sigma: float, nsamples: int = 1000000) -> bool:
    """True if the sample variance of ``generator(nsamples)`` is within 3 of its standard
    errors of ``sigma ** 2`` (normal samples assumed)."""
    samples = np.asarray(generator(nsamples), dtype=np.float64)
    return bool(abs(samples.var() - sigma**2) < 3 * np.sqrt(2 * sigma**4 / (nsamples - 1)))


def chi_square_check(generator: Callable, buckets: list, probs: list, nsamples: int = 1000000) -> tuple[float, np.ndarray, np.ndarray]:
    """Pearson's chi-square test of ``generator(nsamples)`` against bucket probabilities:
    ``buckets`` are ``(low, high)`` ranges or discrete values. Returns the p-value and
    the observed and expected counts (needs scipy)."""
    from scipy import stats  # noqa: PLC0415 - optional, as in MXNet

    samples = np.asarray(generator(nsamples))
    if isinstance(buckets[0], (list, tuple)):
        observed = np.array([np.count_nonzero((samples >= lo) & (samples < hi)) for lo, hi in buckets])
    else:
        observed = np.array([np.count_nonzero(samples == v) for v in buckets])
    expected = np.asarray(probs) * nsamples
    _, p = stats.chisquare(observed, expected)
    return float(p), observed, expected


def verify_generator(
    generator: Callable, buckets: list, probs: list, nsamples: int = 1000000, nrepeat: int = 5, success_rate: float = 0.2, alpha: float = 0.05
) -> list:
    """Repeats the chi-square test; raises ``AssertionError`` unless at least
    ``success_rate`` of the ``nrepeat`` p-values exceed ``alpha``."""
    pvalues = [chi_square_check(generator, buckets, probs, nsamples)[0] for _ in range(nrepeat)]
    passed = sum(p > alpha for p in pvalues)
    if passed < success_rate * nrepeat:
        raise AssertionError(f"Generator test fails: p-values {pvalues}, {passed} of {nrepeat} above {alpha}")
    return pvalues


def new_matrix_with_real_eigvals_2d(n: int) -> np.ndarray:
    """A random ``n × n`` matrix with real eigenvalues."""
    shift = np.random.rand() * 2 - 1
    q = new_orthonormal_matrix_2d(n)
    return q @ np.diag(np.random.rand(n) + shift) @ np.linalg.inv(q)


def new_orthonormal_matrix_2d(n: int) -> np.ndarray:
    """A random ``n × n`` orthonormal matrix."""
    q, _ = np.linalg.qr(np.random.randn(n, n))
    return q


def new_sym_matrix_with_real_eigvals_2d(n: int) -> np.ndarray:
    """A random symmetric ``n × n`` matrix."""
    q = new_orthonormal_matrix_2d(n)
    return q @ np.diag(np.random.rand(n) * 2 - 1) @ q.T


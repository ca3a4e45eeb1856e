"""Imperative automatic differentiation, as MXNet 1.x's ``mx.autograd``.

Ops run inside ``record()`` are recorded on the arrays they produce; ``backward`` then
computes the gradients of the marked variables (``attach_grad``/``mark_variables``) from
the arrays saved in the forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _core
from .base import MXNetNotImplementedError, MXNetTypeError, MXNetValueError
from .ndarray import NDArray
from .symbol import Symbol

# No ``__all__``: as in MXNet, ``from mxnet.autograd import *`` also gives NDArray and
# Symbol, which scripts and MXNet's own tests rely on.


def set_recording(is_recording: bool) -> bool:  # noqa: FBT001
    """Sets recording on this thread; returns the previous setting."""
    return _core.autograd_set_recording(bool(is_recording))


def set_training(train_mode: bool) -> bool:  # noqa: FBT001
    """Sets training mode on this thread; returns the previous setting."""
    return _core.autograd_set_training(bool(train_mode))


def is_recording() -> bool:
    """True while ops run on this thread are recorded for ``backward``."""
    return _core.autograd_is_recording()


def is_training() -> bool:
    """True while ops run on this thread in training mode (dropout, batch statistics)."""
    return _core.autograd_is_training()


class _RecordingStateScope:
    """Sets recording and training mode inside a ``with`` block, restoring them after;
    ``None`` leaves a setting as it is."""

    def __init__(self, is_record: bool | None, train_mode: bool | None) -> None:
        self._enter_is_record = is_record
        self._enter_train_mode = train_mode
        self._prev_is_record: bool | None = None
        self._prev_train_mode: bool | None = None

    def __enter__(self) -> None:
        if self._enter_is_record is not None:
            self._prev_is_record = set_recording(self._enter_is_record)
        if self._enter_train_mode is not None:
            self._prev_train_mode = set_training(self._enter_train_mode)

    def __exit__(self, *exc: Any) -> None:
        if self._enter_is_record is not None and self._prev_is_record != self._enter_is_record:
            set_recording(bool(self._prev_is_record))
        if self._enter_train_mode is not None and self._prev_train_mode != self._enter_train_mode:
            set_training(bool(self._prev_train_mode))


def record(train_mode: bool = True) -> _RecordingStateScope:  # noqa: FBT001, FBT002
    """A scope that records ops for ``backward``, in training mode unless told otherwise."""
    return _RecordingStateScope(True, train_mode)


def pause(train_mode: bool = False) -> _RecordingStateScope:  # noqa: FBT001, FBT002
    """A scope that stops recording (inside ``record``), in predict mode by default."""
    return _RecordingStateScope(False, train_mode)


def train_mode() -> _RecordingStateScope:
    """A scope in which ops run in training mode, recording left as it is."""
    return _RecordingStateScope(None, True)


def predict_mode() -> _RecordingStateScope:
    """A scope in which ops run in predict mode, recording left as it is."""
    return _RecordingStateScope(None, False)


def _as_list(x: Any) -> list[Any]:
    return [x] if isinstance(x, NDArray) else list(x)


def mark_variables(variables: Any, gradients: Any, grad_reqs: Any = "write") -> None:
    """Marks arrays as variables whose gradients ``backward`` writes into ``gradients``
    (as ``attach_grad`` does, with buffers of the caller's choice)."""
    if isinstance(variables, NDArray):
        if not isinstance(gradients, NDArray):
            raise MXNetValueError("mark_variables: the gradient of one variable must be an NDArray")
        variables, gradients = [variables], [gradients]
    variables, gradients = list(variables), list(gradients)
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    _core.autograd_mark_variables(variables, gradients, reqs)


def _parse_head(heads: Any, head_grads: Any) -> tuple[list[NDArray], list[NDArray | None]]:
    heads = _as_list(heads)
    if head_grads is None:
        return heads, []
    head_grads = _as_list(head_grads)
    if len(heads) != len(head_grads):
        raise MXNetValueError("heads and head_grads must be lists of the same length")
    return heads, head_grads


def backward(
    heads: Any,
    head_grads: Any = None,
    retain_graph: bool = False,  # noqa: FBT001, FBT002
    train_mode: bool = True,  # noqa: FBT001, FBT002
) -> None:
    """Computes the gradients of ``heads`` with respect to the marked variables, writing
    them into the variables' gradient buffers."""
    hs, hg = _parse_head(heads, head_grads)
    _core.autograd_backward(hs, hg, None, bool(retain_graph), False, bool(train_mode))


def grad(
    heads: Any,
    variables: Any,
    head_grads: Any = None,
    retain_graph: bool | None = None,  # noqa: FBT001
    create_graph: bool = False,  # noqa: FBT001, FBT002
    train_mode: bool = True,  # noqa: FBT001, FBT002
) -> Any:
    """The gradients of ``heads`` with respect to ``variables``, as a list of new arrays
    (the variables' buffers are left alone), also for a single variable as MXNet gives.
    ``create_graph`` records the computation, for gradients of gradients;
    ``retain_graph`` defaults to ``create_graph``."""
    hs, hg = _parse_head(heads, head_grads)
    vs = _as_list(variables)
    if not vs:
        raise MXNetValueError("variables cannot be an empty list.")
    retain = create_graph if retain_graph is None else retain_graph
    return _core.autograd_backward(hs, hg, vs, bool(retain), bool(create_graph), bool(train_mode))


def get_symbol(x: NDArray) -> Symbol:
    """The computation recorded to produce ``x``, as a Symbol whose variables are the
    arrays it started from.

    Needs the core to expose the recorded graph (``_core.autograd_get_symbol``, the
    graph's JSON); raises ``MXNetNotImplementedError`` where it does not.
    """
    if not isinstance(x, NDArray):
        raise MXNetTypeError(
            f"get_symbol: Invalid argument type, expecting {NDArray}, got {type(x)}"
        )
    export = getattr(_core, "autograd_get_symbol", None)
    if export is None:
        raise MXNetNotImplementedError(
            "get_symbol: this build of rsmx cannot export the recorded graph"
        )
    return Symbol(_core.SymbolHandle.from_json(export(x)))


class Function:
    """A differentiable function written with NDArray operations: ``forward`` computes
    the outputs (not recorded), ``backward`` their inputs' gradients from the outputs'.

    An instance may be called once."""

    def __init__(self) -> None:
        self._used = False
        self.saved_tensors: tuple[Any, ...] = ()

    def save_for_backward(self, *args: Any) -> None:
        """Keeps arrays for ``backward`` in ``saved_tensors``."""
        self.saved_tensors = args

    def __call__(self, *inputs: NDArray) -> Any:
        if self._used:
            raise MXNetValueError(
                "Each Function instance can only be called once. Please create another instance."
            )
        self._used = True
        prev = set_recording(False)
        try:
            outputs = self.forward(*inputs)
        finally:
            set_recording(prev)
        if not prev:
            return outputs
        outs = [outputs] if isinstance(outputs, NDArray) else list(outputs)
        n_in = len(inputs)

        def run_backward(output_grads: Sequence[NDArray]) -> list[NDArray | None]:
            rets = self.backward(*output_grads)
            if isinstance(rets, NDArray):
                rets = (rets,)
            rets = list(rets)
            if len(rets) != n_in:
                raise MXNetValueError(
                    f"{type(self).__name__}.backward must return exactly the same number of "
                    f"NDArrays as the number of NDArrays arguments to forward. "
                    f"Expecting {n_in} got {len(rets)}"
                )
            for r in rets:
                if not isinstance(r, NDArray):
                    raise MXNetValueError(
                        f"autograd.Function.backward must return NDArrays, not {type(r)}"
                    )
            return rets

        _core.autograd_record_function(run_backward, list(inputs), outs)
        return outputs

    def forward(self, *inputs: Any) -> Any:
        """Forward computation."""
        raise NotImplementedError

    def backward(self, *output_grads: Any) -> Any:
        """Backward computation: as many gradients as ``forward`` took inputs."""
        raise NotImplementedError

"""The symbolic recurrent cells of ``mx.rnn``: one-step cells (``RNNCell``, ``LSTMCell``,
``GRUCell`` and their convolutional forms), the fused ``FusedRNNCell`` built on the ``RNN``
operator, and the cells that combine or modify others (``SequentialRNNCell``,
``BidirectionalCell``, ``DropoutCell``, ``ZoneoutCell``, ``ResidualCell``).

A cell builds symbols: ``cell(inputs, states)`` adds one time step to a graph and
``cell.unroll(length, inputs)`` adds ``length`` of them. Node and parameter names follow
MXNet 1.9.1 exactly (``<prefix>t<step>_i2h``, ``<prefix>begin_state_<n>``, ...), so
unrolled graphs serialize to MXNet's JSON and checkpoints move between the two.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from .. import initializer as init
from .. import ndarray, symbol
from ..base import MXNetNotImplementedError, MXNetValueError, numeric_types

__all__ = [
    "RNNParams",
    "BaseRNNCell",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "FusedRNNCell",
    "SequentialRNNCell",
    "DropoutCell",
    "ModifierCell",
    "ZoneoutCell",
    "ResidualCell",
    "BidirectionalCell",
    "BaseConvRNNCell",
    "ConvRNNCell",
    "ConvLSTMCell",
    "ConvGRUCell",
]


class RNNUsageError(MXNetValueError, AssertionError):
    """A cell used in a way it does not support.

    MXNet checks these cases with ``assert``; the error is also an ``AssertionError`` so
    that code written against MXNet that catches one keeps working.
    """


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise RNNUsageError(message)


def _time_axis(layout: str) -> int:
    """The position of ``'T'`` in ``layout``; an error when there is none."""
    _require(
        isinstance(layout, str) and layout.count("T") == 1,
        f"invalid layout {layout!r}: it must name the time axis 'T' once, e.g. 'NTC' or 'TNC'",
    )
    return layout.find("T")


def _normalize_sequence(
    length: int | None, inputs: Any, layout: str, merge: bool | None, in_layout: str | None = None
) -> tuple[Any, int]:
    """Brings a sequence to the wanted form and gives it with its time axis.

    ``inputs`` is a Symbol with a time axis or a list of per-step Symbols. ``merge=False``
    wants a list (a Symbol is split along time), ``merge=True`` a single Symbol (a list
    is stacked along time), and ``merge=None`` keeps whichever form it is.
    """
    _require(inputs is not None, "unroll(inputs=None) is not supported; create the input symbols first")
    axis = _time_axis(layout)
    in_axis = _time_axis(in_layout) if in_layout is not None else axis
    if isinstance(inputs, symbol.Symbol):
        if merge is False:
            _require(
                len(inputs.list_outputs()) == 1,
                "unroll does not take a grouped symbol as input; pass list(inputs) or a "
                "single-output symbol to split",
            )
            inputs = list(symbol.split(inputs, axis=in_axis, num_outputs=length, squeeze_axis=1))
    else:
        inputs = list(inputs)
        _require(
            length is None or len(inputs) == length,
            f"unroll was given {len(inputs)} input symbols for a length of {length}",
        )
        if merge is True:
            steps = [symbol.expand_dims(step, axis=axis) for step in inputs]
            inputs = symbol.Concat(*steps, dim=axis)
            in_axis = axis
    if isinstance(inputs, symbol.Symbol) and axis != in_axis:
        inputs = symbol.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis


def _flatten_states(cells: list[BaseRNNCell], what: str) -> list:
    return sum((getattr(c, what) for c in cells), [])


class RNNParams:
    """The parameter variables of one or more cells, created on first use.

    Cells given the same ``RNNParams`` share their weights.

    Parameters
    ----------
    prefix : str, optional
        Put before the name of every variable this container creates.
    """

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._params: dict[str, symbol.Symbol] = {}

    def get(self, name: str, **kwargs: Any) -> symbol.Symbol:
        """The variable ``prefix + name``, created with ``symbol.Variable(**kwargs)`` the
        first time it is asked for.

        Parameters
        ----------
        name : str
            The variable's name, without the prefix.
        **kwargs
            Passed on to ``symbol.Variable`` (``init``, ``shape``, ...) on creation.
        """
        full = self._prefix + name
        if full not in self._params:
            self._params[full] = symbol.Variable(full, **kwargs)
        return self._params[full]


class BaseRNNCell:
    """The base of all recurrent cells.

    Parameters
    ----------
    prefix : str, optional
        Put before the names of the nodes the cell creates, and of its parameters when
        ``params`` is None.
    params : RNNParams, optional
        Parameters to share with other cells; the cell makes its own when None.
    """

    def __init__(self, prefix: str = "", params: RNNParams | None = None) -> None:
        self._own_params = params is None
        self._params = RNNParams(prefix) if params is None else params
        self._prefix = prefix
        self._modified = False
        self.reset()

    def reset(self) -> None:
        """Restarts step and state numbering, before building another graph."""
        self._init_counter = -1
        self._counter = -1
        for cell in getattr(self, "_cells", ()):
            cell.reset()

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        """Adds one time step to the graph.

        Parameters
        ----------
        inputs : Symbol
            The step's input, ``(batch_size, ...)``.
        states : list of Symbol
            The states from the previous step, or from ``begin_state()``.

        Returns
        -------
        output : Symbol
            The step's output.
        states : list of Symbol
            The states for the next step, in the form ``begin_state()`` gives.
        """
        raise MXNetNotImplementedError(f"{type(self).__name__} does not define a step")

    @property
    def params(self) -> RNNParams:
        """The cell's parameter container. Asking for it marks the parameters as shared."""
        self._own_params = False
        return self._params

    @property
    def state_info(self) -> list:
        """One dict per state: its ``shape`` (0 for the batch size) and ``__layout__``."""
        raise MXNetNotImplementedError(f"{type(self).__name__} does not define its states")

    @property
    def state_shape(self) -> list:
        """The shape of each state (0 for the batch size)."""
        return [info["shape"] for info in self.state_info]

    @property
    def _gate_names(self) -> Any:
        """The suffixes of the gates stacked in the i2h and h2h weights (none here)."""
        return ()

    def begin_state(self, func: Callable[..., symbol.Symbol] = symbol.zeros, **kwargs: Any) -> list:
        """The states for the first step, one symbol per state.

        Parameters
        ----------
        func : callable, optional
            Makes each state: ``symbol.zeros`` (the default), ``symbol.uniform``, or
            ``symbol.Variable`` to feed the states as inputs. It is called with
            ``name='<prefix>begin_state_<n>'``, the state's ``shape`` and ``__layout__``,
            and ``kwargs``.
        **kwargs
            More arguments for ``func`` (``dtype``, ``low``, ...).

        Returns
        -------
        list of Symbol
        """
        _require(
            not self._modified,
            "a cell wrapped in a modifier cell (e.g. ZoneoutCell) cannot be used directly; "
            "use the modifier cell instead",
        )
        states = []
        for info in self.state_info:
            self._init_counter += 1
            if info is not None:
                # Later states see the earlier states' entries too, as in MXNet.
                kwargs.update(info)
            states.append(func(name=f"{self._prefix}begin_state_{self._init_counter}", **kwargs))
        return states

    def unpack_weights(self, args: dict) -> dict:
        """Splits the cell's stacked gate weights into one array per gate.

        ``<prefix>i2h_weight`` becomes ``<prefix>i2h_i_weight``, ``<prefix>i2h_f_weight``,
        ... (the suffixes are the cell's gate names), and likewise for biases and h2h.

        Parameters
        ----------
        args : dict of str to NDArray
            Parameters holding the stacked arrays, e.g. ``Module.get_params()[0]``.

        Returns
        -------
        dict of str to NDArray
            A new dict with the per-gate arrays in place of the stacked ones.
        """
        args = args.copy()
        gates = self._gate_names
        if not gates:
            return args
        h = self._num_hidden
        for group in ("i2h", "h2h"):
            weight = args.pop(f"{self._prefix}{group}_weight")
            bias = args.pop(f"{self._prefix}{group}_bias")
            for j, gate in enumerate(gates):
                args[f"{self._prefix}{group}{gate}_weight"] = weight[j * h : (j + 1) * h].copy()
                args[f"{self._prefix}{group}{gate}_bias"] = bias[j * h : (j + 1) * h].copy()
        return args

    def pack_weights(self, args: dict) -> dict:
        """Stacks per-gate arrays back into the cell's weights; undoes ``unpack_weights``.

        Parameters
        ----------
        args : dict of str to NDArray
            Parameters holding the per-gate arrays.

        Returns
        -------
        dict of str to NDArray
            A new dict with the stacked arrays in place of the per-gate ones.
        """
        args = args.copy()
        gates = self._gate_names
        if not gates:
            return args
        for group in ("i2h", "h2h"):
            for kind in ("weight", "bias"):
                parts = [args.pop(f"{self._prefix}{group}{gate}_{kind}") for gate in gates]
                args[f"{self._prefix}{group}_{kind}"] = ndarray.concatenate(parts)
        return args

    def unroll(
        self,
        length: int,
        inputs: Any,
        begin_state: list | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
    ) -> tuple[Any, list]:
        """Adds ``length`` time steps to the graph.

        Parameters
        ----------
        length : int
            The number of steps.
        inputs : Symbol or list of Symbol
            One Symbol with a time axis as ``layout`` says (``(batch_size, length, ...)``
            for ``'NTC'``, ``(length, batch_size, ...)`` for ``'TNC'``), or ``length``
            Symbols of shape ``(batch_size, ...)``.
        begin_state : list of Symbol, optional
            The first step's states; ``begin_state()`` when None.
        layout : str, optional
            ``'NTC'`` or ``'TNC'``: where the time axis is, for inputs and merged outputs.
        merge_outputs : bool, optional
            True for one output Symbol with a time axis, False for a list of per-step
            Symbols, None for whichever the cell makes most simply.

        Returns
        -------
        outputs : Symbol or list of Symbol
        states : list of Symbol
            The states after the last step.
        """
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, False)
        states = self.begin_state() if begin_state is None else begin_state
        outputs = []
        for step in range(length):
            output, states = self(inputs[step], states)
            outputs.append(output)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, inputs: symbol.Symbol, activation: Any, **kwargs: Any) -> symbol.Symbol:
        """``activation`` applied to ``inputs``: an ``Activation`` node when it is a string
        (its ``act_type``), else ``activation(inputs, **kwargs)``."""
        if isinstance(activation, str):
            return symbol.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs, **kwargs)


class RNNCell(BaseRNNCell):
    """The simple recurrent cell: ``out = act(W_i x + b_i + W_h h + b_h)``.

    Parameters
    ----------
    num_hidden : int
        The size of the output and the state.
    activation : str or callable, optional
        ``'tanh'`` (the default), ``'relu'``, ... or a function of a Symbol.
    prefix : str, optional
        Name prefix, ``'rnn_'`` by default.
    params : RNNParams, optional
        Parameters to share.
    """

    def __init__(
        self, num_hidden: int, activation: Any = "tanh", prefix: str = "rnn_", params: RNNParams | None = None
    ) -> None:
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._activation = activation
        self._iW = self.params.get("i2h_weight")
        self._iB = self.params.get("i2h_bias")
        self._hW = self.params.get("h2h_weight")
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self) -> list:
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self) -> tuple:
        return ("",)

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        i2h = symbol.FullyConnected(
            data=inputs, weight=self._iW, bias=self._iB, num_hidden=self._num_hidden, name=f"{name}i2h"
        )
        h2h = symbol.FullyConnected(
            data=states[0], weight=self._hW, bias=self._hB, num_hidden=self._num_hidden, name=f"{name}h2h"
        )
        output = self._get_activation(i2h + h2h, self._activation, name=f"{name}out")
        return output, [output]


class LSTMCell(BaseRNNCell):
    """The long short-term memory cell, gates in the order input, forget, cell, output.

    Parameters
    ----------
    num_hidden : int
        The size of the output and of each state.
    prefix : str, optional
        Name prefix, ``'lstm_'`` by default.
    params : RNNParams, optional
        Parameters to share.
    forget_bias : float, optional
        The forget gate's initial bias (through an ``LSTMBias`` initializer on
        ``i2h_bias``), 1.0 by default.
    """

    def __init__(
        self, num_hidden: int, prefix: str = "lstm_", params: RNNParams | None = None, forget_bias: float = 1.0
    ) -> None:
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW = self.params.get("i2h_weight")
        self._hW = self.params.get("h2h_weight")
        self._iB = self.params.get("i2h_bias", init=init.LSTMBias(forget_bias=forget_bias))
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self) -> list:
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"} for _ in range(2)]

    @property
    def _gate_names(self) -> list:
        return ["_i", "_f", "_c", "_o"]

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        h4 = self._num_hidden * 4
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB, num_hidden=h4, name=f"{name}i2h")
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB, num_hidden=h4, name=f"{name}h2h")
        gates = symbol.SliceChannel(i2h + h2h, num_outputs=4, name=f"{name}slice")
        in_gate = symbol.Activation(gates[0], act_type="sigmoid", name=f"{name}i")
        forget_gate = symbol.Activation(gates[1], act_type="sigmoid", name=f"{name}f")
        in_transform = symbol.Activation(gates[2], act_type="tanh", name=f"{name}c")
        out_gate = symbol.Activation(gates[3], act_type="sigmoid", name=f"{name}o")
        next_c = symbol._internal._plus(forget_gate * states[1], in_gate * in_transform, name=f"{name}state")
        next_h = symbol._internal._mul(out_gate, symbol.Activation(next_c, act_type="tanh"), name=f"{name}out")
        return next_h, [next_h, next_c]


class GRUCell(BaseRNNCell):
    """The gated recurrent unit in cuDNN's form (the reset gate scales ``W_h h + b_h``),
    gates in the order reset, update, new.

    Parameters
    ----------
    num_hidden : int
        The size of the output and the state.
    prefix : str, optional
        Name prefix, ``'gru_'`` by default.
    params : RNNParams, optional
        Parameters to share.
    """

    def __init__(self, num_hidden: int, prefix: str = "gru_", params: RNNParams | None = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW = self.params.get("i2h_weight")
        self._iB = self.params.get("i2h_bias")
        self._hW = self.params.get("h2h_weight")
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self) -> list:
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self) -> list:
        return ["_r", "_z", "_o"]

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        self._counter += 1
        # MXNet names these nodes '<prefix>t<n>__i2h', with a double underscore.
        name = f"{self._prefix}t{self._counter}_"
        prev_h = states[0]
        h3 = self._num_hidden * 3
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB, num_hidden=h3, name=f"{name}_i2h")
        h2h = symbol.FullyConnected(data=prev_h, weight=self._hW, bias=self._hB, num_hidden=h3, name=f"{name}_h2h")
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, name=f"{name}_i2h_slice")
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, name=f"{name}_h2h_slice")
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type="sigmoid", name=f"{name}_r_act")
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type="sigmoid", name=f"{name}_z_act")
        candidate = symbol.Activation(i2h + reset_gate * h2h, act_type="tanh", name=f"{name}_h_act")
        next_h = symbol._internal._plus(
            (1.0 - update_gate) * candidate, update_gate * prev_h, name=f"{name}out"
        )
        return next_h, [next_h]


_FUSED_GATES = {
    "rnn_relu": [""],
    "rnn_tanh": [""],
    "lstm": ["_i", "_f", "_c", "_o"],
    "gru": ["_r", "_z", "_o"],
}


class FusedRNNCell(BaseRNNCell):
    """All layers and steps of an RNN in one ``RNN`` operator node.

    Its parameters are one flat vector, ``<prefix>parameters``, in MXNet's layout: for
    each layer and direction the i2h then h2h weights of every gate, then all the biases
    in the same order. ``unpack_weights`` names the pieces as the unfused cells of
    ``unfuse()`` do (``<prefix>l0_i2h_i_weight``, ``<prefix>r1_h2h_f_bias``, ...).

    Parameters
    ----------
    num_hidden : int
        The size of each layer's state.
    num_layers : int, optional
        The number of stacked layers.
    mode : str, optional
        ``'rnn_relu'``, ``'rnn_tanh'``, ``'lstm'`` (the default) or ``'gru'``.
    bidirectional : bool, optional
        Whether each layer also runs backwards in time; outputs are then twice as wide.
    dropout : float, optional
        Dropout between layers, in training.
    get_next_state : bool, optional
        Whether ``unroll`` returns the final states.
    forget_bias : float, optional
        The initial bias of LSTM forget gates.
    prefix : str, optional
        Name prefix, ``'<mode>_'`` by default.
    params : RNNParams, optional
        Parameters to share.
    """

    def __init__(
        self,
        num_hidden: int,
        num_layers: int = 1,
        mode: str = "lstm",
        bidirectional: bool = False,
        dropout: float = 0.0,
        get_next_state: bool = False,
        forget_bias: float = 1.0,
        prefix: str | None = None,
        params: RNNParams | None = None,
    ) -> None:
        if mode not in _FUSED_GATES:
            raise MXNetValueError(f"FusedRNNCell: unknown mode {mode!r}; use one of {sorted(_FUSED_GATES)}")
        if prefix is None:
            prefix = f"{mode}_"
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._dropout = dropout
        self._get_next_state = get_next_state
        self._directions = ["l", "r"] if bidirectional else ["l"]
        initializer = init.FusedRNN(None, num_hidden, num_layers, mode, bidirectional, forget_bias)
        self._parameter = self.params.get("parameters", init=initializer)

    @property
    def state_info(self) -> list:
        n_states = 2 if self._mode == "lstm" else 1
        shape = (len(self._directions) * self._num_layers, 0, self._num_hidden)
        return [{"shape": shape, "__layout__": "LNC"} for _ in range(n_states)]

    @property
    def _gate_names(self) -> list:
        return _FUSED_GATES[self._mode]

    @property
    def _num_gates(self) -> int:
        return len(self._gate_names)

    def _layout(self, num_input: int) -> Iterator[tuple[str, tuple]]:
        """``(name, shape)`` of each piece of the flat parameter vector, in order."""
        h = self._num_hidden
        b = len(self._directions)
        pieces = [(layer, d) for layer in range(self._num_layers) for d in self._directions]
        for layer, d in pieces:
            width = num_input if layer == 0 else b * h
            for group, cols in (("i2h", width), ("h2h", h)):
                for gate in self._gate_names:
                    yield f"{self._prefix}{d}{layer}_{group}{gate}_weight", (h, cols)
        for layer, d in pieces:
            for group in ("i2h", "h2h"):
                for gate in self._gate_names:
                    yield f"{self._prefix}{d}{layer}_{group}{gate}_bias", (h,)

    def _param_size(self, num_input: int) -> int:
        h, b, m = self._num_hidden, len(self._directions), self._num_gates
        return b * m * h * (num_input + h + 2) + (self._num_layers - 1) * b * m * h * (b * h + h + 2)

    def unpack_weights(self, args: dict) -> dict:
        args = args.copy()
        arr = args.pop(self._parameter.name)
        h, b, m = self._num_hidden, len(self._directions), self._num_gates
        # Solve _param_size(num_input) == arr.size for num_input.
        num_input = arr.size // (b * m * h) - (self._num_layers - 1) * (b * h + h + 2) - h - 2
        if num_input <= 0 or self._param_size(num_input) != arr.size:
            raise MXNetValueError(
                f"FusedRNNCell: {arr.size} parameters do not fit {self._num_layers} {self._mode} "
                f"layer(s) of {h} hidden units{' (bidirectional)' if b == 2 else ''}"
            )
        flat = arr.reshape((-1,))
        offset = 0
        for name, shape in self._layout(num_input):
            size = functools.reduce(lambda x, y: x * y, shape)
            args[name] = flat[offset : offset + size].reshape(shape).copy()
            offset += size
        return args

    def pack_weights(self, args: dict) -> dict:
        args = args.copy()
        first = args[f"{self._prefix}l0_i2h{self._gate_names[0]}_weight"]
        num_input = first.shape[1]
        parts = []
        for name, shape in self._layout(num_input):
            piece = args.pop(name)
            if tuple(piece.shape) != shape:
                raise MXNetValueError(f"FusedRNNCell: {name} has shape {piece.shape}, expected {shape}")
            parts.append(piece.reshape((-1,)).as_in_context(first.context).astype(first.dtype))
        args[self._parameter.name] = ndarray.concatenate(parts)
        return args

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        raise MXNetNotImplementedError("FusedRNNCell cannot be stepped; use unroll")

    def unroll(
        self,
        length: int,
        inputs: Any,
        begin_state: list | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
    ) -> tuple[Any, list]:
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, True)
        _require(axis in (0, 1), f"FusedRNNCell: unsupported layout {layout!r}; use 'TNC' or 'NTC'")
        if axis == 1:
            warnings.warn("NTC layout detected. Consider using TNC for FusedRNNCell for faster speed", stacklevel=2)
            inputs = symbol.swapaxes(inputs, dim1=0, dim2=1)
        if begin_state is None:
            begin_state = self.begin_state()
        states = {"state": begin_state[0]}
        if self._mode == "lstm":
            states["state_cell"] = begin_state[1]

        rnn = symbol.RNN(
            data=inputs,
            parameters=self._parameter,
            state_size=self._num_hidden,
            num_layers=self._num_layers,
            bidirectional=self._bidirectional,
            p=self._dropout,
            state_outputs=self._get_next_state,
            mode=self._mode,
            name=self._prefix + "rnn",
            **states,
        )
        if not self._get_next_state:
            outputs, next_states = rnn, []
        else:
            n_states = 2 if self._mode == "lstm" else 1
            next_states = [rnn[k] for k in range(1, n_states + 1)]
            for state in next_states:
                state._set_attr(__layout__="LNC")
            outputs = rnn[0]

        if axis == 1:
            outputs = symbol.swapaxes(outputs, dim1=0, dim2=1)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, next_states

    def unfuse(self) -> SequentialRNNCell:
        """The same network as a stack of step cells (which can be stepped, and run where
        the fused operator cannot), with parameter names matching ``unpack_weights``.

        Returns
        -------
        SequentialRNNCell
        """

        def make(cell_prefix: str) -> BaseRNNCell:
            if self._mode == "lstm":
                return LSTMCell(self._num_hidden, prefix=cell_prefix)
            if self._mode == "gru":
                return GRUCell(self._num_hidden, prefix=cell_prefix)
            return RNNCell(self._num_hidden, activation=self._mode[4:], prefix=cell_prefix)

        stack = SequentialRNNCell()
        p = self._prefix
        for i in range(self._num_layers):
            if self._bidirectional:
                stack.add(BidirectionalCell(make(f"{p}l{i}_"), make(f"{p}r{i}_"), output_prefix=f"{p}bi_l{i}_"))
            else:
                stack.add(make(f"{p}l{i}_"))
            if self._dropout > 0 and i != self._num_layers - 1:
                stack.add(DropoutCell(self._dropout, prefix=f"{p}_dropout{i}_"))
        return stack


class SequentialRNNCell(BaseRNNCell):
    """Cells stacked in order: each one's output is the next one's input.

    Parameters
    ----------
    params : RNNParams, optional
        Parameters for all the stacked cells (which must then have their own).
    """

    def __init__(self, params: RNNParams | None = None) -> None:
        super().__init__(prefix="", params=params)
        self._override_cell_params = params is not None
        self._cells: list[BaseRNNCell] = []

    def add(self, cell: BaseRNNCell) -> None:
        """Puts ``cell`` on top of the stack.

        Parameters
        ----------
        cell : BaseRNNCell
            The cell; it takes the previous cell's output (or the inputs, for the first).
        """
        self._cells.append(cell)
        if self._override_cell_params:
            _require(cell._own_params, "give params to the SequentialRNNCell or to its cells, not both")
            cell.params._params.update(self.params._params)
        self.params._params.update(cell.params._params)

    @property
    def state_info(self) -> list:
        return _flatten_states(self._cells, "state_info")

    def begin_state(self, func: Callable[..., symbol.Symbol] | None = None, **kwargs: Any) -> list:
        _require(
            not self._modified,
            "a cell wrapped in a modifier cell (e.g. ZoneoutCell) cannot be used directly; "
            "use the modifier cell instead",
        )
        if func is not None:
            kwargs["func"] = func
        return sum((cell.begin_state(**kwargs) for cell in self._cells), [])

    def unpack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        self._counter += 1
        next_states: list = []
        p = 0
        for cell in self._cells:
            _require(not isinstance(cell, BidirectionalCell), "a stack with a BidirectionalCell cannot be stepped")
            n = len(cell.state_info)
            inputs, state = cell(inputs, states[p : p + n])
            p += n
            next_states += state
        return inputs, next_states

    def unroll(
        self,
        length: int,
        inputs: Any,
        begin_state: list | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
    ) -> tuple[Any, list]:
        self.reset()
        if begin_state is None:
            begin_state = self.begin_state()
        p = 0
        next_states: list = []
        last = len(self._cells) - 1
        for i, cell in enumerate(self._cells):
            n = len(cell.state_info)
            inputs, states = cell.unroll(
                length,
                inputs=inputs,
                begin_state=begin_state[p : p + n],
                layout=layout,
                merge_outputs=merge_outputs if i == last else None,
            )
            p += n
            next_states.extend(states)
        return inputs, next_states


class DropoutCell(BaseRNNCell):
    """Dropout on the inputs; no states, no parameters.

    Parameters
    ----------
    dropout : float
        The fraction of elements dropped in training.
    prefix : str, optional
        Name prefix, ``'dropout_'`` by default.
    params : RNNParams, optional
        Unused; for a uniform signature.
    """

    def __init__(self, dropout: float, prefix: str = "dropout_", params: RNNParams | None = None) -> None:
        super().__init__(prefix, params)
        _require(isinstance(dropout, numeric_types), f"dropout probability must be a number, got {dropout!r}")
        self.dropout = dropout

    @property
    def state_info(self) -> list:
        return []

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        if self.dropout > 0:
            inputs = symbol.Dropout(data=inputs, p=self.dropout)
        return inputs, states

    def unroll(
        self,
        length: int,
        inputs: Any,
        begin_state: list | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
    ) -> tuple[Any, list]:
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, symbol.Symbol):
            # One Dropout node over the whole sequence.
            return self(inputs, [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout, merge_outputs=merge_outputs)


class ModifierCell(BaseRNNCell):
    """The base of cells that wrap another cell and change what it computes.

    Once wrapped, the base cell is used through the modifier only.

    Parameters
    ----------
    base_cell : BaseRNNCell
        The wrapped cell.
    """

    def __init__(self, base_cell: BaseRNNCell) -> None:
        super().__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self) -> RNNParams:
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self) -> list:
        return self.base_cell.state_info

    def begin_state(
        self, init_sym: Callable[..., symbol.Symbol] = symbol.zeros, func: Callable | None = None, **kwargs: Any
    ) -> list:
        """The base cell's ``begin_state``; the function may be given as ``init_sym`` (as
        MXNet names it here) or ``func``."""
        _require(
            not self._modified,
            "a cell wrapped in a modifier cell (e.g. ZoneoutCell) cannot be used directly; "
            "use the modifier cell instead",
        )
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(func if func is not None else init_sym, **kwargs)
        finally:
            self.base_cell._modified = True

    def unpack_weights(self, args: dict) -> dict:
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args: dict) -> dict:
        return self.base_cell.pack_weights(args)

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        raise MXNetNotImplementedError(f"{type(self).__name__} does not define a step")


def _has_bidirectional(cell: BaseRNNCell) -> bool:
    if isinstance(cell, BidirectionalCell):
        return True
    return any(_has_bidirectional(c) for c in getattr(cell, "_cells", ()))


class ZoneoutCell(ModifierCell):
    """Zoneout on a cell: in training, each output and state element keeps its previous
    value with the given probability.

    Parameters
    ----------
    base_cell : BaseRNNCell
        The cell; not a fused or bidirectional one (unfuse it, or wrap its parts).
    zoneout_outputs : float, optional
        The probability for outputs.
    zoneout_states : float, optional
        The probability for states.
    """

    def __init__(self, base_cell: BaseRNNCell, zoneout_outputs: float = 0.0, zoneout_states: float = 0.0) -> None:
        _require(not isinstance(base_cell, FusedRNNCell), "FusedRNNCell does not support zoneout; unfuse it first")
        _require(
            not _has_bidirectional(base_cell),
            "a BidirectionalCell cannot be stepped, so it does not support zoneout; "
            "wrap the cells underneath it in ZoneoutCell instead",
        )
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self.prev_output: symbol.Symbol | None = None

    def reset(self) -> None:
        super().reset()
        self.prev_output = None

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        next_output, next_states = self.base_cell(inputs, states)

        def zoneout(p: float, new: symbol.Symbol, old: symbol.Symbol) -> symbol.Symbol:
            # Dropout of ones is a mask of 0 (keep the old value) and 1/(1-p).
            mask = symbol.Dropout(symbol.ones_like(new), p=p)
            return symbol.where(mask, new, old)

        prev_output = self.prev_output if self.prev_output is not None else symbol.zeros((0, 0))
        output = zoneout(self.zoneout_outputs, next_output, prev_output) if self.zoneout_outputs != 0.0 else next_output
        if self.zoneout_states != 0.0:
            next_states = [zoneout(self.zoneout_states, new, old) for new, old in zip(next_states, states, strict=True)]
        self.prev_output = output
        return output, next_states


class ResidualCell(ModifierCell):
    """Adds each step's input to the base cell's output (Wu et al., 2016).

    Parameters
    ----------
    base_cell : BaseRNNCell
        The cell; its output must have the input's shape.
    """

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        output, states = self.base_cell(inputs, states)
        return symbol.elemwise_add(output, inputs, name=f"{output.name}_plus_residual"), states

    def unroll(
        self,
        length: int,
        inputs: Any,
        begin_state: list | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
    ) -> tuple[Any, list]:
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(
                length, inputs=inputs, begin_state=begin_state, layout=layout, merge_outputs=merge_outputs
            )
        finally:
            self.base_cell._modified = True
        if merge_outputs is None:
            merge_outputs = isinstance(outputs, symbol.Symbol)
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if merge_outputs:
            outputs = symbol.elemwise_add(outputs, inputs, name=f"{outputs.name}_plus_residual")
        else:
            outputs = [
                symbol.elemwise_add(out, inp, name=f"{out.name}_plus_residual") for out, inp in zip(outputs, inputs, strict=True)
            ]
        return outputs, states


class BidirectionalCell(BaseRNNCell):
    """Two cells over a sequence, one forwards and one backwards in time, their outputs
    concatenated at each step. It cannot be stepped, only unrolled.

    Parameters
    ----------
    l_cell : BaseRNNCell
        The forward cell.
    r_cell : BaseRNNCell
        The backward cell.
    params : RNNParams, optional
        Parameters for both cells (which must then have their own).
    output_prefix : str, optional
        Prefix of the output nodes' names, ``'bi_'`` by default.
    """

    def __init__(
        self, l_cell: BaseRNNCell, r_cell: BaseRNNCell, params: RNNParams | None = None, output_prefix: str = "bi_"
    ) -> None:
        super().__init__("", params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        if self._override_cell_params:
            _require(
                l_cell._own_params and r_cell._own_params,
                "give params to the BidirectionalCell or to its cells, not both",
            )
            l_cell.params._params.update(self.params._params)
            r_cell.params._params.update(self.params._params)
        self.params._params.update(l_cell.params._params)
        self.params._params.update(r_cell.params._params)
        self._cells = [l_cell, r_cell]

    def unpack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        raise MXNetNotImplementedError("BidirectionalCell cannot be stepped; use unroll")

    @property
    def state_info(self) -> list:
        return _flatten_states(self._cells, "state_info")

    def begin_state(self, func: Callable[..., symbol.Symbol] | None = None, **kwargs: Any) -> list:
        _require(
            not self._modified,
            "a cell wrapped in a modifier cell (e.g. ZoneoutCell) cannot be used directly; "
            "use the modifier cell instead",
        )
        if func is not None:
            kwargs["func"] = func
        return sum((cell.begin_state(**kwargs) for cell in self._cells), [])

    def unroll(
        self,
        length: int,
        inputs: Any,
        begin_state: list | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
    ) -> tuple[Any, list]:
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = self.begin_state()
        l_cell, r_cell = self._cells
        n_left = len(l_cell.state_info)
        l_outputs, l_states = l_cell.unroll(
            length, inputs=inputs, begin_state=begin_state[:n_left], layout=layout, merge_outputs=merge_outputs
        )
        r_outputs, r_states = r_cell.unroll(
            length,
            inputs=list(reversed(inputs)),
            begin_state=begin_state[n_left:],
            layout=layout,
            merge_outputs=merge_outputs,
        )

        if merge_outputs is None:
            merge_outputs = isinstance(l_outputs, symbol.Symbol) and isinstance(r_outputs, symbol.Symbol)
            if not merge_outputs:
                if isinstance(l_outputs, symbol.Symbol):
                    l_outputs = list(symbol.SliceChannel(l_outputs, axis=axis, num_outputs=length, squeeze_axis=1))
                if isinstance(r_outputs, symbol.Symbol):
                    r_outputs = list(symbol.SliceChannel(r_outputs, axis=axis, num_outputs=length, squeeze_axis=1))

        outputs: Any
        if merge_outputs:
            r_forward = symbol.reverse(r_outputs, axis=axis)
            outputs = symbol.Concat(l_outputs, r_forward, dim=2, name=f"{self._output_prefix}out")
        else:
            outputs = [
                symbol.Concat(l_o, r_o, dim=1, name=f"{self._output_prefix}t{i}")
                for i, (l_o, r_o) in enumerate(zip(l_outputs, reversed(r_outputs), strict=True))
            ]
        # The states stay grouped per direction, as MXNet returns them.
        return outputs, [l_states, r_states]


class BaseConvRNNCell(BaseRNNCell):
    """The base of convolutional recurrent cells: i2h and h2h are convolutions, and
    states are feature maps.

    Parameters
    ----------
    input_shape : tuple of int
        The shape of one step's input, batch included (for the state's shape).
    num_hidden : int
        The number of state channels.
    h2h_kernel, h2h_dilate : tuple of int
        The state-to-state convolution (odd kernel; padded to keep the size).
    i2h_kernel, i2h_stride, i2h_pad, i2h_dilate : tuple of int
        The input-to-state convolution.
    i2h_weight_initializer, h2h_weight_initializer : str or Initializer
        Initializers of the two convolutions' weights.
    i2h_bias_initializer, h2h_bias_initializer : str or Initializer
        Initializers of their biases.
    activation : str or callable
        The activation of the cell.
    prefix : str, optional
        Name prefix.
    params : RNNParams, optional
        Parameters to share.
    conv_layout : str, optional
        The convolutions' layout, ``'NCHW'`` by default.
    """

    def __init__(
        self,
        input_shape: tuple,
        num_hidden: int,
        h2h_kernel: tuple,
        h2h_dilate: tuple,
        i2h_kernel: tuple,
        i2h_stride: tuple,
        i2h_pad: tuple,
        i2h_dilate: tuple,
        i2h_weight_initializer: Any,
        h2h_weight_initializer: Any,
        i2h_bias_initializer: Any,
        h2h_bias_initializer: Any,
        activation: Any,
        prefix: str = "",
        params: RNNParams | None = None,
        conv_layout: str = "NCHW",
    ) -> None:
        super().__init__(prefix=prefix, params=params)
        _require(
            h2h_kernel[0] % 2 == 1 and h2h_kernel[1] % 2 == 1,
            f"h2h_kernel must have odd sizes, got {tuple(h2h_kernel)}",
        )
        self._h2h_kernel = h2h_kernel
        self._h2h_pad = (h2h_dilate[0] * (h2h_kernel[0] - 1) // 2, h2h_dilate[1] * (h2h_kernel[1] - 1) // 2)
        self._h2h_dilate = h2h_dilate
        self._i2h_kernel = i2h_kernel
        self._i2h_stride = i2h_stride
        self._i2h_pad = i2h_pad
        self._i2h_dilate = i2h_dilate
        self._num_hidden = num_hidden
        self._input_shape = input_shape
        self._conv_layout = conv_layout
        self._activation = activation

        # The state has the shape of the i2h convolution's output, with any batch size.
        probe = symbol.Convolution(
            data=symbol.Variable("data"),
            num_filter=num_hidden,
            kernel=i2h_kernel,
            stride=i2h_stride,
            pad=i2h_pad,
            dilate=i2h_dilate,
            layout=conv_layout,
        )
        out_shape = probe.infer_shape(data=input_shape)[1][0]
        self._state_shape = (0,) + tuple(out_shape[1:])

        self._iW = self.params.get("i2h_weight", init=i2h_weight_initializer)
        self._hW = self.params.get("h2h_weight", init=h2h_weight_initializer)
        self._iB = self.params.get("i2h_bias", init=i2h_bias_initializer)
        self._hB = self.params.get("h2h_bias", init=h2h_bias_initializer)

    @property
    def _num_gates(self) -> int:
        return len(self._gate_names)

    @property
    def state_info(self) -> list:
        return [{"shape": self._state_shape, "__layout__": self._conv_layout} for _ in range(2)]

    def _conv_forward(self, inputs: symbol.Symbol, states: list, name: str) -> tuple[symbol.Symbol, symbol.Symbol]:
        """The i2h and h2h convolutions of one step."""
        filters = self._num_hidden * self._num_gates
        i2h = symbol.Convolution(
            name=f"{name}i2h",
            data=inputs,
            num_filter=filters,
            kernel=self._i2h_kernel,
            stride=self._i2h_stride,
            pad=self._i2h_pad,
            dilate=self._i2h_dilate,
            weight=self._iW,
            bias=self._iB,
            layout=self._conv_layout,
        )
        h2h = symbol.Convolution(
            name=f"{name}h2h",
            data=states[0],
            num_filter=filters,
            kernel=self._h2h_kernel,
            dilate=self._h2h_dilate,
            pad=self._h2h_pad,
            stride=(1, 1),
            weight=self._hW,
            bias=self._hB,
            layout=self._conv_layout,
        )
        return i2h, h2h

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        raise MXNetNotImplementedError("BaseConvRNNCell is abstract; use ConvRNNCell, ConvLSTMCell or ConvGRUCell")


# The convolutional cells' default activation, as in MXNet.
_LEAKY_RELU = functools.partial(symbol.LeakyReLU, act_type="leaky", slope=0.2)


_CONV_DOC = """
    Parameters
    ----------
    input_shape : tuple of int
        The shape of one step's input, batch included.
    num_hidden : int
        The number of state channels.
    h2h_kernel : tuple of int, default (3, 3)
        The state-to-state convolution's kernel (odd sizes).
    h2h_dilate : tuple of int, default (1, 1)
        Its dilation.
    i2h_kernel : tuple of int, default (3, 3)
        The input-to-state convolution's kernel.
    i2h_stride : tuple of int, default (1, 1)
        Its stride.
    i2h_pad : tuple of int, default (1, 1)
        Its padding.
    i2h_dilate : tuple of int, default (1, 1)
        Its dilation.
    i2h_weight_initializer, h2h_weight_initializer : str or Initializer, optional
        Initializers of the convolutions' weights.
    i2h_bias_initializer, h2h_bias_initializer : str or Initializer, default 'zeros'
        Initializers of their biases.
    activation : str or callable, default leaky ReLU with slope 0.2
        The cell's activation.
    prefix : str, default {prefix!r}
        Name prefix.
    params : RNNParams, optional
        Parameters to share.
    conv_layout : str, default 'NCHW'
        The convolutions' layout.
"""


class ConvRNNCell(BaseConvRNNCell):
    __doc__ = "The convolutional form of ``RNNCell``.\n" + _CONV_DOC.format(prefix="ConvRNN_")

    def __init__(
        self,
        input_shape: tuple,
        num_hidden: int,
        h2h_kernel: tuple = (3, 3),
        h2h_dilate: tuple = (1, 1),
        i2h_kernel: tuple = (3, 3),
        i2h_stride: tuple = (1, 1),
        i2h_pad: tuple = (1, 1),
        i2h_dilate: tuple = (1, 1),
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        activation: Any = _LEAKY_RELU,
        prefix: str = "ConvRNN_",
        params: RNNParams | None = None,
        conv_layout: str = "NCHW",
    ) -> None:
        super().__init__(
            input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride, i2h_pad, i2h_dilate,
            i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
            activation, prefix=prefix, params=params, conv_layout=conv_layout,
        )  # fmt: skip

    @property
    def _gate_names(self) -> tuple:
        return ("",)

    @property
    def state_info(self) -> list:
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}]

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        i2h, h2h = self._conv_forward(inputs, states, name)
        output = self._get_activation(i2h + h2h, self._activation, name=f"{name}out")
        return output, [output]


class ConvLSTMCell(BaseConvRNNCell):
    __doc__ = (
        "The convolutional LSTM cell (Shi et al., NIPS 2015); the activation replaces tanh.\n"
        + _CONV_DOC.format(prefix="ConvLSTM_")
    )

    def __init__(
        self,
        input_shape: tuple,
        num_hidden: int,
        h2h_kernel: tuple = (3, 3),
        h2h_dilate: tuple = (1, 1),
        i2h_kernel: tuple = (3, 3),
        i2h_stride: tuple = (1, 1),
        i2h_pad: tuple = (1, 1),
        i2h_dilate: tuple = (1, 1),
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        activation: Any = _LEAKY_RELU,
        prefix: str = "ConvLSTM_",
        params: RNNParams | None = None,
        conv_layout: str = "NCHW",
    ) -> None:
        super().__init__(
            input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride, i2h_pad, i2h_dilate,
            i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
            activation, prefix=prefix, params=params, conv_layout=conv_layout,
        )  # fmt: skip

    @property
    def _gate_names(self) -> list:
        return ["_i", "_f", "_c", "_o"]

    @property
    def state_info(self) -> list:
        return [{"shape": self._state_shape, "__layout__": self._conv_layout} for _ in range(2)]

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        i2h, h2h = self._conv_forward(inputs, states, name)
        gates = symbol.SliceChannel(i2h + h2h, num_outputs=4, axis=self._conv_layout.find("C"), name=f"{name}slice")
        in_gate = symbol.Activation(gates[0], act_type="sigmoid", name=f"{name}i")
        forget_gate = symbol.Activation(gates[1], act_type="sigmoid", name=f"{name}f")
        in_transform = self._get_activation(gates[2], self._activation, name=f"{name}c")
        out_gate = symbol.Activation(gates[3], act_type="sigmoid", name=f"{name}o")
        next_c = symbol._internal._plus(forget_gate * states[1], in_gate * in_transform, name=f"{name}state")
        next_h = symbol._internal._mul(out_gate, self._get_activation(next_c, self._activation), name=f"{name}out")
        return next_h, [next_h, next_c]


class ConvGRUCell(BaseConvRNNCell):
    __doc__ = "The convolutional form of ``GRUCell``; the activation replaces tanh.\n" + _CONV_DOC.format(
        prefix="ConvGRU_"
    )

    def __init__(
        self,
        input_shape: tuple,
        num_hidden: int,
        h2h_kernel: tuple = (3, 3),
        h2h_dilate: tuple = (1, 1),
        i2h_kernel: tuple = (3, 3),
        i2h_stride: tuple = (1, 1),
        i2h_pad: tuple = (1, 1),
        i2h_dilate: tuple = (1, 1),
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        activation: Any = _LEAKY_RELU,
        prefix: str = "ConvGRU_",
        params: RNNParams | None = None,
        conv_layout: str = "NCHW",
    ) -> None:
        super().__init__(
            input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride, i2h_pad, i2h_dilate,
            i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
            activation, prefix=prefix, params=params, conv_layout=conv_layout,
        )  # fmt: skip

    @property
    def _gate_names(self) -> list:
        return ["_r", "_z", "_o"]

    @property
    def state_info(self) -> list:
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}]

    def __call__(self, inputs: symbol.Symbol, states: list) -> tuple[symbol.Symbol, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        i2h, h2h = self._conv_forward(inputs, states, name)
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, name=f"{name}_i2h_slice")
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, name=f"{name}_h2h_slice")
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type="sigmoid", name=f"{name}_r_act")
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type="sigmoid", name=f"{name}_z_act")
        candidate = self._get_activation(i2h + reset_gate * h2h, self._activation, name=f"{name}_h_act")
        next_h = symbol._internal._plus(
            (1.0 - update_gate) * candidate, update_gate * states[0], name=f"{name}out"
        )
        return next_h, [next_h]

"""``mx.rnn``: symbolic recurrent cells, bucketed sentence data and RNN checkpoints, as
in MXNet 1.9.1 (``mx.rnn.LSTMCell``, ``mx.rnn.io.BucketSentenceIter``, ...)."""

from . import io, rnn, rnn_cell
from .io import *  # noqa: F403
from .io import __all__ as _io_all
from .rnn import *  # noqa: F403
from .rnn import __all__ as _rnn_all
from .rnn_cell import *  # noqa: F403
from .rnn_cell import __all__ as _cell_all

__all__ = ["io", "rnn", "rnn_cell", *_cell_all, *_rnn_all, *_io_all]

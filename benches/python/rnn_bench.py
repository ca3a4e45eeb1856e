"""Recurrent workloads: training steps of a fused 2-layer LSTM and GRU (input and state
size 256, sequence 35, batch 32, TNC layout), as steps per second.

The MXNet API half (rsmx, MXNet 1.9.1) binds ``mx.sym.RNN`` with ``simple_bind`` and runs
``forward(is_train=True)`` and ``backward`` with a fixed head gradient; the PyTorch half
runs ``torch.nn.LSTM`` / ``torch.nn.GRU`` forward and backward with the same head gradient.
Both compute the gradients of the data, the initial states and every weight, and neither
updates the weights.

    python benches/python/rnn_bench.py [rsmx|mxnet|torch] [--mode lstm|gru]

run alone prints the rate (handy under a profiler).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from training import best_rate

# Each workload returns (value, unit, higher_is_better).
Result = tuple[float, str, bool]

SEQ_LEN, BATCH, INPUT, HIDDEN, LAYERS = 35, 32, 256, 256, 2
#: Timed steps in each repeat.
STEPS = 10
WORKLOADS = {"lstm_train": "lstm", "gru_train": "gru"}


# ---------------------------------------------------------------- MXNet API (rsmx, MXNet)


def mx_trainer(mx, mode: str) -> Callable[[], None]:
    """A bound fused RNN and a function running one forward and backward pass."""
    import numpy as np

    sym = mx.sym.RNN(mx.sym.Variable("data"), state_size=HIDDEN, num_layers=LAYERS, mode=mode,
                     name="rnn")
    ex = sym.simple_bind(mx.cpu(), data=(SEQ_LEN, BATCH, INPUT), grad_req="write")
    rng = np.random.RandomState(0)
    scale = 1 / np.sqrt(HIDDEN)
    for name, arr in ex.arg_dict.items():
        if name == "rnn_parameters":
            arr[:] = rng.uniform(-scale, scale, arr.shape)
        else:
            arr[:] = rng.uniform(-1, 1, arr.shape)
    head = mx.nd.array(rng.uniform(-1, 1, (SEQ_LEN, BATCH, HIDDEN)))
    mx.nd.waitall()

    def step() -> None:
        ex.forward(is_train=True)
        ex.backward([head])

    return step


def mx_rate(mx, mode: str) -> float:
    return best_rate(mx_trainer(mx, mode), mx.nd.waitall, STEPS)


def mx_workload(mx, workload: str) -> Result:
    return mx_rate(mx, WORKLOADS[workload]), "steps/s", True


# ---------------------------------------------------------------- PyTorch


def torch_trainer(torch, mode: str) -> Callable[[], None]:
    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    cls = torch.nn.LSTM if mode == "lstm" else torch.nn.GRU
    model = cls(INPUT, HIDDEN, LAYERS)
    data = (torch.rand(SEQ_LEN, BATCH, INPUT) * 2 - 1).requires_grad_()
    states = [(torch.rand(LAYERS, BATCH, HIDDEN) * 2 - 1).requires_grad_()
              for _ in range(2 if mode == "lstm" else 1)]
    head = torch.rand(SEQ_LEN, BATCH, HIDDEN) * 2 - 1
    leaves = [data, *states, *model.parameters()]

    def step() -> None:
        for t in leaves:
            t.grad = None
        out, _ = model(data, tuple(states) if mode == "lstm" else states[0])
        out.backward(head)

    return step


def torch_rate(torch, mode: str) -> float:
    return best_rate(torch_trainer(torch, mode), lambda: None, STEPS)


def torch_workload(torch, workload: str) -> Result:
    return torch_rate(torch, WORKLOADS[workload]), "steps/s", True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("backend", nargs="?", default="rsmx", choices=["rsmx", "mxnet", "torch"])
    p.add_argument("--mode", default="lstm", choices=["lstm", "gru"])
    args = p.parse_args()
    lib = __import__(args.backend)
    rate = torch_rate(lib, args.mode) if args.backend == "torch" else mx_rate(lib, args.mode)
    print(f"{args.backend} {args.mode}: {rate:.2f} steps/s")


if __name__ == "__main__":
    main()

"""``Module.fit`` workload: the LeNet of ``training.py`` trained on two CPU contexts with a
local kvstore, SGD with momentum, Xavier initialization and the accuracy metric, as MXNet
1.x scripts train it. The same function runs on rsmx and on MXNet 1.9.1.

    python benches/python/fit_bench.py [rsmx|mxnet] [--epochs N]

run alone prints the rate and the final training accuracy (handy under a profiler).
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

import training

SAMPLES = 2048
BATCH = 64
CLASSES = 10
SEED = 0
#: Timed epochs after the warm-up epoch; the best one counts.
EPOCHS = 6
#: The least training accuracy after the last epoch that counts as learning.
MIN_ACCURACY = 0.5


def make_data(mx: Any, samples: int = SAMPLES):
    """A shuffled ``NDArrayIter`` over fixed synthetic 1x28x28 images with labels that
    depend on the pixels (so accuracy rises as the net learns)."""
    import numpy as np

    rng = np.random.RandomState(SEED)
    data = rng.uniform(-1, 1, (samples, 1, 28, 28)).astype(np.float32)
    proj = rng.uniform(-1, 1, (28 * 28, CLASSES)).astype(np.float32)
    label = np.argmax(data.reshape(samples, -1) @ proj, axis=1).astype(np.float32)
    return mx.io.NDArrayIter(data, label, batch_size=BATCH, shuffle=False)


class _EpochTimer:
    """Records the wall time between consecutive epoch ends (after waiting for all
    pending work): every epoch after the first, whole, with its end-of-epoch work."""

    def __init__(self, mx: Any):
        self.mx = mx
        self.start: float | None = None
        self.times: list[float] = []

    def epoch_end(self, *_: Any) -> None:
        self.mx.nd.waitall()
        now = time.perf_counter()
        if self.start is not None:
            self.times.append(now - self.start)
        self.start = now


def fit_lenet(mx: Any, epochs: int = EPOCHS, samples: int = SAMPLES) -> tuple[float, float]:
    """Trains the LeNet with ``Module.fit`` for one warm-up epoch plus ``epochs``.

    Returns
    -------
    (float, float)
        Samples per second of the fastest timed epoch, and the final training accuracy.
    """
    logging.getLogger().setLevel(logging.WARNING)
    train = make_data(mx, samples)
    mod = mx.mod.Module(training.mx_lenet(mx), context=[mx.cpu(0), mx.cpu(1)])
    timer = _EpochTimer(mx)
    metric = mx.metric.create("acc")
    mod.fit(train, kvstore="local", optimizer="sgd",
            optimizer_params={"learning_rate": 0.05, "momentum": 0.9},
            initializer=mx.init.Xavier(), eval_metric=metric, num_epoch=1 + epochs,
            epoch_end_callback=timer.epoch_end)
    return samples / min(timer.times), float(metric.get()[1])


def mx_fit_lenet(mx: Any) -> tuple[float, str, bool]:
    """``Module.fit`` of the LeNet on two CPU contexts, in samples per second; a run
    that does not learn (chance is 1 in 10; both libraries pass 0.8) is an error."""
    rate, acc = fit_lenet(mx)
    if not acc > MIN_ACCURACY:
        raise SystemExit(f"module_fit_lenet: training accuracy {acc:.3f} after "
                         f"{1 + EPOCHS} epochs, expected above {MIN_ACCURACY}")
    return rate, "samples/s", True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("backend", nargs="?", default="rsmx")
    p.add_argument("--epochs", type=int, default=EPOCHS)
    args = p.parse_args()
    mx = __import__(args.backend)
    rate, acc = fit_lenet(mx, epochs=args.epochs)
    print(f"{args.backend}: {rate:.1f} samples/s, train accuracy {acc:.3f}")


if __name__ == "__main__":
    main()

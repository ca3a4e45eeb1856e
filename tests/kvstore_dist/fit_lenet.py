"""Module.fit of a LeNet on scikit-learn's digits, as one worker of a job or alone: each
worker trains on its share of the images (``rank::num_workers``) with the batch it is
given, and prints ``ACCURACY <held-out accuracy> <samples per second>``.

    python fit_lenet.py --kvstore dist_sync --batch-size 32 --epochs 6
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import rsmx as mx  # noqa: E402
from demo import as_input, lenet, load_digits  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kvstore", default="dist_sync")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=6)
    args = p.parse_args()
    kv = mx.kv.create(args.kvstore)
    x_train, y_train, x_test, y_test = load_digits()
    x_train, x_test = as_input(x_train, "lenet"), as_input(x_test, "lenet")
    x_train, y_train = x_train[kv.rank :: kv.num_workers], y_train[kv.rank :: kv.num_workers]
    mx.random.seed(1)
    np.random.seed(1)
    train_iter = mx.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    test_iter = mx.io.NDArrayIter(x_test, y_test, args.batch_size)
    mod = mx.mod.Module(lenet(), context=[mx.cpu(0)])
    start = time.perf_counter()
    mod.fit(train_iter, kvstore=kv, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
            initializer=mx.init.Xavier(magnitude=2.0), num_epoch=args.epochs)
    seconds = time.perf_counter() - start
    predicted = mod.predict(test_iter).asnumpy().argmax(axis=1)
    accuracy = float((predicted == y_test).mean())
    # One write, so that the line stays whole among the other workers' output.
    sys.stdout.write(f"ACCURACY {accuracy:.4f} {args.epochs * len(x_train) / seconds:.1f}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

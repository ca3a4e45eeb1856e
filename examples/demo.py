"""rsmx demo: data-parallel training with Module.fit on scikit-learn's digits.

Trains an MLP and a LeNet on the 8x8 digit images that ship with scikit-learn (no
download), splitting each batch over several CPU contexts and summing gradients in a
KVStore; checks held-out accuracy, saves a checkpoint in MXNet's format, loads it back
and predicts with it.

    python examples/demo.py [--network mlp|lenet|both] [--contexts cpu:0,cpu:1]
                            [--epochs N] [--kvstore local|device] [--batch-size N]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import numpy as np
import rsmx as mx

#: Held-out accuracy each network must reach.
TARGETS = {"mlp": 0.95, "lenet": 0.97}
#: Epochs each network trains for unless --epochs says otherwise.
EPOCHS = {"mlp": 20, "lenet": 12}


def load_digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The 1,797 digit images scaled to [0, 1], split 80/20 into train and test."""
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    images = (digits.images / 16.0).astype(np.float32)
    labels = digits.target.astype(np.float32)
    order = np.random.RandomState(0).permutation(len(images))
    cut = int(len(images) * 0.8)
    train, test = order[:cut], order[cut:]
    return images[train], labels[train], images[test], labels[test]


def mlp() -> mx.sym.Symbol:
    """The overview's MLP: 128 and 64 hidden units with relu, softmax over 10 digits."""
    data = mx.sym.Variable("data")
    net = mx.sym.Flatten(data)
    net = mx.sym.FullyConnected(net, name="fc1", num_hidden=128)
    net = mx.sym.Activation(net, name="relu1", act_type="relu")
    net = mx.sym.FullyConnected(net, name="fc2", num_hidden=64)
    net = mx.sym.Activation(net, name="relu2", act_type="relu")
    net = mx.sym.FullyConnected(net, name="fc3", num_hidden=10)
    return mx.sym.SoftmaxOutput(net, name="softmax")


def lenet() -> mx.sym.Symbol:
    """LeNet: two convolution and pooling stages, then two fully connected layers."""
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, name="conv1", kernel=(5, 5), num_filter=20)
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.Convolution(net, name="conv2", kernel=(5, 5), num_filter=50)
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.Flatten(net)
    net = mx.sym.FullyConnected(net, name="fc1", num_hidden=500)
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, name="fc2", num_hidden=10)
    return mx.sym.SoftmaxOutput(net, name="softmax")


def as_input(images: np.ndarray, network: str) -> np.ndarray:
    """Images shaped for the network: LeNet sees them upsampled to 32x32, one channel."""
    if network == "lenet":
        return np.kron(images, np.ones((4, 4), dtype=np.float32))[:, None, :, :]
    return images


def parse_contexts(text: str) -> list[mx.Context]:
    """``cpu:0,cpu:1`` as contexts."""
    out = []
    for item in text.split(","):
        kind, _, idx = item.strip().partition(":")
        if kind not in ("cpu", "gpu"):
            raise SystemExit(f"unknown context '{item}': use cpu:N or gpu:N")
        out.append(mx.Context(kind, int(idx or 0)))
    return out


def train(network: str, args: argparse.Namespace, data: tuple) -> float:
    """Trains one network, checks it, saves and reloads it; returns its accuracy."""
    x_train, y_train, x_test, y_test = data
    x_train, x_test = as_input(x_train, network), as_input(x_test, network)
    contexts = parse_contexts(args.contexts)
    epochs = args.epochs or EPOCHS[network]
    print(f"\n== {network}: {len(x_train)} training and {len(x_test)} held-out images, "
          f"{epochs} epochs on {', '.join(str(c) for c in contexts)}, kvstore '{args.kvstore}'")

    mx.random.seed(1)
    np.random.seed(1)
    train_iter = mx.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    test_iter = mx.io.NDArrayIter(x_test, y_test, args.batch_size)
    symbol = mlp() if network == "mlp" else lenet()
    mod = mx.mod.Module(symbol, context=contexts)
    start = time.perf_counter()
    mod.fit(train_iter, eval_data=test_iter, eval_metric="acc", kvstore=args.kvstore,
            optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
            initializer=mx.init.Xavier(magnitude=2.0), num_epoch=epochs)
    seconds = time.perf_counter() - start
    # predict drops the padding of the last batch, so every held-out image counts once.
    trained = mod.predict(test_iter).asnumpy()
    accuracy = float((trained.argmax(axis=1) == y_test).mean())
    print(f"{network}: held-out accuracy {accuracy:.4f} after {seconds:.1f} s "
          f"({epochs * len(x_train) / seconds:.0f} samples/s)")

    prefix = os.path.join(args.out_dir, network)
    os.makedirs(args.out_dir, exist_ok=True)
    mod.save_checkpoint(prefix, epochs)
    loaded = mx.mod.Module.load(prefix, epochs, context=contexts)
    loaded.bind(data_shapes=test_iter.provide_data, label_shapes=test_iter.provide_label,
                for_training=False)
    probs = loaded.predict(test_iter).asnumpy()
    reloaded = float((probs.argmax(axis=1) == y_test).mean())
    if not np.allclose(probs, trained, rtol=1e-5, atol=1e-6):
        raise SystemExit(f"{network}: the reloaded model predicts differently from the trained one")
    print(f"{network}: saved {prefix}-symbol.json and {prefix}-{epochs:04d}.params; "
          f"the reloaded model predicts with accuracy {reloaded:.4f}")
    if accuracy < TARGETS[network]:
        raise SystemExit(f"{network}: accuracy {accuracy:.4f} is below {TARGETS[network]}")
    return accuracy


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--network", choices=["mlp", "lenet", "both"], default="both")
    p.add_argument("--contexts", default="cpu:0,cpu:1", help="comma-separated, e.g. cpu:0,cpu:1")
    p.add_argument("--epochs", type=int, default=0, help="epochs per network (default: 20 MLP, 12 LeNet)")
    p.add_argument("--kvstore", default="local", help="local, device, or another KVStore type")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out-dir", default="demo-checkpoints", help="where checkpoints are saved")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    print(f"rsmx {mx.__version__}, engine {mx.engine.engine_type()}")
    data = load_digits()
    networks = ["mlp", "lenet"] if args.network == "both" else [args.network]
    results = {n: train(n, args, data) for n in networks}
    print("\n" + ", ".join(f"{n} {a:.4f} (target {TARGETS[n]})" for n, a in results.items()))


if __name__ == "__main__":
    main()

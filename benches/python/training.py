"""Training workloads: a bound executor (or a PyTorch module) doing forward, backward and a
plain SGD update of every weight, as steps per second and as memory."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

# Each workload returns (value, unit, higher_is_better).
Result = tuple[float, str, bool]

LR = 0.1
STEPS = {"mlp_train_small": 400, "mlp_train_large": 40, "lenet_train": 30}


def best_rate(step: Callable[[], None], sync: Callable[[], None], n: int, repeats: int = 3) -> float:
    """Steps per second: the best of ``repeats`` runs of ``n`` steps after a warm-up long
    enough for memory pools to fill."""
    for _ in range(max(5, n // 4)):
        step()
    sync()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        best = min(best, time.perf_counter() - t)
    return n / best


def peak_rss_mb() -> float:
    """The process's peak resident memory in MiB (``VmHWM``: unlike ``ru_maxrss``, not
    inherited from the parent that started this process)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------- MXNet API (rsmx, MXNet)


def mx_mlp(mx, hidden: list[int], classes: int):
    net = mx.sym.Variable("data")
    for i, h in enumerate(hidden):
        net = mx.sym.FullyConnected(net, num_hidden=h, name=f"fc{i + 1}")
        net = mx.sym.Activation(net, act_type="relu", name=f"relu{i + 1}")
    net = mx.sym.FullyConnected(net, num_hidden=classes, name=f"fc{len(hidden) + 1}")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def mx_lenet(mx):
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(5, 5), num_filter=20, name="conv1")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.Convolution(net, kernel=(5, 5), num_filter=50, name="conv2")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.Flatten(net)
    net = mx.sym.FullyConnected(net, num_hidden=500, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def mx_network(mx, name: str):
    """``(symbol, data shape, classes)`` of a named workload."""
    if name == "mlp_train_small":
        return mx_mlp(mx, [128], 10), (100, 100), 10
    if name == "mlp_train_large":
        return mx_mlp(mx, [512, 512], 10), (256, 784), 10
    if name == "lenet_train":
        return mx_lenet(mx), (64, 1, 28, 28), 10
    raise KeyError(name)


def mx_trainer(mx, name: str):
    """A bound executor and a function running one training step."""
    import numpy as np

    sym, dshape, classes = mx_network(mx, name)
    # As Module binds: no gradients for the data and the labels.
    reqs = {k: "write" for k in sym.list_arguments() if k not in ("data", "softmax_label")}
    ex = sym.simple_bind(mx.cpu(), data=dshape, grad_req=reqs)
    rng = np.random.RandomState(0)
    for k, v in ex.arg_dict.items():
        if k == "data":
            v[:] = rng.uniform(-1, 1, v.shape)
        elif k == "softmax_label":
            v[:] = rng.randint(0, classes, v.shape)
        else:
            v[:] = rng.uniform(-0.07, 0.07, v.shape)
    batch = dshape[0]
    params = [
        (ex.arg_dict[k], ex.grad_dict[k])
        for k in sym.list_arguments()
        if k not in ("data", "softmax_label")
    ]

    def step() -> None:
        ex.forward(is_train=True)
        ex.backward()
        for w, g in params:
            w[:] -= LR * g / batch

    return ex, step


def mx_train_rate(mx, name: str) -> Result:
    _, step = mx_trainer(mx, name)
    return best_rate(step, mx.nd.waitall, STEPS[name]), "steps/s", True


def executor_mb(mx, ex) -> float:
    """Memory the executor's plan allocated, in MiB."""
    planned = getattr(ex, "_planned_bytes", None)
    if planned is not None:
        return planned / 2**20
    # MXNet prints only whole megabytes.
    for line in ex.debug_str().splitlines():
        if line.startswith("Total") and "MB allocated" in line:
            return float(line.split()[1])
    return float("nan")


def mx_memory(mx, name: str, what: str) -> Result:
    ex, step = mx_trainer(mx, name)
    for _ in range(3):
        step()
    mx.nd.waitall()
    if what == "exec":
        return executor_mb(mx, ex), "MiB", False
    return peak_rss_mb(), "MiB", False


# ---------------------------------------------------------------- PyTorch


def torch_network(torch, name: str):
    nn = torch.nn
    if name == "mlp_train_small":
        return nn.Sequential(nn.Linear(100, 128), nn.ReLU(), nn.Linear(128, 10)), (100, 100)
    if name == "mlp_train_large":
        return (
            nn.Sequential(
                nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
            ),
            (256, 784),
        )
    if name == "lenet_train":
        return (
            nn.Sequential(
                nn.Conv2d(1, 20, 5), nn.Tanh(), nn.MaxPool2d(2, 2),
                nn.Conv2d(20, 50, 5), nn.Tanh(), nn.MaxPool2d(2, 2),
                nn.Flatten(), nn.Linear(800, 500), nn.Tanh(), nn.Linear(500, 10),
            ),
            (64, 1, 28, 28),
        )
    raise KeyError(name)


def torch_trainer(torch, name: str):
    model, dshape = torch_network(torch, name)
    data = torch.rand(dshape) * 2 - 1
    label = torch.randint(0, 10, (dshape[0],))
    return torch_sgd_step(torch, model, data, label)


def torch_sgd_step(torch, model, data, label) -> Callable[[], None]:
    """One training step of ``model`` on a batch: cross-entropy summed over the batch, and
    a plain SGD update of every parameter by its gradient averaged over the batch."""
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    batch = data.shape[0]
    params = list(model.parameters())

    def step() -> None:
        for p in params:
            p.grad = None
        loss_fn(model(data), label).backward()
        with torch.no_grad():
            for p in params:
                p -= LR * p.grad / batch

    return step


def torch_train_rate(torch, name: str) -> Result:
    step = torch_trainer(torch, name)
    return best_rate(step, lambda: None, STEPS[name]), "steps/s", True


def torch_memory(torch, name: str) -> Result:
    step = torch_trainer(torch, name)
    for _ in range(3):
        step()
    return peak_rss_mb(), "MiB", False

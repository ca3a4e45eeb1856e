"""Convolutional workloads: ResNet-18 and MobileNet v1 inference on 3x224x224 images, and a
CIFAR ResNet's training steps, built the same way in the MXNet API (rsmx, MXNet) and in
``torch.nn``. Parameters are random; BatchNorm's moving variance is 1."""

from __future__ import annotations

import time
from collections.abc import Callable

from training import LR, best_rate, peak_rss_mb, torch_sgd_step

# Each workload returns (value, unit, higher_is_better).
Result = tuple[float, str, bool]

# ResNet-18 v1: (blocks, width) per stage; the first block of every stage after the first
# strides by 2.
RESNET18 = [(2, 64), (2, 128), (2, 256), (2, 512)]
# The CIFAR ResNet: a 3x3/16 stem and three stages of two basic blocks.
CIFAR = [(2, 16), (2, 32), (2, 64)]
# MobileNet v1 after its stem: (output channels, stride) of each depthwise separable block.
MOBILENET = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [
    (1024, 2),
    (1024, 1),
]
CIFAR_BATCH = 32


# ---------------------------------------------------------------- MXNet API (rsmx, MXNet)


def _conv_bn(mx, x, name: str, filters: int, kernel: int, stride: int, relu: bool, groups: int = 1):
    pad = kernel // 2
    x = mx.sym.Convolution(
        x, num_filter=filters, kernel=(kernel, kernel), stride=(stride, stride), pad=(pad, pad),
        num_group=groups, no_bias=True, name=f"{name}_conv",
    )
    x = mx.sym.BatchNorm(x, fix_gamma=False, eps=1e-5, name=f"{name}_bn")
    return mx.sym.Activation(x, act_type="relu", name=f"{name}_relu") if relu else x


def _basic_block(mx, x, name: str, width: int, stride: int, project: bool):
    y = _conv_bn(mx, x, f"{name}_a", width, 3, stride, True)
    y = _conv_bn(mx, y, f"{name}_b", width, 3, 1, False)
    shortcut = _conv_bn(mx, x, f"{name}_sc", width, 1, stride, False) if project else x
    return mx.sym.Activation(y + shortcut, act_type="relu", name=f"{name}_out")


def _mx_head(mx, x, classes: int):
    x = mx.sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="pool")
    x = mx.sym.Flatten(x)
    x = mx.sym.FullyConnected(x, num_hidden=classes, name="fc")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def mx_resnet(mx, stages, imagenet: bool, classes: int):
    x = mx.sym.Variable("data")
    if imagenet:
        x = _conv_bn(mx, x, "stem", 64, 7, 2, True)
        x = mx.sym.Pooling(x, pool_type="max", kernel=(3, 3), stride=(2, 2), pad=(1, 1), name="stem_pool")
    else:
        x = _conv_bn(mx, x, "stem", stages[0][1], 3, 1, True)
    channels = stages[0][1]
    for s, (blocks, width) in enumerate(stages):
        for b in range(blocks):
            stride = 2 if s > 0 and b == 0 else 1
            x = _basic_block(mx, x, f"s{s}b{b}", width, stride, stride != 1 or channels != width)
            channels = width
    return _mx_head(mx, x, classes)


def mx_mobilenet(mx, classes: int = 1000):
    x = _conv_bn(mx, mx.sym.Variable("data"), "stem", 32, 3, 2, True)
    channels = 32
    for i, (out, stride) in enumerate(MOBILENET):
        x = _conv_bn(mx, x, f"dw{i}", channels, 3, stride, True, groups=channels)
        x = _conv_bn(mx, x, f"pw{i}", out, 1, 1, True)
        channels = out
    return _mx_head(mx, x, classes)


def mx_network(mx, name: str):
    """``(symbol, data shape, classes)`` of a named network."""
    if name == "resnet18":
        return mx_resnet(mx, RESNET18, True, 1000), (3, 224, 224), 1000
    if name == "mobilenet":
        return mx_mobilenet(mx), (3, 224, 224), 1000
    if name == "cifar_resnet":
        return mx_resnet(mx, CIFAR, False, 10), (3, 32, 32), 10
    raise KeyError(name)


def _mx_fill(ex, rng, classes: int) -> None:
    for k, v in ex.arg_dict.items():
        if k == "data":
            v[:] = rng.uniform(-1, 1, v.shape)
        elif k == "softmax_label":
            v[:] = rng.randint(0, classes, v.shape)
        elif k.endswith("_gamma"):
            v[:] = rng.uniform(0.5, 1.5, v.shape)
        elif k.endswith("_beta") or k.endswith("_bias"):
            v[:] = rng.uniform(-0.1, 0.1, v.shape)
        else:
            fan_in = max(1, int(v.size // v.shape[0]))
            v[:] = rng.normal(0, (2.0 / fan_in) ** 0.5, v.shape)
    for k, v in ex.aux_dict.items():
        v[:] = 1.0 if k.endswith("moving_var") else 0.0


def mx_inference_executor(mx, name: str, batch: int):
    import numpy as np

    sym, shape, classes = mx_network(mx, name)
    ex = sym.simple_bind(mx.cpu(), data=(batch, *shape), grad_req="null")
    _mx_fill(ex, np.random.RandomState(0), classes)
    return ex


def _rate(run: Callable, n: int, repeats: int = 3) -> float:
    """Seconds per call of ``run``: the best of ``repeats`` timings of ``n`` calls, after
    warm-up calls."""
    for _ in range(3):
        run()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            run()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def mx_inference(mx, name: str, batch: int, n: int) -> float:
    """Seconds per forward pass of a batch."""
    ex = mx_inference_executor(mx, name, batch)

    def run() -> None:
        ex.forward(is_train=False)
        ex.outputs[0].wait_to_read()

    return _rate(run, n)


def mx_cifar_trainer(mx):
    import numpy as np

    sym, shape, classes = mx_network(mx, "cifar_resnet")
    reqs = {k: "write" for k in sym.list_arguments() if k not in ("data", "softmax_label")}
    ex = sym.simple_bind(mx.cpu(), data=(CIFAR_BATCH, *shape), grad_req=reqs)
    _mx_fill(ex, np.random.RandomState(0), classes)
    params = [(ex.arg_dict[k], ex.grad_dict[k]) for k in reqs]

    def step() -> None:
        ex.forward(is_train=True)
        ex.backward()
        for w, g in params:
            mx.nd.sgd_update(w, g, out=w, lr=LR, rescale_grad=1.0 / CIFAR_BATCH)

    return step


def mx_workload(mx, workload: str) -> Result:
    if workload == "resnet18_b1":
        return mx_inference(mx, "resnet18", 1, 10) * 1e3, "ms/image", False
    if workload == "resnet18_b16":
        return 16 / mx_inference(mx, "resnet18", 16, 2), "images/s", True
    if workload == "mobilenet_b1":
        return mx_inference(mx, "mobilenet", 1, 10) * 1e3, "ms/image", False
    if workload == "cifar_resnet_train":
        return best_rate(mx_cifar_trainer(mx), mx.nd.waitall, 10), "steps/s", True
    if workload == "resnet18_rss":
        ex = mx_inference_executor(mx, "resnet18", 16)
        for _ in range(2):
            ex.forward(is_train=False)
            ex.outputs[0].wait_to_read()
        return peak_rss_mb(), "MiB", False
    raise KeyError(workload)


# ---------------------------------------------------------------- PyTorch


def _torch_conv_bn(nn, cin: int, cout: int, kernel: int, stride: int, relu: bool, groups: int = 1):
    layers = [
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=1e-5),
    ]
    return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)


def torch_network(torch, name: str):
    nn = torch.nn

    class Basic(nn.Module):
        def __init__(self, cin: int, width: int, stride: int):
            super().__init__()
            self.a = _torch_conv_bn(nn, cin, width, 3, stride, True)
            self.b = _torch_conv_bn(nn, width, width, 3, 1, False)
            project = stride != 1 or cin != width
            self.sc = _torch_conv_bn(nn, cin, width, 1, stride, False) if project else nn.Identity()

        def forward(self, x):
            return torch.relu(self.b(self.a(x)) + self.sc(x))

    def head(channels: int, classes: int):
        return [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes)]

    if name == "mobilenet":
        layers = [_torch_conv_bn(nn, 3, 32, 3, 2, True)]
        channels = 32
        for out, stride in MOBILENET:
            layers.append(_torch_conv_bn(nn, channels, channels, 3, stride, True, groups=channels))
            layers.append(_torch_conv_bn(nn, channels, out, 1, 1, True))
            channels = out
        return nn.Sequential(*layers, *head(channels, 1000)), (3, 224, 224)
    stages, imagenet, classes = (RESNET18, True, 1000) if name == "resnet18" else (CIFAR, False, 10)
    if imagenet:
        layers = [_torch_conv_bn(nn, 3, 64, 7, 2, True), nn.MaxPool2d(3, 2, 1)]
        shape = (3, 224, 224)
    else:
        layers = [_torch_conv_bn(nn, 3, stages[0][1], 3, 1, True)]
        shape = (3, 32, 32)
    channels = stages[0][1]
    for s, (blocks, width) in enumerate(stages):
        for b in range(blocks):
            layers.append(Basic(channels, width, 2 if s > 0 and b == 0 else 1))
            channels = width
    return nn.Sequential(*layers, *head(channels, classes)), shape


def torch_inference(torch, name: str, batch: int, n: int) -> float:
    model, shape = torch_network(torch, name)
    model.eval()
    data = torch.rand(batch, *shape) * 2 - 1

    def run() -> None:
        with torch.no_grad():
            model(data)

    return _rate(run, n)


def torch_cifar_trainer(torch):
    model, shape = torch_network(torch, "cifar_resnet")
    model.train()
    data = torch.rand(CIFAR_BATCH, *shape) * 2 - 1
    label = torch.randint(0, 10, (CIFAR_BATCH,))
    return torch_sgd_step(torch, model, data, label)


def torch_workload(torch, workload: str) -> Result:
    if workload == "resnet18_b1":
        return torch_inference(torch, "resnet18", 1, 10) * 1e3, "ms/image", False
    if workload == "resnet18_b16":
        return 16 / torch_inference(torch, "resnet18", 16, 2), "images/s", True
    if workload == "mobilenet_b1":
        return torch_inference(torch, "mobilenet", 1, 10) * 1e3, "ms/image", False
    if workload == "cifar_resnet_train":
        return best_rate(torch_cifar_trainer(torch), lambda: None, 10), "steps/s", True
    if workload == "resnet18_rss":
        torch_inference(torch, "resnet18", 16, 1)
        return peak_rss_mb(), "MiB", False
    raise KeyError(workload)


WORKLOADS = ["resnet18_b1", "resnet18_b16", "mobilenet_b1", "cifar_resnet_train", "resnet18_rss"]

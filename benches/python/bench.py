"""End-to-end workloads for rsmx, run side by side with a reference.

    python benches/python/bench.py [--ref /path/to/python] [--only NAME ...] [--json FILE]

Runs each workload against rsmx in this interpreter and, with ``--ref``, against MXNet 1.9.1
or PyTorch (whichever the other interpreter has) in a subprocess started by this same
invocation, then prints each figure and the ratio rsmx / reference. numpy figures are taken
in this interpreter for the workloads where numpy is the yardstick. The machine is shared
and noisy: every figure is the best of several repeats, and only ratios measured in one run
should be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convnets  # noqa: E402
import fit_bench  # noqa: E402
import kvstore_bench  # noqa: E402
import rnn_bench  # noqa: E402
import training  # noqa: E402

# Each workload returns (value, unit, higher_is_better).
Result = tuple[float, str, bool]


def best_of(repeats: int, fn: Callable[[], float]) -> float:
    """The smallest of ``repeats`` timings (seconds) returned by ``fn``."""
    return min(fn() for _ in range(repeats))


# ------------------------------------------------------------------ backends


class MXBackend:
    """rsmx or MXNet 1.x: the same API."""

    def __init__(self, module_name: str):
        self.name = module_name
        self.mx = __import__(module_name)

    def tiny_op(self, n: int = 20000) -> Result:
        return self._add_loop(n, record=False)

    def autograd_tiny_op(self, n: int = 20000) -> Result:
        """``tiny_op`` while autograd records, on arrays with gradients attached."""
        return self._add_loop(n, record=True)

    def _add_loop(self, n: int, record: bool) -> Result:
        """``a + b`` on 10-element arrays, ``n`` times, in µs per op; with ``record``, the
        arrays have gradients attached and the loop runs inside ``autograd.record()``."""
        import contextlib

        mx = self.mx
        a = mx.nd.ones((10,))
        b = mx.nd.ones((10,))
        if record:
            a.attach_grad()
            b.attach_grad()
        mx.nd.waitall()

        def run() -> float:
            t = time.perf_counter()
            with mx.autograd.record() if record else contextlib.nullcontext():
                for _ in range(n):
                    c = a + b
            mx.nd.waitall()
            del c
            return time.perf_counter() - t

        return best_of(5, run) / n * 1e6, "us/op", False

    def parallel_chains(self) -> Result:
        mx = self.mx
        x = mx.nd.ones((65536,)) * 0.5
        y = mx.nd.ones((65536,)) * 0.25
        mx.nd.waitall()

        def one_chain() -> float:
            t = time.perf_counter()
            a = x
            for _ in range(1000):
                a = mx.nd.tanh(a)
            mx.nd.waitall()
            return time.perf_counter() - t

        def two_chains() -> float:
            t = time.perf_counter()
            a, b = x, y
            for _ in range(500):
                a = mx.nd.tanh(a)
                b = mx.nd.tanh(b)
            mx.nd.waitall()
            return time.perf_counter() - t

        t1 = best_of(5, one_chain)
        t2 = best_of(5, two_chains)
        return t1 / t2, "x speed-up", True

    def elemwise(self) -> Result:
        mx = self.mx
        n = 16 * 1024 * 1024
        a = mx.nd.ones((n,)) * 1.5
        b = mx.nd.ones((n,)) * 0.5
        mx.nd.waitall()

        def run() -> float:
            t = time.perf_counter()
            c = a * b + a
            c.wait_to_read()
            return time.perf_counter() - t

        run()
        return best_of(10, run) * 1e3, "ms", False

    def dot(self) -> Result:
        mx = self.mx
        a = mx.nd.random.uniform(shape=(1024, 1024))
        b = mx.nd.random.uniform(shape=(1024, 1024))
        mx.nd.waitall()

        def run() -> float:
            t = time.perf_counter()
            c = mx.nd.dot(a, b)
            c.wait_to_read()
            return time.perf_counter() - t

        run()
        return 2 * 1024**3 / best_of(10, run) / 1e9, "GFLOP/s", True

    def mlp_train_small(self) -> Result:
        return training.mx_train_rate(self.mx, "mlp_train_small")

    def mlp_train_large(self) -> Result:
        return training.mx_train_rate(self.mx, "mlp_train_large")

    def lenet_train(self) -> Result:
        return training.mx_train_rate(self.mx, "lenet_train")

    def mlp_large_exec_mem(self) -> Result:
        return training.mx_memory(self.mx, "mlp_train_large", "exec")

    def lenet_exec_mem(self) -> Result:
        return training.mx_memory(self.mx, "lenet_train", "exec")

    def mlp_large_rss(self) -> Result:
        return training.mx_memory(self.mx, "mlp_train_large", "rss")

    def lenet_rss(self) -> Result:
        return training.mx_memory(self.mx, "lenet_train", "rss")

    def kv_local(self) -> Result:
        return kvstore_bench.mx_kv_local(self.mx)

    def kv_local_pushpull(self) -> Result:
        return kvstore_bench.mx_kv_local(self.mx, pull=True)

    def kv_small(self) -> Result:
        return kvstore_bench.mx_kv_small(self.mx)

    def module_fit_lenet(self) -> Result:
        return fit_bench.mx_fit_lenet(self.mx)

    def __getattr__(self, workload: str):
        if workload in convnets.WORKLOADS:
            return lambda: convnets.mx_workload(self.mx, workload)
        if workload in rnn_bench.WORKLOADS:
            return lambda: rnn_bench.mx_workload(self.mx, workload)
        raise AttributeError(workload)


class TorchBackend:
    """PyTorch on the CPU."""

    name = "torch"

    def __init__(self) -> None:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        self.torch = torch

    def tiny_op(self, n: int = 20000) -> Result:
        return self._add_loop(n, requires_grad=False)

    def autograd_tiny_op(self, n: int = 20000) -> Result:
        return self._add_loop(n, requires_grad=True)

    def _add_loop(self, n: int, requires_grad: bool) -> Result:
        """``a + b`` on 10-element tensors, ``n`` times, in µs per op."""
        torch = self.torch
        a = torch.ones(10, requires_grad=requires_grad)
        b = torch.ones(10, requires_grad=requires_grad)

        def run() -> float:
            t = time.perf_counter()
            for _ in range(n):
                c = a + b
            del c
            return time.perf_counter() - t

        return best_of(5, run) / n * 1e6, "us/op", False

    def parallel_chains(self) -> Result:
        return float("nan"), "x speed-up", True

    def elemwise(self) -> Result:
        torch = self.torch
        n = 16 * 1024 * 1024
        a = torch.full((n,), 1.5)
        b = torch.full((n,), 0.5)

        def run() -> float:
            t = time.perf_counter()
            c = a * b + a
            del c
            return time.perf_counter() - t

        run()
        return best_of(10, run) * 1e3, "ms", False

    def dot(self) -> Result:
        torch = self.torch
        a = torch.rand(1024, 1024)
        b = torch.rand(1024, 1024)

        def run() -> float:
            t = time.perf_counter()
            torch.mm(a, b)
            return time.perf_counter() - t

        run()
        return 2 * 1024**3 / best_of(10, run) / 1e9, "GFLOP/s", True

    def mlp_train_small(self) -> Result:
        return training.torch_train_rate(self.torch, "mlp_train_small")

    def mlp_train_large(self) -> Result:
        return training.torch_train_rate(self.torch, "mlp_train_large")

    def lenet_train(self) -> Result:
        return training.torch_train_rate(self.torch, "lenet_train")

    def mlp_large_rss(self) -> Result:
        return training.torch_memory(self.torch, "mlp_train_large")

    def lenet_rss(self) -> Result:
        return training.torch_memory(self.torch, "lenet_train")

    def __getattr__(self, workload: str):
        if workload in convnets.WORKLOADS:
            return lambda: convnets.torch_workload(self.torch, workload)
        if workload in rnn_bench.WORKLOADS:
            return lambda: rnn_bench.torch_workload(self.torch, workload)
        raise AttributeError(workload)


class NumpyBackend:
    """numpy, the yardstick for element-wise work."""

    name = "numpy"

    def __init__(self) -> None:
        import numpy

        self.np = numpy

    def elemwise(self) -> Result:
        np = self.np
        n = 16 * 1024 * 1024
        a = np.full(n, 1.5, dtype=np.float32)
        b = np.full(n, 0.5, dtype=np.float32)

        def run() -> float:
            t = time.perf_counter()
            c = a * b + a
            del c
            return time.perf_counter() - t

        run()
        return best_of(10, run) * 1e3, "ms", False

    def dot(self) -> Result:
        np = self.np
        a = np.random.rand(1024, 1024).astype(np.float32)
        b = np.random.rand(1024, 1024).astype(np.float32)

        def run() -> float:
            t = time.perf_counter()
            a @ b
            return time.perf_counter() - t

        run()
        return 2 * 1024**3 / best_of(10, run) / 1e9, "GFLOP/s", True

    def kv_local(self) -> Result:
        return kvstore_bench.numpy_kv_local(self.np)


WORKLOADS = [
    "tiny_op",
    "autograd_tiny_op",
    "parallel_chains",
    "elemwise",
    "dot",
    "mlp_train_small",
    "mlp_train_large",
    "lenet_train",
    "mlp_large_exec_mem",
    "lenet_exec_mem",
    "mlp_large_rss",
    "lenet_rss",
    "kv_local",
    "kv_local_pushpull",
    "kv_small",
    "module_fit_lenet",
    *convnets.WORKLOADS,
    *rnn_bench.WORKLOADS,
]
# Peak-memory workloads run each in a process of its own.
ISOLATED = {"mlp_large_rss", "lenet_rss", "resnet18_rss"}


def make_backend(name: str):
    if name in ("rsmx", "mxnet"):
        return MXBackend(name)
    if name == "torch":
        return TorchBackend()
    if name == "numpy":
        return NumpyBackend()
    raise SystemExit(f"unknown backend {name}")


FAILED_UNIT = "failed"


def run_backend(name: str, only: list[str]) -> dict[str, Result]:
    """Each workload's figure; one that raises is reported on stderr and recorded as NaN
    with the unit "failed", so that the other workloads and backends still report."""
    backend = make_backend(name)
    out = {}
    for w in only:
        fn = getattr(backend, w, None)
        if fn is None:
            continue
        try:
            out[w] = fn()
        except Exception as e:
            print(f"{name} {w} failed: {type(e).__name__}: {e}", file=sys.stderr)
            out[w] = (float("nan"), FAILED_UNIT, True)
    return out


def detect_reference(python: str) -> str:
    code = (
        "import importlib.util as u;"
        "print('mxnet' if u.find_spec('mxnet') else 'torch' if u.find_spec('torch') else 'none')"
    )
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def run_process(python: str, backend: str, only: list[str], keep_env: bool) -> dict[str, Result]:
    """Runs workloads ``only`` on ``backend`` in a new ``python`` process."""
    env = dict(os.environ)
    if not keep_env:
        env.pop("PYTHONPATH", None)
    cmd = [python, os.path.abspath(__file__), "--backend", backend, "--json", "-", "--only", *only]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          cwd=os.getcwd() if keep_env else "/")
    if proc.returncode != 0:
        raise SystemExit(f"{backend} run failed:\n{proc.stderr}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    for line in proc.stderr.splitlines():
        if line.startswith(f"{backend} ") and " failed: " in line:
            print(line, file=sys.stderr)
    return res


def run_split(python: str, backend: str, only: list[str], keep_env: bool) -> dict[str, Result]:
    """Runs ``only`` in one process, except the isolated workloads, one process each."""
    shared = [w for w in only if w not in ISOLATED]
    out = run_process(python, backend, shared, keep_env) if shared else {}
    for w in only:
        if w in ISOLATED:
            out.update(run_process(python, backend, [w], keep_env))
    return out


def run_reference(python: str, only: list[str]) -> tuple[str, dict[str, Result]]:
    backend = detect_reference(python)
    if backend == "none":
        raise SystemExit(f"{python} has neither mxnet nor torch")
    return backend, run_split(python, backend, only, keep_env=False)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ref", action="append", default=[], help="python of an environment with MXNet 1.9.1 or PyTorch")
    p.add_argument("--only", nargs="*", default=WORKLOADS)
    p.add_argument("--backend", default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", default=None, help="write the figures as JSON to this file ('-' for stdout)")
    p.add_argument("--busy", type=int, default=0,
                   help="keep this many other processes spinning on the CPU throughout (a busy machine)")
    args = p.parse_args()

    if args.backend:
        res = run_backend(args.backend, args.only)
        print(json.dumps(res))
        return

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        results = run_all(args)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    report(args, results)


def run_all(args) -> dict[str, dict[str, Result]]:
    """Every backend's figures, rsmx first."""
    shared = [w for w in args.only if w not in ISOLATED]
    results: dict[str, dict[str, Result]] = {"rsmx": run_backend("rsmx", shared)}
    for w in args.only:
        if w in ISOLATED:
            results["rsmx"].update(run_process(sys.executable, "rsmx", [w], keep_env=True))
    numpy_workloads = [w for w in ("elemwise", "dot", "kv_local") if w in args.only]
    if numpy_workloads:
        results["numpy"] = run_backend("numpy", numpy_workloads)
    for ref in args.ref:
        name, res = run_reference(ref, args.only)
        results[name] = res
    return results


def report(args, results: dict[str, dict[str, Result]]) -> None:
    """Prints each figure with its ratio to rsmx's, and writes the JSON if asked."""
    print(f"{'workload':<20}{'backend':<8}{'figure':>14}  unit         rsmx/ref")
    for w in args.only:
        mine = results["rsmx"].get(w)
        for name, res in results.items():
            if w not in res:
                continue
            value, unit, higher = res[w]
            ratio = ""
            if name != "rsmx" and mine and mine[0] == mine[0] and value == value and value != 0:
                r = mine[0] / value if higher else value / mine[0]
                ratio = f"{r:6.2f}x {'better' if r >= 1 else 'worse'}"
            print(f"{w:<20}{name:<8}{value:>14.3f}  {unit:<12} {ratio}")
    if args.json:
        text = json.dumps(results, indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

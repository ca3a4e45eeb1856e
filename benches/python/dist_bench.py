"""Distributed KVStore benchmark on loopback, rsmx side by side with MXNet 1.9.1.

Runs a job of a scheduler, S servers and 2 workers for each side in turn (``--rounds``
times, keeping each figure's best), and prints per side and the ratio rsmx/MXNet:

- small: p50 of push + pull + wait of a 10-float key, ms;
- 16MB: p50 of push + pull + wait of a 16 MB key, ms, and the throughput per worker;
- 20x1MB: p50 of a round that pushes then pulls 20 keys of 1 MB, ms;
- fit: samples per second of ``Module.fit`` of a LeNet over the 2 workers.

    python benches/python/dist_bench.py --ref .mxref/bin/python [--servers 1 2] [--rounds 3]

Without ``--ref`` (a Python with MXNet 1.9.1), only rsmx runs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


# ----------------------------------------------------------------------------- worker


def _lenet(mx):
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(5, 5), num_filter=20)
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.Convolution(net, kernel=(5, 5), num_filter=50)
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.Flatten(net)
    net = mx.sym.FullyConnected(net, num_hidden=500)
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=10)
    return mx.sym.SoftmaxOutput(net, name="softmax")


def worker(iters: int) -> None:
    """One worker: times each figure and prints them as JSON (rank 0 only)."""
    import numpy as np

    if os.environ.get("DIST_BENCH_IMPL") == "mxnet":
        import mxnet as mx
    else:
        import rsmx as mx
    kv = mx.kv.create("dist_sync")

    def p50(fn, n: int) -> float:
        times = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return float(np.median(times)) * 1e3

    def round_trip(key: str, elements: int):
        """A push+pull+wait of a new key of ``elements`` floats, as a callable."""
        value, out = mx.nd.ones((elements,)), mx.nd.zeros((elements,))
        kv.init(key, value)

        def run():
            kv.push(key, value)
            kv.pull(key, out=out)
            out.wait_to_read()

        return run

    # String keys throughout: Module.fit below adds its parameters' names to this store.
    figures = {}
    small_round = round_trip("small", 10)
    p50(small_round, 20)
    figures["small_ms"] = p50(small_round, iters * 10)
    big_round = round_trip("big", 4 << 20)
    p50(big_round, 3)
    figures["16MB_ms"] = p50(big_round, iters)
    figures["16MB_MBps"] = 2 * 16 / (figures["16MB_ms"] / 1e3)

    keys = [f"k{i}" for i in range(20)]
    vals = [mx.nd.ones((1 << 18,)) for _ in keys]
    outs = [mx.nd.zeros((1 << 18,)) for _ in keys]
    kv.init(keys, vals)

    def many_round():
        for i, k in enumerate(keys):
            kv.push(k, vals[i], priority=-i)
        for i, k in enumerate(keys):
            kv.pull(k, out=outs[i], priority=-i)
        for o in outs:
            o.wait_to_read()

    p50(many_round, 3)
    figures["20x1MB_ms"] = p50(many_round, iters)

    # Module.fit of a LeNet on random 32x32 images, this worker's share of them.
    rng = np.random.RandomState(kv.rank)
    n, batch = 1024, 32
    x = rng.rand(n, 1, 32, 32).astype(np.float32)
    y = rng.randint(0, 10, n).astype(np.float32)
    it = mx.io.NDArrayIter(x, y, batch)
    mod = mx.mod.Module(_lenet(mx), context=[mx.cpu(0)])
    mod.fit(it, kvstore=kv, optimizer="sgd", optimizer_params={"learning_rate": 0.01},
            num_epoch=1)  # warm-up: binding, first rounds
    it.reset()
    start = time.perf_counter()
    mod.fit(it, kvstore=kv, optimizer="sgd", optimizer_params={"learning_rate": 0.01},
            begin_epoch=1, num_epoch=3)
    mx.nd.waitall()
    figures["fit_samples_per_s"] = 2 * n * kv.num_workers / (time.perf_counter() - start)
    if kv.rank == 0:
        print("FIGURES " + json.dumps(figures), flush=True)


# ----------------------------------------------------------------------------- driver


def run_job(python: str, impl: str, servers: int, iters: int) -> dict[str, float]:
    """Starts a job of one side on loopback; rank 0's figures."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    base.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(port),
                DMLC_NUM_SERVER=str(servers), DMLC_NUM_WORKER="2", DMLC_NODE_HOST="127.0.0.1",
                DIST_BENCH_IMPL=impl, OMP_NUM_THREADS="1")
    package = "import mxnet" if impl == "mxnet" else "import rsmx"
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        def spawn(role: str, argv: list[str]) -> subprocess.Popen:
            out = open(Path(tmp) / f"{role}-{len(procs)}.log", "w")  # noqa: SIM115
            p = subprocess.Popen([python, *argv], env=dict(base, DMLC_ROLE=role), stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(p)
            return p

        try:
            spawn("scheduler", ["-c", package])
            for _ in range(servers):
                spawn("server", ["-c", package])
            workers = [spawn("worker", [str(HERE), "--worker", "--iters", str(iters)])
                       for _ in range(2)]
            for w in workers:
                w.wait(timeout=600)
            for p in procs:
                p.wait(timeout=60)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        logs = "".join(f.read_text() for f in sorted(Path(tmp).glob("*.log")))
    for line in logs.splitlines():
        if line.startswith("FIGURES "):
            return json.loads(line[len("FIGURES "):])
    raise SystemExit(f"{impl} job with {servers} server(s) gave no figures:\n{logs[-4000:]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--ref", help="a Python with MXNet 1.9.1")
    p.add_argument("--servers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if args.worker:
        worker(args.iters)
        return
    sides = [("rsmx", sys.executable)] + ([("mxnet", args.ref)] if args.ref else [])
    lower_better = {"small_ms", "16MB_ms", "20x1MB_ms"}
    for servers in args.servers:
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.rounds):
            for impl, python in sides:  # interleaved, as the machine's load changes
                got = run_job(python, impl, servers, args.iters)
                mine = best.setdefault(impl, {})
                for k, v in got.items():
                    better = min if k in lower_better else max
                    mine[k] = better(mine.get(k, v), v)
        print(f"\n== 2 workers, {servers} server(s), best of {args.rounds}")
        print(f"{'figure':<20}" + "".join(f"{impl:>12}" for impl, _ in sides)
              + ("   rsmx/mxnet" if len(sides) > 1 else ""))
        for k in best["rsmx"]:
            row = f"{k:<20}" + "".join(f"{best[impl][k]:>12.2f}" for impl, _ in sides)
            if len(sides) > 1:
                row += f"{best['rsmx'][k] / best['mxnet'][k]:>13.2f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()

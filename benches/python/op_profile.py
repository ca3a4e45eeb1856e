"""Per-operator time of a convolutional workload, from each framework's own profiler
(``mx.profiler``), side by side: rsmx here, and MXNet 1.9.1 through ``--ref``.

    python benches/python/op_profile.py --workload cifar_resnet_train --ref /path/to/mxnet/python

Each framework runs the workload's steps for a while untimed, then ``--steps`` steps under
its profiler; the table gives milliseconds per step for each operator (summed over the
threads that ran it, so parallel operators can add up to more than the step's wall time)
and the step's wall time. MXNet runs without its bulks of operators here (it would
time a bulk as one entry), which can make its steps a little slower than in bench.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

WORKLOADS = ["cifar_resnet_train", "resnet18_b1", "resnet18_b16", "mobilenet_b1"]


def make_step(mx, workload: str):
    import convnets

    if workload == "cifar_resnet_train":
        return convnets.mx_cifar_trainer(mx)
    net, batch = {"resnet18_b1": ("resnet18", 1), "resnet18_b16": ("resnet18", 16), "mobilenet_b1": ("mobilenet", 1)}[
        workload
    ]
    ex = convnets.mx_inference_executor(mx, net, batch)
    return lambda: ex.forward(is_train=False)


def profile(module: str, workload: str, steps: int) -> dict:
    """Operator name to ms per step, and the step's wall time under the profiler."""
    mx = __import__(module)
    step = make_step(mx, workload)
    for _ in range(5):
        step()
    mx.nd.waitall()
    with tempfile.TemporaryDirectory() as tmp:
        mx.profiler.set_config(
            profile_symbolic=True,
            profile_imperative=True,
            profile_memory=False,
            profile_api=False,
            aggregate_stats=True,
            filename=os.path.join(tmp, "trace.json"),
        )
        mx.profiler.set_state("run")
        t = time.perf_counter()
        for _ in range(steps):
            step()
        mx.nd.waitall()
        wall = (time.perf_counter() - t) / steps * 1000
        mx.profiler.set_state("stop")
        stats = json.loads(mx.profiler.dumps(format="json"))
    ops = stats["Time"].get("operator", {})
    return {"wall": wall, "ops": {k: v["Total"] / steps for k, v in ops.items()}}


def reference(python: str, workload: str, steps: int) -> dict:
    # MXNet profiles a bulk of operators as one entry; without bulks it times each one.
    env = dict(os.environ, MXNET_EXEC_BULK_EXEC_TRAIN="0", MXNET_EXEC_BULK_EXEC_INFERENCE="0")
    out = subprocess.run(
        [python, os.path.abspath(__file__), "--workload", workload, "--steps", str(steps), "--emit", "mxnet"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=WORKLOADS, default="cifar_resnet_train")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--ref", help="python of an environment with MXNet 1.9.1")
    ap.add_argument("--emit", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.emit:
        print(json.dumps(profile(args.emit, args.workload, args.steps)))
        return
    sides = {"rsmx": profile("rsmx", args.workload, args.steps)}
    if args.ref:
        sides["mxnet"] = reference(args.ref, args.workload, args.steps)
    names = sorted({k for s in sides.values() for k in s["ops"]}, key=lambda k: -max(s["ops"].get(k, 0) for s in sides.values()))
    print(f"{args.workload}: ms per step")
    print(f"{'operator':<34}" + "".join(f"{n:>12}" for n in sides))
    for k in names:
        print(f"{k[:34]:<34}" + "".join(f"{s['ops'].get(k, 0.0):>12.3f}" for s in sides.values()))
    print(f"{'(sum of operators)':<34}" + "".join(f"{sum(s['ops'].values()):>12.3f}" for s in sides.values()))
    print(f"{'(wall time of a step)':<34}" + "".join(f"{s['wall']:>12.3f}" for s in sides.values()))


if __name__ == "__main__":
    main()

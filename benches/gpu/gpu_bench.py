"""GPU figures for rsmx's first run on a real GPU, next to PyTorch on the same device.

    python gpu_bench.py --out OUTDIR [--budget SECONDS] [--only FIGURE ...]

Writes ``OUTDIR/figures.json`` and prints a table. Every figure runs in a child process of
its own (PyTorch's all in one) with a time limit, so a failure, a missing operator or a
hang costs only that figure: it is recorded as ``not available: <message>``, ``error``
or ``timeout`` and the rest go on.

Figures (n = 64M float32 for the bandwidth ones):

- ``copy_bw``: ``dst.copy_(src)`` in PyTorch, GB/s counting read + write (2 n 4 bytes);
- ``torch_elemwise`` / ``rsmx_elemwise``: ``c = a * b + a``, two kernels each reading two
  arrays and writing one, so 6 n 4 bytes an iteration; steady state over 3 blocks of 20
  iterations, best block; rsmx's is also given as a fraction of ``copy_bw`` (target 0.85);
- ``torch_tiny_chain`` / ``rsmx_tiny_chain``: 1000 dependent ``x = x + 1`` on a 1-element
  array, µs per op (rsmx's target: 5) up to the result on the host (``item`` /
  ``asnumpy``), and for rsmx ``rsmx.cuda.stats()['host_syncs']`` before the chain, after it
  (nothing waited on yet) and after ``asnumpy``;
- ``torch_dot`` / ``rsmx_dot``: 4096 x 4096 float32 GEMM, TFLOP/s, TF32 off; rsmx's also
  with its relative error against numpy float64 on 512 x 512;
- ``*_mlp_train_large`` / ``*_lenet_train``: training steps per second of the workloads of
  ``benches/python/training.py`` (same networks, batch sizes, initial ranges and SGD
  update), on cuda / gpu(0); rsmx's also with the GPU allocations and frees made during
  the timed steps (expected 0 once pools are warm).

``ratio_to_torch`` is rsmx's figure divided by PyTorch's (higher is better except for
µs/op); ``fraction_of_copy_bw`` is an element-wise figure divided by ``copy_bw``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

N_BW = 64 * 1024 * 1024
BLOCK_ITERS = 20
BLOCKS = 3
GEMM = 4096
TRAIN_STEPS = 100
CHAIN = 1000

# child group -> (figures it produces, seconds allowed)
GROUPS = {
    "torch": (["copy_bw", "torch_elemwise", "torch_tiny_chain", "torch_dot",
               "torch_mlp_train_large", "torch_lenet_train"], 150),
    "rsmx_elemwise": (["rsmx_elemwise"], 60),
    "rsmx_tiny_chain": (["rsmx_tiny_chain"], 60),
    "rsmx_dot": (["rsmx_dot"], 60),
    "rsmx_mlp_train_large": (["rsmx_mlp_train_large"], 90),
    "rsmx_lenet_train": (["rsmx_lenet_train"], 90),
}


def reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def fig(value: float | None, unit: str, **extra) -> dict:
    return {"status": "ok", "value": value, "unit": unit, **extra}


def unavailable(e: BaseException) -> dict:
    return {"status": "not available", "note": reason(e)}


# ------------------------------------------------------------------ PyTorch


def torch_timed(torch, fn, iters: int) -> float:
    """Seconds per call of ``fn``, best of BLOCKS blocks of ``iters``, timed with CUDA
    events."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(BLOCKS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / iters)
    return best


def torch_copy_bw(torch, dev) -> dict:
    src = torch.rand(N_BW, device=dev)
    dst = torch.empty_like(src)
    s = torch_timed(torch, lambda: dst.copy_(src), BLOCK_ITERS)
    return fig(2 * N_BW * 4 / s / 1e9, "GB/s", ms=s * 1e3)


def torch_elemwise(torch, dev) -> dict:
    a = torch.full((N_BW,), 1.5, device=dev)
    b = torch.full((N_BW,), 0.5, device=dev)
    s = torch_timed(torch, lambda: a * b + a, BLOCK_ITERS)
    return fig(6 * N_BW * 4 / s / 1e9, "GB/s", ms=s * 1e3)


def torch_tiny_chain(torch, dev) -> dict:
    x = torch.zeros(1, device=dev)
    for _ in range(100):
        x = x + 1
    x.item()
    x = torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(CHAIN):
        x = x + 1
    t_enqueue = time.perf_counter() - t
    value = x.item()
    t_total = time.perf_counter() - t
    return fig(t_total / CHAIN * 1e6, "us/op", enqueue_us_per_op=t_enqueue / CHAIN * 1e6,
               correct=value == CHAIN)


def torch_dot(torch, dev) -> dict:
    a = torch.rand(GEMM, GEMM, device=dev)
    b = torch.rand(GEMM, GEMM, device=dev)
    s = torch_timed(torch, lambda: torch.mm(a, b), 10)
    return fig(2 * GEMM**3 / s / 1e12, "TFLOP/s", ms=s * 1e3, tf32=False)


def torch_train(torch, dev, name: str) -> dict:
    """``training.torch_trainer``'s step, with the model and the batch on ``dev``."""
    import training

    model, dshape = training.torch_network(torch, name)
    model = model.to(dev)
    data = torch.rand(dshape, device=dev) * 2 - 1
    label = torch.randint(0, 10, (dshape[0],), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    batch = dshape[0]
    params = list(model.parameters())

    def step() -> None:
        for p in params:
            p.grad = None
        loss_fn(model(data), label).backward()
        with torch.no_grad():
            for p in params:
                p -= training.LR * p.grad / batch

    return fig(training.best_rate(step, torch.cuda.synchronize, TRAIN_STEPS), "steps/s")


def torch_figures() -> dict:
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        dev = torch.device("cuda", 0)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        info = {"torch": torch.__version__, "cuda": torch.version.cuda,
                "device": torch.cuda.get_device_name(0)}
    except Exception as e:
        return {f: unavailable(e) for f in GROUPS["torch"][0]}
    out: dict = {}
    figures = {
        "copy_bw": lambda: torch_copy_bw(torch, dev),
        "torch_elemwise": lambda: torch_elemwise(torch, dev),
        "torch_tiny_chain": lambda: torch_tiny_chain(torch, dev),
        "torch_dot": lambda: torch_dot(torch, dev),
        "torch_mlp_train_large": lambda: torch_train(torch, dev, "mlp_train_large"),
        "torch_lenet_train": lambda: torch_train(torch, dev, "lenet_train"),
    }
    for name, fn in figures.items():
        try:
            out[name] = fn()
        except Exception as e:
            out[name] = {"status": "error", "note": reason(e)}
        try:
            torch.cuda.empty_cache()
        except Exception:
            pass
    if out["copy_bw"].get("status") == "ok":
        out["copy_bw"].update(info)
    return out


# ------------------------------------------------------------------ rsmx


def rsmx_gpu():
    """``(mx, ctx)`` once a gpu(0) array can be made and read, else raises."""
    import rsmx as mx

    if mx.context.num_gpus() == 0:
        raise RuntimeError("rsmx.context.num_gpus() == 0")
    ctx = mx.gpu(0)
    mx.nd.ones((1,), ctx=ctx).asnumpy()
    return mx, ctx


def rsmx_stats() -> dict | None:
    try:
        import rsmx.cuda

        return dict(rsmx.cuda.stats())
    except Exception:
        return None


def stats_delta(before: dict | None, after: dict | None) -> dict | str:
    if before is None or after is None:
        return "rsmx.cuda.stats() not available yet"
    return {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], int)}


def rsmx_elemwise() -> dict:
    try:
        mx, ctx = rsmx_gpu()
        a = mx.nd.full((N_BW,), 1.5, ctx=ctx)
        b = mx.nd.full((N_BW,), 0.5, ctx=ctx)
        c = a * b + a
        mx.nd.waitall()
    except Exception as e:
        return unavailable(e)
    best = float("inf")
    for _ in range(BLOCKS):
        t = time.perf_counter()
        for _ in range(BLOCK_ITERS):
            c = a * b + a
        mx.nd.waitall()
        best = min(best, (time.perf_counter() - t) / BLOCK_ITERS)
    got = c.asnumpy()
    correct = bool((got == 2.25).all())
    return fig(6 * N_BW * 4 / best / 1e9, "GB/s", ms=best * 1e3, correct=correct)


def rsmx_tiny_chain() -> dict:
    try:
        mx, ctx = rsmx_gpu()
        x = mx.nd.zeros((1,), ctx=ctx)
        for _ in range(100):  # warm-up: kernels loaded, pools filled
            x = x + 1
        x.asnumpy()
    except Exception as e:
        return unavailable(e)
    x = mx.nd.zeros((1,), ctx=ctx)
    mx.nd.waitall()
    s0 = rsmx_stats()
    t = time.perf_counter()
    for _ in range(CHAIN):
        x = x + 1
    t_enqueue = time.perf_counter() - t
    s1 = rsmx_stats()
    value = float(x.asnumpy()[0])
    t_total = time.perf_counter() - t
    s2 = rsmx_stats()
    syncs = [s.get("host_syncs") if s else None for s in (s0, s1, s2)]
    return fig(t_total / CHAIN * 1e6, "us/op", enqueue_us_per_op=t_enqueue / CHAIN * 1e6,
               correct=value == CHAIN, host_syncs_before_chain_after_asnumpy=syncs,
               stats=s2 if s2 is not None else "rsmx.cuda.stats() not available yet")


def rsmx_dot() -> dict:
    import numpy as np

    try:
        mx, ctx = rsmx_gpu()
        rng = np.random.default_rng(0)
        x = rng.uniform(-1, 1, (512, 512)).astype(np.float32)
        y = rng.uniform(-1, 1, (512, 512)).astype(np.float32)
        got = mx.nd.dot(mx.nd.array(x, ctx=ctx), mx.nd.array(y, ctx=ctx)).asnumpy()
    except Exception as e:
        return unavailable(e)
    want = x.astype(np.float64) @ y.astype(np.float64)
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    a = mx.nd.array(rng.random((GEMM, GEMM), dtype=np.float32), ctx=ctx)
    b = mx.nd.array(rng.random((GEMM, GEMM), dtype=np.float32), ctx=ctx)
    mx.nd.dot(a, b).wait_to_read()
    best = float("inf")
    for _ in range(BLOCKS):
        t = time.perf_counter()
        for _ in range(10):
            mx.nd.dot(a, b)
        # Independent products may run on both GPU workers' streams: wait for all.
        mx.nd.waitall()
        best = min(best, (time.perf_counter() - t) / 10)
    return fig(2 * GEMM**3 / best / 1e12, "TFLOP/s", ms=best * 1e3, rel_err_512=rel)


def rsmx_train(name: str) -> dict:
    import numpy as np
    import training

    try:
        mx, ctx = rsmx_gpu()
        # training.mx_trainer, bound on gpu(0) instead of the CPU.
        sym, dshape, classes = training.mx_network(mx, name)
        reqs = {k: "write" for k in sym.list_arguments() if k not in ("data", "softmax_label")}
        ex = sym.simple_bind(ctx, data=dshape, grad_req=reqs)
        rng = np.random.RandomState(0)
        for k, v in ex.arg_dict.items():
            if k == "data":
                v[:] = rng.uniform(-1, 1, v.shape)
            elif k == "softmax_label":
                v[:] = rng.randint(0, classes, v.shape)
            else:
                v[:] = rng.uniform(-0.07, 0.07, v.shape)
        batch = dshape[0]
        params = [(ex.arg_dict[k], ex.grad_dict[k]) for k in reqs]

        def step() -> None:
            ex.forward(is_train=True)
            ex.backward()
            for w, g in params:
                w[:] -= training.LR * g / batch

        step()
        mx.nd.waitall()
    except Exception as e:
        return unavailable(e)
    for _ in range(5):
        step()
    mx.nd.waitall()
    before = rsmx_stats()
    rate = training.best_rate(step, mx.nd.waitall, TRAIN_STEPS)
    after = rsmx_stats()
    finite = bool(np.isfinite(ex.outputs[0].asnumpy()).all())
    return fig(rate, "steps/s", finite_outputs=finite, stats_during_timed_steps=stats_delta(before, after))


def run_group(group: str) -> dict:
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    if group == "torch":
        return torch_figures()
    if group in ("rsmx_mlp_train_large", "rsmx_lenet_train"):
        return {group: rsmx_train(group[len("rsmx_"):])}
    fn = {"rsmx_elemwise": rsmx_elemwise, "rsmx_tiny_chain": rsmx_tiny_chain, "rsmx_dot": rsmx_dot}[group]
    return {group: fn()}


# ------------------------------------------------------------------ parent


def child(group: str, limit: float) -> dict:
    figures = GROUPS[group][0]
    cmd = [sys.executable, os.path.abspath(__file__), "--child", group]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-400:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        return {f: {"status": "timeout", "note": f"no result within {limit:.0f} s {tail.strip()}"}
                for f in figures}
    elapsed = time.perf_counter() - t
    sys.stderr.write(proc.stderr)
    lines = proc.stdout.strip().splitlines()
    try:
        res = json.loads(lines[-1])
    except Exception:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return {f: {"status": "error", "note": f"exit {proc.returncode}: {tail[0][:300]}"} for f in figures}
    for r in res.values():
        r["child_s"] = round(elapsed, 1)
    return res


def ratio(res: dict, a: str, b: str) -> float | None:
    ra, rb = res.get(a, {}), res.get(b, {})
    if ra.get("status") == "ok" and rb.get("status") == "ok" and ra.get("value") and rb.get("value"):
        return ra["value"] / rb["value"]
    return None


def table(res: dict) -> str:
    lines = [f"{'figure':<24}{'value':>12}  {'unit':<9}{'status':<15}note"]
    for name, r in res.items():
        if name.startswith("_"):
            continue
        v = r.get("value")
        value = f"{v:12.3f}" if isinstance(v, (int, float)) else f"{'-':>12}"
        notes = []
        if r.get("status") != "ok":
            notes.append(r.get("note", ""))
        for k in ("fraction_of_copy_bw", "ratio_to_torch", "rel_err_512", "correct", "finite_outputs",
                  "host_syncs_before_chain_after_asnumpy", "enqueue_us_per_op",
                  "stats_during_timed_steps"):
            if k in r:
                val = r[k]
                notes.append(f"{k}={val:.3g}" if isinstance(val, float) else f"{k}={val}")
        lines.append(f"{name:<24}{value}  {r.get('unit', ''):<9}{r.get('status', '?'):<15}{'; '.join(notes)}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="directory for figures.json")
    p.add_argument("--budget", type=float, default=420.0, help="seconds for all figures together")
    p.add_argument("--only", nargs="*", default=list(GROUPS), help="child groups to run")
    p.add_argument("--summary", default=None, help="write a one-line summary here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.child:
        try:
            res = run_group(args.child)
        except Exception as e:
            res = {f: {"status": "error", "note": reason(e)} for f in GROUPS[args.child][0]}
        print(json.dumps(res))
        return 0

    deadline = time.perf_counter() + args.budget
    res: dict = {}
    for group in args.only:
        left = deadline - time.perf_counter()
        if left < 10:
            res.update({f: {"status": "skipped", "note": "time budget spent"} for f in GROUPS[group][0]})
            continue
        res.update(child(group, min(GROUPS[group][1], left - 2)))

    for a, b in (("rsmx_elemwise", "torch_elemwise"), ("rsmx_tiny_chain", "torch_tiny_chain"),
                 ("rsmx_dot", "torch_dot"),
                 ("rsmx_mlp_train_large", "torch_mlp_train_large"), ("rsmx_lenet_train", "torch_lenet_train")):
        r = ratio(res, a, b)
        if r is not None:
            res[a]["ratio_to_torch"] = r
    for name in ("rsmx_elemwise", "torch_elemwise"):
        r = ratio(res, name, "copy_bw")
        if r is not None:
            res[name]["fraction_of_copy_bw"] = r

    text = table(res)
    print(text)
    ok = [n for n, r in res.items() if r.get("status") == "ok"]
    summary = f"{len(ok)}/{len(res)} figures"
    if "fraction_of_copy_bw" in res.get("rsmx_elemwise", {}):
        summary += f"; rsmx elemwise {res['rsmx_elemwise']['fraction_of_copy_bw']:.2f} of copy bw"
    if res.get("rsmx_tiny_chain", {}).get("status") == "ok":
        summary += f"; tiny op {res['rsmx_tiny_chain']['value']:.1f} us"
    if res.get("copy_bw", {}).get("status") == "ok":
        summary += f"; copy {res['copy_bw']['value']:.0f} GB/s"
    print("summary: " + summary)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "figures.json"), "w") as f:
            json.dump(res, f, indent=1)
        with open(os.path.join(args.out, "figures.txt"), "w") as f:
            f.write(text + "\n")
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(summary + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

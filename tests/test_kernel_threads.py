"""CPU kernels on a busy machine: while other processes keep the cores busy, kernels
compute on as many threads as there are free cores, and give the bits they give on that
many threads; with `RSMX_DYNAMIC_THREADS=0` or a fixed thread count they keep the pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

# Runs a convolution and a reduction over every element; with `follow`, first keeps
# running them until the kernels' thread count drops to one (or 60 s pass), with `hold`
# for 2 s. Prints the thread counts and writes the outputs to the file named by the last
# argument.
WORKER = r"""
import json, sys, time
import numpy as np
import rsmx as mx
from rsmx import _core

mode, path = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
x = mx.nd.array(rng.standard_normal((2, 16, 48, 48)).astype(np.float32))
w = mx.nd.array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32))
big = mx.nd.array(rng.standard_normal((1 << 20,)).astype(np.float32))

def run():
    y = mx.nd.Convolution(x, w, kernel=(3, 3), pad=(1, 1), num_filter=16, no_bias=True)
    return y.asnumpy(), mx.nd.sum(big * big).asnumpy()

pool = _core.kernel_threads()
if mode == "follow":
    deadline = time.time() + 60
    while _core.kernel_threads() > 1 and time.time() < deadline:
        run()
elif mode == "hold":
    end = time.time() + 2
    while time.time() < end:
        run()
threads = _core.kernel_threads()
conv, total = run()
np.savez(path, conv=conv, total=total)
print(json.dumps({"pool": pool, "threads": threads, "after": _core.kernel_threads()}))
"""


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def _run(mode: str, env: dict[str, str], tmp: str) -> tuple[dict, dict]:
    path = os.path.join(tmp, f"{mode}-{len(os.listdir(tmp))}.npz")
    full = {**os.environ, **env}
    for name in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "RSMX_DYNAMIC_THREADS"):
        if name not in env:
            full.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", WORKER, mode, path],
        env=full, capture_output=True, text=True, timeout=240, check=False,
    )
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    with np.load(path) as f:
        return counts, {k: f[k] for k in f.files}


@pytest.fixture
def busy_machine():
    """Every core this process may use kept busy by another process."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(_cores())
    ]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()


@pytest.mark.timeout(600)
def test_kernels_narrow_to_the_free_cores_and_match_that_many_threads(busy_machine):
    with tempfile.TemporaryDirectory() as tmp:
        counts, busy = _run("follow", {"RSMX_DYNAMIC_THREADS": "1"}, tmp)
        assert counts["threads"] == 1 and counts["after"] == 1, counts
        _, one_thread = _run("once", {"RAYON_NUM_THREADS": "1"}, tmp)
    for name in ("conv", "total"):
        np.testing.assert_array_equal(busy[name], one_thread[name], err_msg=name)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "env",
    [{"RSMX_DYNAMIC_THREADS": "0"}, {"OMP_NUM_THREADS": str(_cores())}],
    ids=["off", "fixed"],
)
def test_a_fixed_thread_count_ignores_the_load(busy_machine, env):
    with tempfile.TemporaryDirectory() as tmp:
        # Kernels run for long enough to measure the load several times, were it measured.
        counts, _ = _run("hold", env, tmp)
    assert counts["pool"] == counts["threads"] == counts["after"] >= 1, counts
    if "OMP_NUM_THREADS" in env:
        assert counts["pool"] == _cores()

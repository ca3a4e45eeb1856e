"""``python -m rsmx.launch``: a local job runs to the end; a failing worker stops the job
within 15 s, leaving no process behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)
HERE = Path(__file__).parent


def launch(tmp_path: Path, *args: str, timeout: float = 150) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    env["OMP_NUM_THREADS"] = "1"
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "rsmx.launch", *args], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=timeout)
    return r, time.monotonic() - start


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by a parent) is no longer running.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_a_local_job_of_2_workers_and_2_servers_passes(tmp_path):
    r, _ = launch(tmp_path, "-n", "2", "-s", "2", "--launcher", "local",
                  sys.executable, str(HERE / "worker_checks.py"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("CHECKS PASSED") == 2, r.stdout + r.stderr


def test_a_failing_worker_stops_the_job_and_leaves_no_process(tmp_path):
    script = tmp_path / "fail.py"
    pids = tmp_path / "pids"
    pids.mkdir()
    script.write_text(
        "import os, sys, time\n"
        f"open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close()\n"
        "import rsmx as mx\n"
        "kv = mx.kv.create('dist_sync')\n"
        "if kv.rank == 1:\n"
        f"    open(os.path.join({str(tmp_path)!r}, 'failed'), 'w').write(str(os.getpid()))\n"
        "    sys.exit(1)\n"
        "time.sleep(120)\n"
    )
    r, took = launch(tmp_path, "-n", "2", "-s", "2", sys.executable, str(script))
    assert r.returncode != 0, r.stdout + r.stderr
    assert took < 15, f"took {took:.1f} s\n{r.stderr}"
    failed = (tmp_path / "failed").read_text()
    assert f"(pid {failed}) exited with 1" in r.stderr and "worker task" in r.stderr, r.stderr
    started = [int(p.name) for p in pids.iterdir()]
    assert len(started) == 4  # 2 workers and 2 servers ran the script
    time.sleep(0.5)
    assert not [p for p in started if alive(p)], r.stderr


def test_the_launcher_refuses_bad_arguments(tmp_path):
    r, _ = launch(tmp_path, "-n", "0", "true", timeout=60)
    assert r.returncode != 0 and "num-workers" in r.stderr
    r, _ = launch(tmp_path, "-n", "1", "--launcher", "ssh", "true", timeout=60)
    assert r.returncode != 0 and "hostfile" in r.stderr


def test_module_fit_over_2_workers_matches_one_worker_with_the_same_total_batch(tmp_path):
    script = str(HERE / "fit_lenet.py")
    r, _ = launch(tmp_path, "-n", "2", "-s", "2", sys.executable, script,
                  "--kvstore", "dist_sync", "--batch-size", "32", timeout=170)
    assert r.returncode == 0, r.stdout + r.stderr
    dist = [float(a) for a in re.findall(r"ACCURACY ([0-9.]+) ", r.stdout)]
    assert len(dist) == 2, r.stdout
    alone = subprocess.run([sys.executable, script, "--kvstore", "local", "--batch-size", "64"],
                           capture_output=True, text=True, timeout=170)
    assert alone.returncode == 0, alone.stderr
    single = float(alone.stdout.split("ACCURACY")[1].split()[0])
    # Both workers hold the same weights, so they score alike; and as well as one worker.
    assert dist[0] == dist[1], r.stdout
    assert single > 0.9 and abs(dist[0] - single) <= 0.03, (dist, single)

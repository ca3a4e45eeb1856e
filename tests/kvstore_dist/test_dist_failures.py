"""Failures in an rsmx cluster: a killed or hung node makes every other node fail within
10 s, naming the lost node; start-up errors name the address."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dist_cluster import Cluster, mxnet_python

pytestmark = pytest.mark.timeout(120)
LOOP = [str(Path(__file__).with_name("worker_loop.py"))]
VERBOSE = {"PS_VERBOSE": "1"}


def looping(cluster: Cluster, timeout: float = 60) -> None:
    """Waits until every worker is in its loop."""
    deadline = time.monotonic() + timeout
    while not all("LOOPING" in w.output() for w in cluster.by_role("worker")):
        if time.monotonic() > deadline or any(n.proc.poll() is not None for n in cluster.nodes):
            raise AssertionError(f"the cluster did not start\n{cluster.report()}")
        time.sleep(0.05)


def rank_of(node) -> int:
    """The rank the scheduler gave ``node``, from its ``PS_VERBOSE=1`` log (ids 8, 10, ...
    are servers 0, 1, ...; 9, 11, ... workers 0, 1, ...)."""
    found = re.search(r"\b[SW]\[(\d+)\] is connected", node.output())
    assert found, node.output()
    return (int(found.group(1)) - 8) // 2


def all_fail_within(cluster: Cluster, nodes, seconds: float, naming: str) -> None:
    start = time.monotonic()
    codes = cluster.wait(seconds + 2, nodes)
    took = time.monotonic() - start
    assert all(c not in (None, 0) for c in codes.values()), f"{codes}\n{cluster.report()}"
    assert took < seconds, f"took {took:.1f} s\n{cluster.report()}"
    for n in nodes:
        assert naming in n.output(), f"{n.name} does not name {naming!r}\n{cluster.report()}"


@pytest.mark.parametrize("victim", ["server", "worker", "scheduler"])
def test_a_killed_node_fails_every_other_node_naming_it(tmp_path, victim):
    with Cluster(tmp_path, servers=2, workers=2, worker_cmd=LOOP, env=VERBOSE) as cluster:
        looping(cluster)
        dead = cluster.by_role(victim)[-1]
        naming = "scheduler" if victim == "scheduler" else f"{victim} rank {rank_of(dead)}"
        os.kill(dead.proc.pid, signal.SIGKILL)
        others = [n for n in cluster.nodes if n is not dead]
        all_fail_within(cluster, others, 10, naming)
        if victim == "scheduler":
            for n in others:
                assert f"127.0.0.1:{cluster.port}" in n.output(), cluster.report()


def test_a_hung_worker_fails_every_other_node_naming_it(tmp_path):
    with Cluster(tmp_path, servers=1, workers=2, worker_cmd=LOOP, env=VERBOSE) as cluster:
        looping(cluster)
        hung = cluster.by_role("worker")[0]
        os.kill(hung.proc.pid, signal.SIGSTOP)
        others = [n for n in cluster.nodes if n is not hung]
        all_fail_within(cluster, others, 10, f"worker rank {rank_of(hung)}")


def _worker_env(port: int, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    env.update(DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(port),
               DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="1", DMLC_NODE_HOST="127.0.0.1", **more)
    return env


def test_no_scheduler_fails_within_the_connect_timeout_naming_its_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _worker_env(port, RSMX_DIST_CONNECT_TIMEOUT="5")
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", "import rsmx; rsmx.kv.create('dist_sync')"],
                       env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - start
    assert r.returncode != 0
    assert f"127.0.0.1:{port}" in r.stderr and "MXNetError" in r.stderr, r.stderr
    assert took < 7 + 3, f"took {took:.1f} s"  # 5 s, plus starting Python under load


def test_a_taken_scheduler_port_fails_at_once_naming_it():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = _worker_env(port)
        env["DMLC_ROLE"] = "scheduler"
        r = subprocess.run([sys.executable, "-c", "import rsmx"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert r.returncode != 0
    assert f"127.0.0.1:{port}" in r.stderr, r.stderr


@pytest.mark.mxnet_interop
def test_rsmx_workers_fail_when_an_mxnet_server_dies(tmp_path):
    if mxnet_python()[0] is None:
        pytest.skip(f"MXNet 1.9.1 is not available: {mxnet_python()[1]}")
    with Cluster(tmp_path, servers=1, workers=2, scheduler_impl="mxnet", server_impl="mxnet",
                 worker_cmd=LOOP) as cluster:  # one server: rank 0
        looping(cluster, timeout=90)
        server = cluster.by_role("server")[0]
        os.kill(server.proc.pid, signal.SIGKILL)
        all_fail_within(cluster, cluster.by_role("worker"), 10, "server rank 0")

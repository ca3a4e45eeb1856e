"""An all-rsmx cluster on loopback (a scheduler, 1 or 2 servers, 2 workers) passes the
worker checks, and every process exits by itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dist_cluster import Cluster

pytestmark = pytest.mark.timeout(180)


def passed(cluster: Cluster, timeout: float = 120) -> None:
    codes = cluster.wait(timeout)
    assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
    for w in cluster.by_role("worker"):
        assert "CHECKS PASSED" in w.output(), cluster.report()


@pytest.mark.parametrize("keys", ["int", "str"])
@pytest.mark.parametrize("servers", [1, 2])
def test_dist_sync_checks_pass_on_an_rsmx_cluster(tmp_path, servers, keys):
    with Cluster(tmp_path, servers=servers, workers=2, env={"DIST_TEST_KEYS": keys}) as cluster:
        passed(cluster)


@pytest.mark.parametrize("optimizer", [True, False])
def test_dist_async_applies_every_push(tmp_path, optimizer):
    env = {} if optimizer else {"DIST_TEST_NO_OPTIMIZER": "1"}
    with Cluster(tmp_path, servers=2, workers=2, env=env,
                 worker_cmd=[str(Path(__file__).with_name("worker_async.py"))]) as cluster:
        codes = cluster.wait(120)
        assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
        for w in cluster.by_role("worker"):
            assert "ASYNC PASSED" in w.output(), cluster.report()
        if not optimizer:
            servers = "".join(s.output() for s in cluster.by_role("server"))
            assert "a push replaces the stored value" in servers, cluster.report()


def test_bad_input_is_a_clear_error_and_changes_nothing(tmp_path):
    with Cluster(tmp_path, servers=2, workers=1,
                 worker_cmd=[str(Path(__file__).with_name("worker_bad_input.py"))]) as cluster:
        codes = cluster.wait(120)
        assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
        assert "BAD INPUT PASSED" in cluster.by_role("worker")[0].output(), cluster.report()


def test_a_dist_store_without_a_launcher_names_what_is_missing():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    r = subprocess.run([sys.executable, "-c", "import rsmx; rsmx.kv.create('dist_sync')"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "MXNetValueError" in r.stderr and "DMLC_ROLE is not set" in r.stderr, r.stderr


@pytest.mark.gpu
def test_dist_device_sync_sums_on_the_gpus(tmp_path):
    import rsmx as mx

    if mx.context.num_gpus() < 1:
        pytest.skip("needs a GPU (RSMX_FAKE_GPU=2 makes two fake ones)")
    with Cluster(tmp_path, servers=2, workers=2,
                 worker_cmd=[str(Path(__file__).with_name("worker_devices.py"))]) as cluster:
        codes = cluster.wait(150)
        assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
        for w in cluster.by_role("worker"):
            assert "DEVICES PASSED" in w.output(), cluster.report()

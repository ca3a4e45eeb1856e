"""Interoperability with MXNet 1.9.1 (from the reference venv that ``make mxref``
installs): the worker checks pass whichever side runs the scheduler, the servers and each
worker, and server-side SGD gives the same weights on either side's servers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dist_cluster import Cluster, mxnet_python

pytestmark = [pytest.mark.timeout(240)]

MXNET, WHY = mxnet_python()
if MXNET is None:
    pytestmark.append(pytest.mark.skip(reason=f"MXNet 1.9.1 is not available: {WHY}"))


def run(tmp_path, servers: int, scheduler: str, server: str, workers: list[str],
        keys: str = "int") -> list[np.ndarray]:
    """Runs the worker checks; the SGD weights each worker got."""
    out = tmp_path / "out"
    out.mkdir()
    with Cluster(tmp_path, servers=servers, workers=len(workers), scheduler_impl=scheduler,
                 server_impl=server, worker_impls=workers,
                 env={"DIST_TEST_OUT": str(out), "DIST_TEST_KEYS": keys}) as cluster:
        codes = cluster.wait(180)
        assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
        for w in cluster.by_role("worker"):
            assert "CHECKS PASSED" in w.output(), cluster.report()
    return [np.load(out / f"sgd-{r}.npy") for r in range(len(workers))]


CELLS = {
    "mxnet-servers-rsmx-workers": ("mxnet", "mxnet", ["rsmx", "rsmx"]),
    "rsmx-servers-mxnet-workers": ("rsmx", "rsmx", ["mxnet", "mxnet"]),
    "mixed-workers-mxnet-servers": ("mxnet", "mxnet", ["rsmx", "mxnet"]),
    "mixed-workers-rsmx-servers": ("rsmx", "rsmx", ["mxnet", "rsmx"]),
}


@pytest.mark.parametrize("servers", [1, 2])
@pytest.mark.parametrize("cell", list(CELLS))
def test_worker_checks_pass_across_implementations(tmp_path, cell, servers):
    scheduler, server, workers = CELLS[cell]
    weights = run(tmp_path, servers, scheduler, server, workers)
    np.testing.assert_allclose(weights[0], weights[1], rtol=1e-6)


@pytest.mark.parametrize("server", ["rsmx", "mxnet"])
def test_string_keys_are_numbered_alike_on_both_sides(tmp_path, server):
    run(tmp_path, 2, server, server, ["rsmx", "mxnet"], keys="str")


def test_server_side_sgd_gives_the_same_weights_on_either_side(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    on_mxnet = run(tmp_path / "a", 2, "mxnet", "mxnet", ["rsmx", "mxnet"])
    on_rsmx = run(tmp_path / "b", 2, "rsmx", "rsmx", ["rsmx", "mxnet"])
    np.testing.assert_allclose(on_rsmx[0], on_mxnet[0], rtol=1e-6)


def test_2bit_compression_gives_the_same_values_on_either_side(tmp_path):
    script = [str(Path(__file__).with_name("worker_2bit.py"))]

    def job(name: str, side: str, workers: list[str]) -> np.ndarray:
        out = tmp_path / name
        out.mkdir()
        with Cluster(out, servers=2, workers=2, scheduler_impl=side, server_impl=side,
                     worker_impls=workers, worker_cmd=script,
                     env={"DIST_TEST_OUT": str(out)}) as cluster:
            codes = cluster.wait(180)
            assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
        got = [np.load(out / f"2bit-{r}.npy") for r in range(2)]
        np.testing.assert_array_equal(got[0], got[1])
        return got[0]

    reference = job("mxnet", "mxnet", ["mxnet", "mxnet"])
    assert np.abs(reference).max() > 0  # the codes carried something
    np.testing.assert_array_equal(job("rsmx-servers", "rsmx", ["mxnet", "rsmx"]), reference)
    np.testing.assert_array_equal(job("mxnet-servers", "mxnet", ["rsmx", "rsmx"]), reference)


def test_an_mxnet_worker_is_answered_when_an_rsmx_server_refuses_a_command(tmp_path):
    script = tmp_path / "bad_command.py"
    script.write_text(
        "import mxnet as mx\n"
        "kv = mx.kv.create('dist_sync')\n"
        "kv._send_command_to_servers(42, '')\n"
        "print('ANSWERED', flush=True)\n"
    )
    with Cluster(tmp_path, servers=1, workers=1, worker_impls=["mxnet"],
                 worker_cmd=[str(script)]) as cluster:
        codes = cluster.wait(120)
        assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
        assert "ANSWERED" in cluster.by_role("worker")[0].output(), cluster.report()
        assert "command 42" in cluster.by_role("server")[0].output(), cluster.report()

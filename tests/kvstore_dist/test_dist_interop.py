"""Interoperability with MXNet 1.9.1 (from the reference venv that ``make mxref``
installs): the worker checks pass whichever side runs the scheduler, the servers and each
worker, and server-side SGD gives the same weights on either side's servers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from dist_cluster import Cluster, mxnet_python

pytestmark = [pytest.mark.timeout(240), pytest.mark.mxnet_interop]

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


def saved_values(out: Path, side: str, workers: list[str], script: str, name: str,
                 env: dict[str, str] | None = None) -> np.ndarray:
    """Runs ``script`` on 2 workers (``workers`` say whose) under ``side``'s scheduler and
    2 servers; the array both workers saved as ``<name>-<rank>.npy``, which must agree.
    Each worker must have printed ``<NAME> PASSED``."""
    out.mkdir()
    with Cluster(out, servers=2, workers=2, scheduler_impl=side, server_impl=side,
                 worker_impls=workers, worker_cmd=[str(Path(__file__).with_name(script))],
                 env={"DIST_TEST_OUT": str(out), **(env or {})}) as cluster:
        codes = cluster.wait(180)
        assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
        for w in cluster.by_role("worker"):
            assert f"{name.upper()} PASSED" in w.output(), cluster.report()
    got = [np.load(out / f"{name}-{r}.npy") for r in range(2)]
    np.testing.assert_array_equal(got[0], got[1])
    return got[0]


def test_2bit_compression_gives_the_same_values_on_either_side(tmp_path):
    def job(name: str, side: str, workers: list[str]) -> np.ndarray:
        return saved_values(tmp_path / name, side, workers, "worker_2bit.py", "2bit")

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


def _messages(log: str) -> dict[str, list[tuple]]:
    """The messages a ``PS_VERBOSE=2`` log shows a node send and receive, in order, as
    (control command or data flags, frame sizes, frame types), without ids, timestamps
    and the scheduler's barrier answers' group (uninitialised in ps-lite). A node's
    message to itself (ps-lite's stop signal) is left out."""
    seen: dict[str, list[tuple]] = {"sent": [], "received": []}
    for line in log.splitlines():
        m = re.search(r"(\?|\d+) => (\d+)\. Meta: (.*)$", line)
        if not m or m.group(1) == m.group(2):
            continue
        meta, _, body = m.group(3).partition(" Body:")
        cmd = re.search(r"cmd=(\w+)", meta)
        flags = tuple(re.findall(r"\b(request|simple_app|push|pull|head)=(-?\d+)", meta))
        types = re.search(r"data_type=\{([^}]*)\}", meta)
        seen["sent" if m.group(1) == "?" else "received"].append((
            cmd.group(1) if cmd else None,
            flags,
            tuple(re.findall(r"data_size=(\d+)", body)),
            tuple(types.group(1).split()) if types else (),
        ))
    return seen


def test_ps_verbose_logs_show_the_messages_mxnet_sends(tmp_path):
    """With ``PS_VERBOSE=2``, the rank 0 worker of an all-rsmx job logs the messages the
    rank 0 worker of an all-MXNet job logs running the same checks: the same sent, control
    messages in the same order, and the same received."""
    logs = {}
    for side in ("mxnet", "rsmx"):
        out = tmp_path / side
        out.mkdir()
        with Cluster(out, servers=1, workers=2, scheduler_impl=side, server_impl=side,
                     worker_impls=[side, side],
                     env={"DIST_TEST_OUT": str(out), "PS_VERBOSE": "2"}) as cluster:
            codes = cluster.wait(180)
            assert all(c == 0 for c in codes.values()), f"{codes}\n{cluster.report()}"
            # Worker ids are 9, 11, ... in rank order.
            logs[side] = next(w.output() for w in cluster.by_role("worker")
                              if "W[9] is connected to others" in w.output())
    mxnet, rsmx = _messages(logs["mxnet"]), _messages(logs["rsmx"])
    assert len(mxnet["sent"]) > 40  # the checks' traffic, not just the start
    # An rsmx worker sends a key's pull right behind its push to rsmx servers, where
    # MXNet's waits for the push's answer, so data requests of different keys may
    # interleave differently.
    assert sorted(rsmx["sent"], key=repr) == sorted(mxnet["sent"], key=repr)
    control = [m for m in rsmx["sent"] if m[0]], [m for m in mxnet["sent"] if m[0]]
    assert control[0] == control[1]
    # Answers arrive as the other worker's pushes complete their rounds, so only what
    # arrives, not its order, is the same from run to run.
    assert sorted(rsmx["received"], key=repr) == sorted(mxnet["received"], key=repr)
    for line in ("W[9] is connected to others", "W[9] is stopping", "W[9] is stopped"):
        assert line in logs["rsmx"]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_float16_multi_precision_matches_mxnet_servers(tmp_path, optimizer):
    """kSetMultiPrecision: float16 keys updated in float32 copies on the servers give the
    values MXNet's servers give, whichever side runs the workers."""
    def job(name: str, side: str, workers: list[str]) -> np.ndarray:
        got = saved_values(tmp_path / name, side, workers, "worker_fp16.py", "fp16",
                           env={"DIST_TEST_OPTIMIZER": optimizer})
        return got.astype(np.float32)

    reference = job("mxnet", "mxnet", ["mxnet", "mxnet"])
    start = np.concatenate([np.linspace(-2, 2, n) for n in (7, 300_001)] * 3)
    assert np.abs(reference - start.astype(np.float16)).max() > 0  # the updates moved
    for name, side, workers in [("rsmx-servers", "rsmx", ["mxnet", "rsmx"]),
                                ("mxnet-servers", "mxnet", ["rsmx", "rsmx"])]:
        np.testing.assert_allclose(job(name, side, workers), reference, rtol=1e-3,
                                   atol=1e-3, err_msg=name)

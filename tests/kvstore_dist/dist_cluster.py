"""Loopback clusters for the distributed KVStore tests: a scheduler, servers and workers
as child processes of rsmx or of MXNet 1.9.1 (from the reference venv), each bounded by a
deadline and killed by its PID when a test ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKER_CHECKS = Path(__file__).with_name("worker_checks.py")
# Where `make mxref` installs MXNet 1.9.1 (or writes why it could not).
MXREF = Path(os.environ.get("RSMX_MXREF", ROOT / ".mxref"))


def mxnet_python() -> tuple[str | None, str]:
    """The Python that has MXNet 1.9.1, or None and the reason there is none."""
    python = MXREF / "bin" / "python"
    unavailable = MXREF / "UNAVAILABLE"
    if unavailable.exists():
        return None, unavailable.read_text().strip()
    if not python.exists():
        return None, f"no MXNet 1.9.1 reference venv at {MXREF} (make mxref installs it)"
    probe = subprocess.run(
        [str(python), "-c", "import mxnet"], capture_output=True, text=True, timeout=120
    )
    if probe.returncode != 0:
        return None, f"MXNet 1.9.1 at {MXREF} does not import: {probe.stderr.strip()[-300:]}"
    return str(python), ""


def free_port() -> int:
    """A port free now (only for MXNet's scheduler, which cannot report its own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    role: str
    rank: int
    impl: str
    proc: subprocess.Popen
    log: Path

    @property
    def name(self) -> str:
        return f"{self.impl} {self.role} {self.rank}"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Cluster:
    """One job on loopback; ``impl`` of each role is ``rsmx`` or ``mxnet``."""

    tmp: Path
    servers: int
    workers: int
    scheduler_impl: str = "rsmx"
    server_impl: str = "rsmx"
    worker_impls: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    worker_cmd: list[str] = field(default_factory=lambda: [str(WORKER_CHECKS)])
    nodes: list[Node] = field(default_factory=list)
    port: int = 0

    def _python(self, impl: str) -> str:
        if impl == "rsmx":
            return sys.executable
        python, why = mxnet_python()
        if python is None:
            raise RuntimeError(why)
        return python

    def _env(self, role: str, impl: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
        env.update(
            DMLC_ROLE=role,
            DMLC_PS_ROOT_URI="127.0.0.1",
            DMLC_PS_ROOT_PORT=str(self.port),
            DMLC_NUM_SERVER=str(self.servers),
            DMLC_NUM_WORKER=str(self.workers),
            DMLC_NODE_HOST="127.0.0.1",
            DMLC_INTERFACE="lo",
            DIST_TEST_IMPL=impl,
            OMP_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.env)
        return env

    def _spawn(self, role: str, rank: int, impl: str, argv: list[str], env: dict[str, str]) -> Node:
        log = self.tmp / f"{impl}-{role}-{rank}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [self._python(impl), *argv], env=env, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.tmp, start_new_session=True,
            )
        node = Node(role, rank, impl, proc, log)
        self.nodes.append(node)
        return node

    def start(self) -> Cluster:
        """Starts the scheduler (an rsmx one picks and reports its own port), then the
        servers and the workers."""
        if not self.worker_impls:
            self.worker_impls = ["rsmx"] * self.workers
        package = {"rsmx": "import rsmx", "mxnet": "import mxnet"}
        if self.scheduler_impl == "rsmx":
            port_file = self.tmp / "scheduler.port"
            env = self._env("scheduler", "rsmx")
            env.update(DMLC_PS_ROOT_PORT="0", RSMX_DIST_PORT_FILE=str(port_file))
            sched = self._spawn("scheduler", 0, "rsmx", ["-c", package["rsmx"]], env)
            deadline = time.monotonic() + 60
            while not port_file.exists():
                if sched.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the scheduler did not report its port:\n{sched.output()}")
                time.sleep(0.02)
            self.port = int(port_file.read_text())
        else:
            self.port = free_port()
            self._spawn("scheduler", 0, "mxnet", ["-c", package["mxnet"]],
                        self._env("scheduler", "mxnet"))
        for r in range(self.servers):
            self._spawn("server", r, self.server_impl, ["-c", package[self.server_impl]],
                        self._env("server", self.server_impl))
        for r, impl in enumerate(self.worker_impls):
            self._spawn("worker", r, impl, list(self.worker_cmd), self._env("worker", impl))
        return self

    def by_role(self, role: str) -> list[Node]:
        return [n for n in self.nodes if n.role == role]

    def wait(self, timeout: float, nodes: list[Node] | None = None) -> dict[str, int | None]:
        """Waits up to ``timeout`` s for ``nodes`` (all) to exit; their exit codes, None for
        those still running."""
        nodes = self.nodes if nodes is None else nodes
        deadline = time.monotonic() + timeout
        for n in nodes:
            try:
                n.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        return {n.name: n.proc.poll() for n in nodes}

    def report(self) -> str:
        return "\n".join(
            f"--- {n.name} (pid {n.proc.pid}, exit {n.proc.poll()}):\n{n.output()[-3000:]}"
            for n in self.nodes
        )

    def kill(self) -> None:
        """Kills every process of the job that is still running (and resumes stopped ones
        so the kill lands)."""
        for n in self.nodes:
            if n.proc.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.killpg(n.proc.pid, sig)
                    except ProcessLookupError:
                        pass
        for n in self.nodes:
            try:
                n.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()

"""``python -m rsmx.launch``: starts a distributed job as MXNet's ``tools/launch.py`` does,
with its flags and environment contract.

The scheduler runs here; it picks its own port and reports it, so there is no race for a
free port. Workers and servers run the command with ``DMLC_ROLE`` set (a server becomes
one at ``import rsmx``), on this machine (``--launcher local``, the default without a
hostfile), over ssh, or through ``mpirun``. When any process fails, the others are
stopped and the launcher exits non-zero, naming the role and rank that failed.

Example::

    python -m rsmx.launch -n 2 -s 2 python train.py --kv-store dist_sync
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .kvstore.server import LOST_NODE_EXIT

__all__ = ["main"]

# Variables the ssh launcher forwards when set, as dmlc-core's does.
_FORWARDED = ("OMP_NUM_THREADS", "KMP_AFFINITY", "LD_LIBRARY_PATH", "DMLC_INTERFACE")
_GRACE_S = 3.0
# How long a failure that is only the consequence of another (a scheduler or server that
# lost a node) waits for its cause to be seen: the node that failed first may be reaped
# a few milliseconds after the ones that noticed it.
_CAUSE_WAIT_S = 1.0


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The launcher's options and the command; unknown options go to the command, as in
    MXNet's launcher."""
    p = argparse.ArgumentParser(
        prog="python -m rsmx.launch", description="Launch a distributed rsmx (or MXNet) job."
    )
    p.add_argument("-n", "--num-workers", required=True, type=int, help="number of workers")
    p.add_argument("-s", "--num-servers", type=int, help="number of servers (default: workers)")
    p.add_argument("-H", "--hostfile", help="hosts, one `host[:ssh_port]` a line (ssh, mpi)")
    p.add_argument("--sync-dst-dir", help="ssh: copy the current directory there on each host")
    p.add_argument(
        "--launcher", choices=["local", "ssh", "mpi"],
        help="where processes run (default: local, or ssh with a hostfile)",
    )
    p.add_argument("--env-server", action="append", default=[], metavar="K:V",
                   help="set a variable for the servers")
    p.add_argument("--env-worker", action="append", default=[], metavar="K:V",
                   help="set a variable for the workers")
    p.add_argument("--env", action="append", default=[], metavar="K[:V]",
                   help="pass a variable (or set it) for every process")
    p.add_argument("--p3", action="store_true",
                   help="run with DMLC_PS_VAN_TYPE=p3 (MXNet's P3 van; rsmx nodes ignore it)")
    p.add_argument("--timeout", type=float, default=0,
                   help="stop the job after this many seconds (default: no limit)")
    p.add_argument("--host-ip", help="the address other machines reach the scheduler at")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run")
    args, unknown = p.parse_known_args(argv)
    command = list(args.command) + unknown
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        p.error("no command to run")
    if args.num_workers < 1:
        p.error("-n/--num-workers must be at least 1")
    if args.num_servers is None:
        args.num_servers = args.num_workers
    if args.num_servers < 0:
        p.error("-s/--num-servers must not be negative")
    if args.launcher is None:
        args.launcher = "ssh" if args.hostfile else "local"
    if args.launcher == "ssh" and not args.hostfile:
        p.error("--launcher ssh needs -H/--hostfile")
    return args, command


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    """``K:V`` items as a dict; ``K`` alone takes the launcher's own value of ``K``."""
    out = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not key:
            raise SystemExit(f"rsmx.launch: {flag} {item!r}: expected K or K:V")
        if not sep:
            if key not in os.environ:
                continue
            value = os.environ[key]
        out[key] = value
    return out


def read_hostfile(path: str) -> list[tuple[str, int]]:
    """``(host, ssh port)`` of each line; a trailing ``slots=...`` and comments are ignored."""
    hosts = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        entry = line.split()[0]
        host, _, port = entry.partition(":")
        hosts.append((host, int(port) if port else 22))
    if not hosts:
        raise SystemExit(f"rsmx.launch: the hostfile {path} names no host")
    return hosts


def host_ip() -> str:
    """This machine's address as other machines see it: its name's address, or, when that
    is a loopback one, the address of the interface that routes outwards (no packet is
    sent)."""
    try:
        ip = socket.gethostbyname(socket.getfqdn())
    except OSError:
        ip = "127.0.0.1"
    if ip.startswith("127."):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect(("10.255.255.255", 1))
                ip = s.getsockname()[0]
            except OSError:
                pass
    return ip


@dataclass
class Task:
    """One process of the job."""

    role: str
    rank: int
    proc: subprocess.Popen
    # When the process ended (monotonic clock), set by a thread waiting on it: the first
    # process to fail is the cause; the others fail because they lost it.
    ended: float | None = None

    def watch(self) -> None:
        def wait() -> None:
            self.proc.wait()
            self.ended = time.monotonic()

        threading.Thread(target=wait, name=f"rsmx-launch-{self.name}", daemon=True).start()

    @property
    def name(self) -> str:
        """How messages name it: its role and its rank among the launcher's processes of
        that role (``DMLC_TASK_ID`` order; the scheduler ranks nodes by address, so a
        store's ``rank`` may differ)."""
        return f"{self.role} task {self.rank}" if self.role != "scheduler" else "scheduler"


class Job:
    """The job's processes; stops them all together."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def spawn(self, role: str, rank: int, argv: list[str], env: dict[str, str]) -> Task:
        try:
            proc = subprocess.Popen(argv, env=env, start_new_session=True)
        except OSError as e:
            self.stop()
            raise SystemExit(f"rsmx.launch: cannot start {role} {rank} ({argv[0]}): {e}") from None
        task = Task(role, rank, proc)
        task.watch()
        self.tasks.append(task)
        return task

    def stop(self) -> None:
        """SIGTERM to every running process group, then SIGKILL after a grace period."""
        running = [t for t in self.tasks if t.proc.poll() is None]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for t in running:
                try:
                    os.killpg(t.proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + _GRACE_S
            for t in running:
                try:
                    t.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            running = [t for t in running if t.proc.poll() is None]
            if not running:
                break

    def wait(self, timeout: float) -> int:
        """Waits until every process has ended; stops the rest at the first failure or at
        the deadline. The launcher's exit code."""
        deadline = time.monotonic() + timeout if timeout > 0 else None
        while True:
            pending = [t for t in self.tasks if t.ended is None]
            failed = [t for t in self.tasks if t.ended is not None and t.proc.returncode != 0]
            causes = [t for t in failed if t.proc.returncode != LOST_NODE_EXIT]
            first = min((t.ended or 0.0 for t in failed), default=None)
            if failed and not causes and pending and first is not None:
                if time.monotonic() < first + _CAUSE_WAIT_S:
                    time.sleep(0.01)
                    continue
            if failed:
                t = min(causes or failed, key=lambda t: t.ended or 0.0)
                print(
                    f"rsmx.launch: {t.name} (pid {t.proc.pid}) exited with {t.proc.returncode}; "
                    f"stopping the other {len(pending)} process(es)",
                    file=sys.stderr, flush=True,
                )
                self.stop()
                return 1
            if not pending:
                return 0
            if deadline is not None and time.monotonic() > deadline:
                names = ", ".join(t.name for t in pending)
                print(f"rsmx.launch: --timeout {timeout:g} s reached; stopping {names}",
                      file=sys.stderr, flush=True)
                self.stop()
                return 1
            time.sleep(0.05)


def start_scheduler(job: Job, env: dict[str, str], host: str) -> int:
    """Starts an rsmx scheduler here on a port it picks; the port."""
    with tempfile.TemporaryDirectory(prefix="rsmx-launch-") as tmp:
        port_file = Path(tmp) / "scheduler.port"
        senv = dict(env, DMLC_ROLE="scheduler", DMLC_PS_ROOT_URI=host, DMLC_PS_ROOT_PORT="0",
                    RSMX_DIST_PORT_FILE=str(port_file))
        task = job.spawn("scheduler", 0, [sys.executable, "-c", "import rsmx"], senv)
        deadline = time.monotonic() + 120
        while not port_file.exists():
            if task.proc.poll() is not None or time.monotonic() > deadline:
                job.stop()
                raise SystemExit(
                    f"rsmx.launch: the scheduler did not start (exit {task.proc.poll()})"
                )
            time.sleep(0.02)
        return int(port_file.read_text())


def mpi_env_flags(env: dict[str, str]) -> list[str]:
    """How ``mpirun`` passes variables: ``-x K=V`` for Open MPI, ``-env K V`` for MPICH."""
    try:
        version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SystemExit(f"rsmx.launch: --launcher mpi needs mpirun: {e}") from None
    flags: list[str] = []
    for k, v in env.items():
        flags += ["-x", f"{k}={v}"] if "Open MPI" in version else ["-env", k, v]
    return flags


def ssh_argv(host: str, port: int, env: dict[str, str], command: list[str],
             workdir: str) -> list[str]:
    """The ssh command that runs ``command`` on ``host`` with ``env`` exported."""
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
    remote = f"{exports}cd {shlex.quote(workdir)}; {shlex.join(command)}"
    return ["ssh", "-o", "StrictHostKeyChecking=no", host, "-p", str(port), remote]


def main(argv: list[str] | None = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    n, s = args.num_workers, args.num_servers
    base = dict(os.environ)
    base.update(_pairs(args.env, "--env"))
    if args.p3:
        base.update(DMLC_PS_VAN_TYPE="p3", DMLC_PS_WATER_MARK="10")
    base.update(DMLC_NUM_WORKER=str(n), DMLC_NUM_SERVER=str(s))
    host = "127.0.0.1" if args.launcher == "local" else (args.host_ip or host_ip())
    role_env = {"server": _pairs(args.env_server, "--env-server"),
                "worker": _pairs(args.env_worker, "--env-worker")}
    job = Job()

    def on_signal(signum: int, _frame: object) -> None:
        job.stop()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        port = start_scheduler(job, base, host)
        common = dict(base, DMLC_PS_ROOT_URI=host, DMLC_PS_ROOT_PORT=str(port))
        # Tasks 0..n-1 are workers, n..n+s-1 servers, as dmlc-core numbers them.
        roles = [("worker", r) for r in range(n)] + [("server", r) for r in range(s)]
        if args.launcher == "local":
            for i, (role, rank) in enumerate(roles):
                env = dict(common, DMLC_ROLE=role, DMLC_TASK_ID=str(i), DMLC_JOB_CLUSTER="local",
                           DMLC_NODE_HOST="127.0.0.1", **role_env[role])
                job.spawn(role, rank, command, env)
        elif args.launcher == "ssh":
            hosts = read_hostfile(args.hostfile)
            workdir = args.sync_dst_dir or os.getcwd()
            if args.sync_dst_dir:
                for h, p in sorted(set(hosts)):
                    subprocess.run(["rsync", "-az", "-e", f"ssh -p {p}", "./", f"{h}:{workdir}"],
                                   check=True)
            order = [r for r in roles if r[0] == "server"] + [r for r in roles if r[0] == "worker"]
            for i, (role, rank) in enumerate(order):
                h, p = hosts[i % len(hosts)]
                env = {k: common[k] for k in _FORWARDED if k in common}
                env.update({k: v for k, v in common.items() if k.startswith("DMLC_")})
                env.update(DMLC_ROLE=role, DMLC_NODE_HOST=h, **role_env[role])
                job.spawn(role, rank, ssh_argv(h, p, env, command, workdir), dict(os.environ))
        else:
            hostfile = ["--hostfile", args.hostfile] if args.hostfile else []
            for role, count in (("worker", n), ("server", s)):
                if count:
                    env = dict(DMLC_ROLE=role, DMLC_JOB_CLUSTER="mpi", **role_env[role],
                               **{k: v for k, v in common.items() if k.startswith("DMLC_")})
                    argv = ["mpirun", "-n", str(count), *hostfile, *mpi_env_flags(env), *command]
                    job.spawn(role, 0, argv, dict(os.environ))
        return job.wait(args.timeout)
    finally:
        job.stop()


if __name__ == "__main__":
    sys.exit(main())

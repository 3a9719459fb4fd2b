"""Model-server processes: start detached, wait until ready, probe, stop.

A replica is `forgeml serve MODEL --name NAME --host 127.0.0.1 --port P` started by
`forgeml.core.processes` (the local executor's launcher starts the same way): in its own
session (so it outlives the command that started it, and signals reach its whole process
group), with stdout and stderr in a log file. Ports are found by binding port 0 and
releasing it; another process may take the port in between, so a replica whose server
could not bind is started again on a fresh port.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from forgeml.core.processes import LOCALHOST, free_port, spawn_detached, stop_groups

HOST = LOCALHOST
# uvicorn's message when the port was taken between our check and its bind
_PORT_TAKEN = ("address already in use", "errno 98")
_PORT_ATTEMPTS = 3


@dataclass(frozen=True)
class ServerProcess:
    """A started model server: its pid, port and log file."""

    pid: int
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


class ReplicaStartError(Exception):
    """A server exited or never became ready; `log_tail` holds its last log lines."""

    def __init__(self, message: str, log_tail: str, index: int) -> None:
        super().__init__(message)
        self.log_tail = log_tail
        self.index = index


def server_command(args: Sequence[str], port: int) -> list[str]:
    """`forgeml serve ARGS --host 127.0.0.1 --port PORT`, run by this interpreter."""
    return [
        sys.executable,
        "-m",
        "forgeml.cli",
        "serve",
        *args,
        "--host",
        HOST,
        "--port",
        str(port),
    ]


def spawn(args: Sequence[str], log_path: Path, env: dict[str, str]) -> ServerProcess:
    """Start one server detached (own session), logging to `log_path`; returns at once."""
    port = free_port()
    try:
        pid = spawn_detached(server_command(args, port), log_path, env)
    except (OSError, subprocess.SubprocessError) as error:
        raise ReplicaStartError(str(error), "", -1) from None
    return ServerProcess(pid, port, log_path)


def is_running(pid: int, port: int | None = None) -> bool:
    """Whether `pid` is a live (not zombie) server process, listening on `port` if given.

    The port check guards against a recycled pid: the command line must name the port.
    """
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        command = process.cmdline()
    except psutil.Error:
        return False
    if port is None or not command:
        # an exiting process has already lost its command line: still here, not recycled
        return True
    return "--port" in command and str(port) in command


def launch_of(pid: int) -> tuple[list[str], dict[str, str]] | None:
    """The command line and environment `pid` was started with (None if unreadable)."""
    try:
        process = psutil.Process(pid)
        return process.cmdline(), process.environ()
    except psutil.Error:
        return None


def probe(url: str, timeout: float = 2.0) -> bool:
    """Whether `GET url/v2/health/ready` answers 200 within `timeout` seconds."""
    import httpx  # only probes need it: `forgeml deploy list` stays light

    try:
        response = httpx.get(f"{url}/v2/health/ready", timeout=timeout)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def log_tail(path: Path, lines: int = 8) -> str:
    """The last `lines` non-empty lines of a log file ('' when there is none)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join([line for line in text.splitlines() if line.strip()][-lines:])


def _port_taken(server: ServerProcess) -> bool:
    tail = log_tail(server.log_path, 20).lower()
    return any(marker in tail for marker in _PORT_TAKEN)


def start_all(
    launches: Sequence[tuple[Sequence[str], Path]], env: dict[str, str], timeout: float
) -> list[ServerProcess]:
    """Start one server per `(serve args, log path)` and wait until all are ready.

    The servers start together (their imports overlap); one that could not bind its
    port is started again on a fresh one. Returns the ready servers in `launches` order.

    Raises:
        ReplicaStartError: a server exited or was not ready within `timeout` seconds;
            every server started here has been stopped.
    """
    servers: list[ServerProcess] = []
    try:
        for index, (args, log_path) in enumerate(launches):
            servers.append(_spawn_numbered(index, args, log_path, env))
        _wait_ready(launches, servers, env, timeout)
    except BaseException:
        stop([(server.pid, server.port) for server in servers], grace_seconds=5.0)
        raise
    return servers


def _spawn_numbered(
    index: int, args: Sequence[str], log_path: Path, env: dict[str, str]
) -> ServerProcess:
    try:
        return spawn(args, log_path, env)
    except (ReplicaStartError, OSError, subprocess.SubprocessError) as error:
        raise ReplicaStartError(str(error), log_tail(log_path), index) from error


def _wait_ready(
    launches: Sequence[tuple[Sequence[str], Path]],
    servers: list[ServerProcess],
    env: dict[str, str],
    timeout: float,
) -> None:
    """Poll until every server is ready; restart one whose port was taken meanwhile."""
    attempts = [1] * len(servers)
    deadline = time.monotonic() + timeout
    while waiting := [i for i, server in enumerate(servers) if not probe(server.url, 1.0)]:
        for i in waiting:
            server = servers[i]
            if is_running(server.pid, server.port):
                continue
            if _port_taken(server) and attempts[i] < _PORT_ATTEMPTS:
                servers[i] = _spawn_numbered(i, launches[i][0], launches[i][1], env)
                attempts[i] += 1
                continue
            raise ReplicaStartError(
                f"exited before it was ready (port {server.port})",
                log_tail(server.log_path),
                i,
            )
        if time.monotonic() > deadline:
            server = servers[waiting[0]]
            raise ReplicaStartError(
                f"was not ready after {timeout:g}s (port {server.port})",
                log_tail(server.log_path),
                waiting[0],
            )
        time.sleep(0.2)


def stop(servers: Sequence[tuple[int, int]], grace_seconds: float = 10.0) -> None:
    """SIGTERM each `(pid, port)` server's process group; SIGKILL it after the grace.

    A pid whose process no longer names that port is a recycled pid and is left alone.
    """
    ports = dict(servers)
    stop_groups(list(ports), grace_seconds, running=lambda pid: is_running(pid, ports[pid]))

"""One worker of a Ray attempt: a detached actor that runs the job command as a subprocess.

`RayExecutor` makes this class a Ray actor, one per placement-group bundle. The actor
starts the command in its own session with torchrun's environment contract, keeps its
output in memory until the control plane reads it (`read`), measures the process tree
(`forgeml.scheduler._usage`), kills the tree when it exceeds the worker's memory, and
stops it on request (`terminate`: SIGTERM, SIGKILL after the grace). It outlives the
control plane (a detached actor), so a restarted one reads on where the last one stopped.

This module runs on the Ray nodes: it imports only the standard library, psutil and
`ray` (inside the functions, so importing it does not need Ray).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from forgeml.core.processes import free_port
from forgeml.scheduler.executors.base import AttemptUsage

_MAX_LINES = 20_000  # unread output kept per worker; older lines are dropped (and counted)
_SAMPLE_SECONDS = 0.5
_READER_JOIN_SECONDS = 5.0  # a grandchild may keep the pipe open after the worker exits
STOP_REQUESTED = "requested"  # `terminate` reason: the control plane stopped the attempt


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker runs: the command, its environment and its limits."""

    rank: int
    world_size: int
    command: list[str]
    env: dict[str, str]
    cwd: str | None
    log_path: str  # on the control plane's machine; the worker only reports it back
    memory_limit_gb: float | None
    torchrun_env: bool  # set RANK, WORLD_SIZE, MASTER_ADDR, ... (False for launch_once)


@dataclass(frozen=True)
class WorkerReport:
    """What `read` returns: output from line `start` on, and how the worker is doing."""

    rank: int
    log_path: str
    start: int  # index of lines[0] in the worker's whole output
    lines: list[str]
    exit_code: int | None  # None while running (and until all its output is read)
    reason: str | None  # set when the worker itself was killed for a limit
    stopped_by: str | None  # why `terminate` was called, if it was
    ended_at: float | None
    usage: AttemptUsage = field(default_factory=AttemptUsage)


class RayWorker:
    """Runs one worker's command; made a Ray actor by `RayExecutor`."""

    def __init__(self, spec: WorkerSpec, leader: Any = None) -> None:
        """Start the command; ranks above 0 take MASTER_ADDR/PORT from `leader` (rank 0)."""
        import ray

        self.spec = spec
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._base = 0  # index of _lines[0] in the whole output
        self._exit_code: int | None = None
        self._reason: str | None = None
        self._stopped_by: str | None = None
        self._ended_at: float | None = None
        self._usage = AttemptUsage()
        self._done = threading.Event()
        if leader is None:
            self._address = (_node_ip(ray), free_port(host=""))
        else:
            self._address = tuple(ray.get(leader.address.remote()))
        self._process = self._start(ray)
        if self._process is not None:
            self._reader = threading.Thread(target=self._read_output, daemon=True)
            self._reader.start()
            threading.Thread(target=self._monitor, daemon=True).start()

    def address(self) -> tuple[str, int]:
        """MASTER_ADDR and MASTER_PORT of the attempt (rank 0's node IP and a free port)."""
        return self._address

    def read(self, offset: int | None) -> WorkerReport:
        """Output from `offset` on (None: from the last acknowledged line) and the state.

        Passing `offset` acknowledges every line before it: they are dropped here.
        """
        with self._lock:
            if offset is not None and offset > self._base:
                acknowledged = min(offset - self._base, len(self._lines))
                del self._lines[:acknowledged]
                self._base += acknowledged
            return WorkerReport(
                rank=self.spec.rank,
                log_path=self.spec.log_path,
                start=self._base,
                lines=list(self._lines),
                exit_code=self._exit_code,
                reason=self._reason,
                stopped_by=self._stopped_by,
                ended_at=self._ended_at,
                usage=self._usage,
            )

    def terminate(self, grace_seconds: float, why: str) -> None:
        """SIGTERM the worker's process group; SIGKILL it if still running after the grace."""
        if self._process is None or self._done.is_set():
            return
        with self._lock:
            self._stopped_by = self._stopped_by or why
        _signal_group(self._process.pid, signal.SIGTERM)
        if not self._done.wait(grace_seconds):
            _signal_group(self._process.pid, signal.SIGKILL)

    # ---- inside the actor

    def _environment(self, ray: Any) -> dict[str, str]:
        env = {**os.environ, **self.spec.env}
        if self.spec.torchrun_env:
            local_rank, local_world = _local_layout(ray, self.spec.rank)
            env |= {
                "RANK": str(self.spec.rank),
                "WORLD_SIZE": str(self.spec.world_size),
                "LOCAL_RANK": str(local_rank),
                "LOCAL_WORLD_SIZE": str(local_world),
                "MASTER_ADDR": self._address[0],
                "MASTER_PORT": str(self._address[1]),
            }
        return env

    def _start(self, ray: Any) -> subprocess.Popen[bytes] | None:
        try:
            return subprocess.Popen(
                self.spec.command,
                env=self._environment(ray),
                cwd=self.spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: signals reach its children
            )
        except OSError as exc:
            self._lines.append(f"cannot start {self.spec.command[0]!r}: {exc}")
            self._finish(127)
            return None

    def _read_output(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for raw in self._process.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            with self._lock:
                self._lines.append(line)
                if len(self._lines) > _MAX_LINES:  # the control plane is not reading
                    del self._lines[0]
                    self._base += 1

    def _monitor(self) -> None:
        assert self._process is not None
        pid = self._process.pid
        sampler = _sampler(pid)
        limit = self.spec.memory_limit_gb
        while True:
            if sampler is not None:
                with contextlib.suppress(psutil.Error):
                    self._usage = sampler.sample()
            if limit and self._reason is None and self._usage.peak_memory_gb > limit:
                self._reason = f"exceeded its memory limit of {limit:g} GB"
                _signal_group(pid, signal.SIGKILL)
            if _ended(pid):  # sampled above while a zombie: its final CPU times count
                break
            time.sleep(_SAMPLE_SECONDS)
        code = self._process.wait()
        self._reader.join(_READER_JOIN_SECONDS)
        self._finish(code)

    def _finish(self, code: int) -> None:
        with self._lock:
            self._exit_code, self._ended_at = code, time.time()
        self._done.set()


def _node_ip(ray: Any) -> str:
    """The address this node joined the cluster with (`--node-ip-address`)."""
    here = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == here:
            return str(node["NodeManagerAddress"])
    return str(ray.util.get_node_ip_address())


def _local_layout(ray: Any, rank: int) -> tuple[int, int]:
    """LOCAL_RANK and LOCAL_WORLD_SIZE from where the placement group put each bundle."""
    group = ray.util.get_current_placement_group()
    if group is None:
        return 0, 1
    nodes = ray.util.placement_group_table(group).get("bundles_to_node_id", {})
    here = nodes.get(rank)
    same = sorted(index for index, node in nodes.items() if node == here)
    return (same.index(rank), len(same)) if rank in same else (0, 1)


def _ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _sampler(pid: int) -> Any:
    from forgeml.scheduler._usage import ProcessTreeSampler

    gpus = [int(g) for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.isdigit()]
    try:
        return ProcessTreeSampler(pid, gpus=gpus)
    except ProcessLookupError:
        return None

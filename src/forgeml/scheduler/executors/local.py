"""The local executor: each attempt is a session of subprocesses on this machine.

An attempt is started through `forgeml/scheduler/_launcher.py`, which runs the workers,
forwards SIGTERM to them and writes the exit code to a file. The handle's `external_id`
is `"<pid>:<create time>:<exit file>"`, so a restarted control plane finds a live
attempt again (same pid and create time) or reads how it ended. One that died before it
recorded the handle finds the attempt by its log path (`recover`): the launcher writes its
pid beside the log first thing.

Each worker is pinned to the CPUs this executor hands out (`sched_setaffinity`) and sees
only its GPUs (`CUDA_VISIBLE_DEVICES`). Memory (RSS of the whole process tree over
`workers x memory_gb`) and the wall-time limit are enforced by `poll`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from forgeml.core.processes import (
    create_time,
    free_port,
    is_alive,
    signal_group,
    spawn_detached,
)
from forgeml.scheduler.executors.base import (
    AttemptHandle,
    AttemptStatus,
    AttemptUsage,
    LaunchRequest,
)

_LAUNCHER = Path(__file__).resolve().parents[1] / "_launcher.py"
_GB = 1e9


def _sampler(pid: int, gpus: list[int]) -> Any:
    """The process-tree usage sampler (`forgeml.scheduler._usage`, psutil as a fallback)."""
    try:
        from forgeml.scheduler._usage import ProcessTreeSampler
    except ImportError:
        return _TreeSampler(pid)
    try:
        return ProcessTreeSampler(pid, gpus=gpus)
    except ProcessLookupError:
        return None


class _TreeSampler:
    """CPU-seconds, memory GB-seconds, peak memory and wall time of a process tree (psutil)."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.started = self.root.create_time()
        self.cpu: dict[int, float] = {}
        self.memory_gb_seconds = 0.0
        self.peak = 0.0
        self.last = time.time()

    def sample(self) -> AttemptUsage:
        now = time.time()
        rss = 0
        try:
            tree = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for process in tree:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    self.cpu[process.pid] = times.user + times.system
                    rss += process.memory_info().rss
            except psutil.Error:
                continue
        memory = rss / _GB
        self.memory_gb_seconds += memory * (now - self.last)
        self.peak, self.last = max(self.peak, memory), now
        return AttemptUsage(
            cpu_seconds=sum(self.cpu.values()),
            memory_gb_seconds=self.memory_gb_seconds,
            peak_memory_gb=self.peak,
            wall_seconds=now - self.started,
        )


def tree_rss_gb(pid: int) -> float:
    """Resident memory of `pid` and all its descendants, in GB."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for process in tree:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total / _GB


@dataclass
class _Attempt:
    """What this control plane knows of an attempt it launched or adopted."""

    pid: int
    exit_file: Path
    memory_limit_gb: float | None
    timeout_seconds: float | None
    cpus: list[int]
    gpus: list[int]
    sampler: Any
    reason: str | None = None
    kill_at: float | None = None
    usage: AttemptUsage = field(default_factory=AttemptUsage)


def _start_launcher(spec_file: Path, log_path: Path) -> int:
    """Start the launcher detached (`core.processes`): it is not our child; its pid."""
    try:
        return spawn_detached([sys.executable, str(_LAUNCHER), str(spec_file)], log_path)
    except (OSError, subprocess.SubprocessError) as error:
        raise OSError(f"the local launcher {error}") from None


def _parse(handle: AttemptHandle) -> tuple[int, float, Path]:
    pid, created, exit_file = handle.external_id.split(":", 2)
    return int(pid), float(created), Path(exit_file)


class LocalExecutor:
    """Runs attempts as subprocesses on this machine (the default executor)."""

    name = "local"

    def __init__(self, cpus: list[int] | None = None, gpus: int | None = None) -> None:
        """Hand out `cpus` (default: this process's affinity) and GPUs 0..gpus-1."""
        from forgeml.scheduler.cluster import gpu_count

        self.cpu_ids = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        self.gpu_ids = list(range(gpus if gpus is not None else gpu_count()))
        self.attempts: dict[str, _Attempt] = {}

    # ---- allocation of CPU and GPU ids

    def _take(self, pool: list[int], used: set[int], count: int) -> list[int]:
        free = [i for i in pool if i not in used] or pool
        # oversubscribed (a CPU override above the real cores): share, round robin
        return [free[i % len(free)] for i in range(count)] if free else []

    def _allocate(self, request: LaunchRequest) -> list[tuple[list[int], list[int]]]:
        # attempts another control plane started count too once `adopt` has seen them
        live = [a for a in self.attempts.values() if psutil.pid_exists(a.pid)]
        used_cpus = {c for a in live for c in a.cpus}
        used_gpus = {g for a in live for g in a.gpus}
        layout = []
        for _ in range(request.workers):
            cpus = self._take(self.cpu_ids, used_cpus, max(1, math.ceil(request.resources.cpus)))
            gpus = self._take(self.gpu_ids, used_gpus, request.resources.gpus)
            used_cpus.update(cpus)
            used_gpus.update(gpus)
            layout.append((sorted(set(cpus)), sorted(set(gpus))))
        return layout

    # ---- the Executor protocol

    def launch(self, request: LaunchRequest) -> AttemptHandle:
        """Start the attempt's launcher in its own session; returns at once."""
        request.log_path.parent.mkdir(parents=True, exist_ok=True)
        exit_file = request.log_path.with_suffix(".exit")
        exit_file.unlink(missing_ok=True)
        layout = self._allocate(request)
        memory = request.resources.memory_gb * request.workers
        spec = {
            "exit_file": str(exit_file),
            "pid_file": str(request.log_path.with_suffix(".pid")),
            "log_file": str(request.log_path),
            "workers": self._workers(request, layout),
            # read back by a restarted control plane that adopts this attempt
            "memory_limit_gb": memory or None,
            "timeout_seconds": request.timeout_seconds,
        }
        spec_file = request.log_path.with_suffix(".launch.json")
        spec_file.write_text(json.dumps(spec))
        pid = _start_launcher(spec_file, request.log_path)
        created = create_time(pid)
        handle = AttemptHandle(self.name, f"{pid}:{created!r}:{exit_file}")
        self.attempts[handle.external_id] = _Attempt(
            pid=pid,
            exit_file=exit_file,
            memory_limit_gb=memory or None,
            timeout_seconds=request.timeout_seconds,
            cpus=[c for cpus, _ in layout for c in cpus],
            gpus=[g for _, gpus in layout for g in gpus],
            sampler=_sampler(pid, [g for _, gpus in layout for g in gpus]),
        )
        return handle

    def _workers(
        self, request: LaunchRequest, layout: list[tuple[list[int], list[int]]]
    ) -> list[dict[str, Any]]:
        count = 1 if request.launch_once else request.workers
        port = free_port() if count > 1 else None
        workers = []
        for rank in range(count):
            cpus, gpus = layout[rank] if not request.launch_once else _merged(layout)
            env = os.environ | request.env | {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))}
            if port is not None:
                env |= {
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(count),
                    "LOCAL_WORLD_SIZE": str(count),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port),
                }
            cwd = str(request.cwd) if request.cwd else None
            workers.append({"command": request.command, "env": env, "cpus": cpus, "cwd": cwd})
        return workers

    def poll(self, handle: AttemptHandle) -> AttemptStatus:
        """Still running (usage so far), or ended with its exit code and reason."""
        attempt = self._known(handle)
        pid, created, exit_file = _parse(handle)
        # sample before reaping: a zombie still holds its final CPU times
        with contextlib.suppress(psutil.Error):
            if attempt.sampler is not None:
                attempt.usage = attempt.sampler.sample()
        if is_alive(pid, created):
            self._enforce(handle, attempt)
            return AttemptStatus(running=True, usage=attempt.usage)
        self.attempts.pop(handle.external_id, None)
        if exit_file.exists():
            code = int(json.loads(exit_file.read_text())["exit_code"])
            return AttemptStatus(False, code, attempt.reason, attempt.usage)
        reason = attempt.reason or "the attempt's process ended without recording an exit code"
        return AttemptStatus(False, -signal.SIGKILL, reason, attempt.usage)

    def _enforce(self, handle: AttemptHandle, attempt: _Attempt) -> None:
        now = time.time()
        if attempt.kill_at is not None and now >= attempt.kill_at:
            signal_group(attempt.pid, signal.SIGKILL)  # the launcher leads its session
            return
        limit = attempt.memory_limit_gb
        if attempt.reason is None and limit and tree_rss_gb(attempt.pid) > limit:
            attempt.reason = f"exceeded its memory limit of {limit:g} GB"
            signal_group(attempt.pid, signal.SIGKILL)  # the launcher leads its session
            return
        timeout = attempt.timeout_seconds
        if attempt.reason is None and timeout and attempt.usage.wall_seconds > timeout:
            attempt.reason = f"timed out after {timeout:g} s"
            self.terminate(handle, grace_seconds=10.0)

    def terminate(self, handle: AttemptHandle, grace_seconds: float) -> None:
        """SIGTERM the launcher (it forwards it); `poll` kills the session after the grace."""
        attempt = self._known(handle)
        if attempt.kill_at is None:
            attempt.kill_at = time.time() + grace_seconds
            with contextlib.suppress(ProcessLookupError):
                os.kill(attempt.pid, signal.SIGTERM)

    def adopt(self, handle: AttemptHandle) -> bool:
        """True when the attempt is still alive or has left its exit code behind."""
        pid, created, exit_file = _parse(handle)
        self._known(handle)
        return is_alive(pid, created) or exit_file.exists()

    def recover(self, log_path: Path, wait_seconds: float = 10.0) -> AttemptHandle | None:
        """The handle of an attempt launched for `log_path` whose handle was never recorded
        (the control plane died in between); None when no launcher ever started for it.

        A launch writes its spec first, then starts the launcher, which writes its pid
        first: with a spec and no pid yet, the launcher may still be starting, so this
        waits up to `wait_seconds` for it.
        """
        spec_file = log_path.with_suffix(".launch.json")
        pid_file = log_path.with_suffix(".pid")
        exit_file = log_path.with_suffix(".exit")
        if not spec_file.exists():
            return None
        deadline = time.monotonic() + wait_seconds
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            return None
        created = 0.0
        with contextlib.suppress(psutil.Error):  # it ended: its exit file says how
            launcher = psutil.Process(pid)
            if str(spec_file) in launcher.cmdline():  # not a later process given its pid
                created = create_time(pid)
        if not created and not exit_file.exists():
            return None  # killed without a word: lost, as any such attempt
        return AttemptHandle(self.name, f"{pid}:{created!r}:{exit_file}")

    def _known(self, handle: AttemptHandle) -> _Attempt:
        attempt = self.attempts.get(handle.external_id)
        if attempt is None:  # launched by an earlier control plane: rebuild what we can
            pid, _, exit_file = _parse(handle)
            cpus, gpus, memory, timeout = _read_launch(exit_file)
            try:
                sampler: Any = _sampler(pid, gpus)
            except psutil.Error:
                sampler = None
            attempt = _Attempt(pid, exit_file, memory, timeout, cpus, gpus, sampler)
            self.attempts[handle.external_id] = attempt
        return attempt


def _merged(layout: list[tuple[list[int], list[int]]]) -> tuple[list[int], list[int]]:
    cpus = {c for worker_cpus, _ in layout for c in worker_cpus}
    gpus = {g for _, worker_gpus in layout for g in worker_gpus}
    return sorted(cpus), sorted(gpus)


def _read_launch(exit_file: Path) -> tuple[list[int], list[int], float | None, float | None]:
    try:
        spec = json.loads(exit_file.with_suffix(".launch.json").read_text())
    except (OSError, ValueError):
        return [], [], None, None
    cpus = [c for worker in spec["workers"] for c in worker.get("cpus") or []]
    gpus = [
        int(g)
        for worker in spec["workers"]
        for g in worker["env"].get("CUDA_VISIBLE_DEVICES", "").split(",")
        if g
    ]
    return cpus, gpus, spec.get("memory_limit_gb"), spec.get("timeout_seconds")

"""Measure what one attempt used from its processes: CPU, memory, GPU and wall time.

`ProcessTreeSampler` follows a process and every descendant it starts (psutil; on Linux the
descendants are found through `/proc/<pid>/task/<tid>/children`, which costs in proportion
to the tree rather than to every process on the machine). Each `sample()` returns the use
so far, cumulative since the root process started:

- CPU-seconds: user + system time of every live process in the tree, plus the
  `children_user`/`children_system` times the kernel adds to a parent when it reaps a
  child, plus the last seen time of tree processes reaped by someone outside the tree
  (orphans adopted by init), so CPU of processes that have exited is never lost.
- memory GB-seconds: the tree's resident memory (RSS, an upper bound when processes share
  pages) integrated over time with the trapezoid rule between samples; and its peak.
- GPU-seconds: NVML's list of processes holding a context on each watched GPU; a GPU counts
  as busy while any tree process holds one there. 0 when NVML (the `gpu` extra, a driver)
  is missing. Inside a container whose PID namespace differs from the driver's, NVML
  reports host PIDs that match nothing here, and GPU-seconds stay 0.
- GPU utilisation, peak GPU memory and energy: each sample reads the GPUs the tree holds
  (utilisation, memory used, power draw) into a `forgeml.core.nvml.GpuMeter`: the mean
  utilisation over the time sampled, the peak, and the power integrated into joules. None
  (absent, not 0) without NVML or before the tree holds a GPU. Utilisation and power are
  the whole GPU's: a GPU shared with another job counts that job's work too.

CPU and wall time come from the kernel's own counters, so sampling more often does not make
them more exact; memory and GPU time are as exact as the sampling interval. What can still
be missed: the CPU of a child whose parent ignores SIGCHLD (the kernel reaps it without
adding its times to the parent), and the last interval of an orphan adopted by init.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from forgeml.core.nvml import GpuMeter, GpuUsage, nvml_module, read_gpu_sample
from forgeml.scheduler.executors.base import AttemptUsage

_GB = 1e9  # decimal GB, as in resource requests and `cluster.local_capacity`
_HAS_PROC_CHILDREN = sys.platform.startswith("linux") and os.path.exists(
    f"/proc/{os.getpid()}/task/{os.getpid()}/children"
)


@dataclass
class _Tracked:
    """One process of the tree, with what was read of it last."""

    process: psutil.Process
    ppid: int = 0
    cpu: float = 0.0  # user + system + children_user + children_system
    rss: int = 0
    running: bool = True  # alive and not a zombie


@dataclass
class _Reading:
    """One pass over the tree."""

    cpu: float = 0.0
    rss: int = 0
    pids: frozenset[int] = frozenset()
    running: bool = False


class ProcessTreeSampler:
    """Cumulative resource use of a process and all its descendants.

    Take a last sample after the root process exits but before it is reaped (its zombie
    keeps its final CPU times); the local launcher reaps its workers, so their CPU is in
    its `children_*` times.
    """

    def __init__(
        self,
        pid: int,
        *,
        gpus: Sequence[int] | None = None,
        baseline: AttemptUsage | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Start following `pid`.

        Args:
            pid: the root process of the attempt.
            gpus: NVML indices (PCI bus order) of the GPUs to watch; None watches every
                GPU NVML sees, an empty sequence none (no NVML call at all).
            baseline: use recorded before a control-plane restart; memory and GPU time
                continue from it, and no figure goes below it.
            clock: monotonic seconds between samples, over which memory and GPU time are
                integrated (wall and CPU time are the kernel's own counters).

        Raises:
            ProcessLookupError: no process `pid`.
        """
        try:
            root = psutil.Process(pid)
            self._started = root.create_time()
        except psutil.NoSuchProcess:
            raise ProcessLookupError(f"No process with pid {pid}.") from None
        self._root = pid
        self._tracked: dict[int, _Tracked] = {pid: _Tracked(root)}
        self._gone_cpu = 0.0  # last seen CPU of tree processes no tree process reaped
        self._gpu_handles = _gpu_handles(gpus)
        self._baseline = baseline or AttemptUsage()
        self._gpu_meter = GpuMeter(
            GpuUsage(
                self._baseline.gpu_utilization,
                self._baseline.gpu_peak_memory_bytes,
                self._baseline.gpu_energy_joules,
            )
        )
        self._memory_gb_seconds = self._baseline.memory_gb_seconds
        self._gpu_seconds = self._baseline.gpu_seconds
        self._peak_gb = self._baseline.peak_memory_gb
        self._cpu = self._baseline.cpu_seconds
        self._wall = max(self._baseline.wall_seconds, time.time() - self._started)
        self._clock = clock
        reading = self._read_tree()
        self._last_at = clock()
        self._last_gb = reading.rss / _GB
        self._last_busy = len(self._held_gpus(reading.pids, self._last_at))
        self._update(reading)

    def sample(self) -> AttemptUsage:
        """The use so far, cumulative since the root process started."""
        reading = self._read_tree()
        now = self._clock()
        elapsed, self._last_at = now - self._last_at, now
        memory_gb = reading.rss / _GB
        self._memory_gb_seconds += (self._last_gb + memory_gb) / 2 * elapsed
        self._last_gb = memory_gb
        busy = len(self._held_gpus(reading.pids, now)) if reading.pids else 0
        self._gpu_seconds += (self._last_busy + busy) / 2 * elapsed
        self._last_busy = busy
        self._update(reading)
        gpu = self._gpu_meter.usage()
        return AttemptUsage(
            cpu_seconds=self._cpu,
            gpu_seconds=self._gpu_seconds,
            memory_gb_seconds=self._memory_gb_seconds,
            peak_memory_gb=self._peak_gb,
            wall_seconds=self._wall,
            gpu_utilization=gpu.utilization,
            gpu_peak_memory_bytes=gpu.peak_memory_bytes,
            gpu_energy_joules=gpu.energy_joules,
        )

    def _update(self, reading: _Reading) -> None:
        # CPU counters only grow; a reap racing a pass may hide a child for one pass
        self._cpu = max(self._cpu, reading.cpu)
        self._peak_gb = max(self._peak_gb, reading.rss / _GB)
        if reading.running:  # wall time stops at the first pass that finds nothing running
            self._wall = max(self._wall, time.time() - self._started)

    # ---- one pass over the tree

    def _read_tree(self) -> _Reading:
        order = self._discover()
        members = set(order)
        # parents before children: a child reaped between the two reads is then missing
        # from this pass (its parent's children_* gain it next pass), never counted twice
        for pid in order:
            tracked = self._tracked[pid]
            if _read(tracked):
                continue
            del self._tracked[pid]
            if tracked.ppid not in members:
                # reaped outside the tree (init adopted an orphan, the executor reaped the
                # root): keep its last reading. A parent in the tree that reaped it holds its
                # CPU in children_*, or passed it on to its own reaper when it exited too.
                self._gone_cpu += tracked.cpu
        live = self._tracked.values()
        return _Reading(
            cpu=self._gone_cpu + sum(t.cpu for t in live),
            rss=sum(t.rss for t in live),
            pids=frozenset(self._tracked),
            running=any(t.running for t in live),
        )

    def _discover(self) -> list[int]:
        """Every tracked pid and every new descendant, parents before children."""
        order = list(self._tracked)
        queued = set(order)
        index = 0
        while index < len(order):
            for child in _child_pids(order[index]):
                if child in queued:
                    continue
                try:
                    self._tracked[child] = _Tracked(psutil.Process(child), ppid=order[index])
                except psutil.NoSuchProcess:
                    continue
                queued.add(child)
                order.append(child)
            index += 1
        return order

    # ---- GPUs

    def _held_gpus(self, pids: frozenset[int], at: float) -> list[int]:
        """The watched GPUs where a tree process holds a context; each is read into the
        GPU meter."""
        if not self._gpu_handles:
            return []
        nvml = nvml_module()
        held = []
        for index, handle in enumerate(self._gpu_handles):
            try:
                holders = [
                    *nvml.nvmlDeviceGetComputeRunningProcesses(handle),
                    *nvml.nvmlDeviceGetGraphicsRunningProcesses(handle),
                ]
            except nvml.NVMLError:
                continue
            if any(holder.pid in pids for holder in holders):
                held.append(index)
                sample = read_gpu_sample(nvml, handle, at)
                if sample is not None:
                    self._gpu_meter.add(index, sample)
        return held


def _read(tracked: _Tracked) -> bool:
    """Refresh `tracked` from the kernel; False when the process is gone."""
    process = tracked.process
    try:
        with process.oneshot():
            times = process.cpu_times()
            tracked.ppid = process.ppid()
            tracked.running = process.status() != psutil.STATUS_ZOMBIE
            tracked.rss = process.memory_info().rss if tracked.running else 0
    except psutil.NoSuchProcess:  # reaped (a zombie still reads: its final times)
        return False
    except psutil.AccessDenied:
        return True  # keep the last reading (another user's process in the tree)
    tracked.cpu = times.user + times.system + times.children_user + times.children_system
    return True


def _child_pids(pid: int) -> list[int]:
    if not _HAS_PROC_CHILDREN:
        try:
            return [child.pid for child in psutil.Process(pid).children()]
        except psutil.Error:
            return []
    # a child's parent is the thread that forked it, so read every thread's list
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as listing:
                children.extend(int(child) for child in listing.read().split())
        except OSError:
            continue
    return children


# ---- NVML, initialised once per process


def _gpu_handles(gpus: Sequence[int] | None) -> list[Any]:
    if gpus is not None and len(gpus) == 0:
        return []
    nvml = nvml_module()
    if nvml is None:
        return []
    try:
        indices = range(nvml.nvmlDeviceGetCount()) if gpus is None else gpus
        return [nvml.nvmlDeviceGetHandleByIndex(index) for index in indices]
    except nvml.NVMLError:
        return []

"""What the control plane knows of one Ray attempt, and how it ended.

`RayAttempt` holds the placement group, one actor per worker, the last report of each
worker and how far its output has been written to the log. Its outcome follows torchrun:
a worker that fails on its own fails the whole gang (the earliest such worker is named in
the reason); an attempt stopped on request ends with the first non-zero exit code and no
reason, so the service can tell a preemption (SIGTERM, checkpoint, exit) from a failure.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgeml.core.nvml import GpuUsage, combine_gpu_usage
from forgeml.scheduler.executors._ray_worker import STOP_REQUESTED, WorkerReport
from forgeml.scheduler.executors.base import AttemptStatus, AttemptUsage


@dataclass(frozen=True, order=True)
class Failure:
    """A worker that failed on its own (not stopped by the control plane)."""

    at: float  # when it ended (or was found lost), seconds since the epoch
    rank: int
    exit_code: int
    what: str  # "exited with code 3", "exceeded its memory limit of 2 GB", ...


@dataclass
class RayAttempt:
    """One attempt's placement group, worker actors and what they reported."""

    name: str
    group: Any  # the placement group (None when it is gone)
    actors: list[Any]  # one per worker; None where the actor is gone
    log_path: Path | None
    placed: bool = False
    stop_requested: bool = False
    stopping_others: bool = False
    offsets: list[int | None] = field(default_factory=list)  # next line to read, per rank
    reports: list[WorkerReport | None] = field(default_factory=list)
    pending: dict[int, Any] = field(default_factory=dict)  # rank -> read() in flight
    lost: dict[int, tuple[float, str]] = field(default_factory=dict)  # rank -> (when, why)

    def __post_init__(self) -> None:
        self.offsets = [None] * len(self.actors)
        self.reports = [None] * len(self.actors)

    def ended(self, rank: int) -> bool:
        """True once the worker's command has exited (and all its output was read)."""
        report = self.reports[rank]
        return rank in self.lost or (report is not None and report.exit_code is not None)

    def all_ended(self) -> bool:
        return all(self.ended(rank) for rank in range(len(self.actors)))

    def running_actors(self) -> list[Any]:
        return [a for rank, a in enumerate(self.actors) if a is not None and not self.ended(rank)]

    def usage(self) -> AttemptUsage:
        """The workers' use summed (peak memory too: they may share a node); wall: longest."""
        usages = [report.usage for report in self.reports if report is not None]
        gpu = combine_gpu_usage(
            [
                GpuUsage(u.gpu_utilization, u.gpu_peak_memory_bytes, u.gpu_energy_joules)
                for u in usages
            ]
        )
        return AttemptUsage(
            cpu_seconds=sum(u.cpu_seconds for u in usages),
            gpu_seconds=sum(u.gpu_seconds for u in usages),
            memory_gb_seconds=sum(u.memory_gb_seconds for u in usages),
            peak_memory_gb=sum(u.peak_memory_gb for u in usages),
            wall_seconds=max((u.wall_seconds for u in usages), default=0.0),
            gpu_utilization=gpu.utilization,
            gpu_peak_memory_bytes=gpu.peak_memory_bytes,
            gpu_energy_joules=gpu.energy_joules,
        )

    def failures(self) -> list[Failure]:
        """Workers that failed on their own, earliest first; none after a requested stop."""
        if self.stop_requested or any(
            report is not None and report.stopped_by == STOP_REQUESTED for report in self.reports
        ):
            return []
        failures = [
            Failure(at, rank, -signal.SIGKILL, why) for rank, (at, why) in self.lost.items()
        ]
        for report in self.reports:
            if report is None or report.exit_code is None or report.stopped_by is not None:
                continue
            if report.exit_code != 0 or report.reason:
                what = report.reason or describe_exit(report.exit_code)
                failures.append(
                    Failure(report.ended_at or 0.0, report.rank, report.exit_code, what)
                )
        return sorted(failures)

    def outcome(self) -> AttemptStatus:
        """How the attempt ended; call once every worker has ended."""
        usage = self.usage()
        failures = self.failures()
        if failures:
            first = failures[0]
            reason = f"worker rank {first.rank} {first.what}"
            return AttemptStatus(False, first.exit_code, reason, usage)
        codes = [report.exit_code for report in self.reports if report is not None]
        code = next((c for c in codes if c), -signal.SIGKILL if self.lost else 0)
        return AttemptStatus(False, code, None, usage)

    def append_log(self, report: WorkerReport) -> None:
        """Write the report's new lines to the attempt's log, prefixed with the rank."""
        rank, offset = report.rank, self.offsets[report.rank]
        self.log_path = self.log_path or Path(report.log_path)
        prefix = f"[rank {rank}] " if len(self.actors) > 1 else ""
        lines = [f"{prefix}{line}\n" for line in report.lines]
        if offset is not None and report.start > offset:
            lines.insert(0, f"{prefix}[{report.start - offset} lines dropped: unread too long]\n")
        self.offsets[rank] = report.start + len(report.lines)
        if lines:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.writelines(lines)


def describe_exit(code: int) -> str:
    """'exited with code N' or 'was killed by SIGNAME'."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"

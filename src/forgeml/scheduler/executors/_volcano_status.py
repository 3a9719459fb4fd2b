"""Reading a Volcano Job back: its phase as an `AttemptStatus`, its allocation as usage.

Volcano's job phases are the CRD's `status.state.phase` enum (Pending, Running,
Restarting, Completing, Completed, Aborting, Aborted, Terminating, Terminated, Failed);
pods are read as the API's JSON dicts.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from forgeml.scheduler.executors._volcano import ALLOCATION_ANNOTATION
from forgeml.scheduler.executors.base import AttemptStatus, AttemptUsage

# Volcano job phases (the CRD's status.state.phase enum): still alive, or ended with
# (exit code, reason). Aborted/Terminated jobs were stopped, as by SIGTERM.
_RUNNING_PHASES = frozenset(
    {"Pending", "Running", "Restarting", "Completing", "Aborting", "Terminating"}
)
_FINAL_PHASES: dict[str, tuple[int, str | None]] = {
    "Completed": (0, None),
    "Failed": (1, "the Volcano job failed"),
    "Aborted": (-signal.SIGTERM, "the Volcano job was aborted"),
    "Terminated": (-signal.SIGTERM, "the Volcano job was terminated"),
}


def job_phase(job: Mapping[str, Any]) -> str:
    """The Volcano job's phase; `Pending` until the controller has written a status."""
    return str((job.get("status") or {}).get("state", {}).get("phase") or "Pending")


def attempt_status(job: Mapping[str, Any], now: datetime | None = None) -> AttemptStatus:
    """What a Volcano Job object says about the attempt it runs.

    Pending (waiting for the whole gang), Running, Restarting and the transitional phases
    count as running; Completed is exit code 0; Failed, Aborted and Terminated end it
    with the phase's reason and Volcano's own message. Usage is the allocation (requests
    x running time): the processes inside pods are not visible from here.
    """
    phase = job_phase(job)
    usage = allocated_usage(job, now)
    if phase in _RUNNING_PHASES or phase not in _FINAL_PHASES:
        return AttemptStatus(running=True, usage=usage)
    exit_code, reason = _FINAL_PHASES[phase]
    state = (job.get("status") or {}).get("state", {})
    detail = ": ".join(str(part) for part in (state.get("reason"), state.get("message")) if part)
    if reason and detail:
        reason = f"{reason} ({detail})"
    return AttemptStatus(running=False, exit_code=exit_code, reason=reason, usage=usage)


def allocated_usage(job: Mapping[str, Any], now: datetime | None = None) -> AttemptUsage:
    """Requested resources x the time since the job first ran (to its end when final)."""
    status = job.get("status") or {}
    started = [
        _timestamp(condition.get("lastTransitionTime"))
        for condition in status.get("conditions") or []
        if condition.get("status") == "Running"
    ]
    start = min((moment for moment in started if moment), default=None)
    if start is None:
        return AttemptUsage()
    end = now or datetime.now(UTC)
    if job_phase(job) in _FINAL_PHASES:
        end = _timestamp(status.get("state", {}).get("lastTransitionTime")) or end
    wall = max(0.0, (end - start).total_seconds())
    annotation = (job.get("metadata") or {}).get("annotations", {}).get(ALLOCATION_ANNOTATION)
    allocation = json.loads(annotation) if annotation else {}
    memory_gb = float(allocation.get("memory_gb", 0.0))
    return AttemptUsage(
        cpu_seconds=float(allocation.get("cpus", 0.0)) * wall,
        gpu_seconds=float(allocation.get("gpus", 0)) * wall,
        memory_gb_seconds=memory_gb * wall,
        peak_memory_gb=memory_gb,
        wall_seconds=wall,
    )


def _timestamp(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def pod_failure(pods: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """The first failed container among a job's pods (API dicts): (exit code, reason)."""
    for pod in pods:
        name = pod.get("metadata", {}).get("name", "?")
        status = pod.get("status") or {}
        if status.get("reason") == "DeadlineExceeded":
            return -signal.SIGKILL, f"timed out (pod {name} passed its deadline)"
        for container in status.get("containerStatuses") or []:
            ended = (container.get("state") or {}).get("terminated") or {}
            code = ended.get("exitCode")
            if code:
                if ended.get("reason") == "OOMKilled":
                    return code, f"exceeded its memory limit (pod {name} was OOMKilled)"
                return code, f"pod {name} exited with code {code} ({ended.get('reason', 'Error')})"
    return None

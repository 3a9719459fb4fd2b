from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from forgeml.core.workspace import Workspace
from forgeml.scheduler.jobs import find_job, parse_spec, submit
from forgeml.scheduler.model import JobSpec, JobState
from tests._wait import wait_until

PY = sys.executable


def job_spec(command: list[str], **fields: Any) -> JobSpec:
    """A spec for `command`, small by default (1 CPU, 0.5 GB)."""
    fields.setdefault("resources", {"cpus": 1, "memory_gb": 0.5})
    return parse_spec({"name": "t", "command": command, "owner": "tester", **fields})


def python_job(code: str, **fields: Any) -> JobSpec:
    return job_spec([PY, "-c", code], **fields)


def submit_local(workspace: Workspace, spec: JobSpec) -> str:
    from forgeml.scheduler.cluster import local_cluster

    return submit(workspace, spec, nodes=local_cluster(workspace.settings)).id


def wait_for(
    condition: Callable[[], bool], timeout: float = 30.0, step: Callable[[], Any] | None = None
) -> None:
    """Wait until `condition()`, running `step()` (a scheduler cycle) before each check."""

    def stepped() -> bool:
        if step is not None:
            step()
        return condition()

    wait_until(stepped, timeout, "the scheduler's condition", interval=0.05)


def state_of(workspace: Workspace, job_id: str) -> str:
    return find_job(workspace, job_id).state


def run_to_end(scheduler: Any, job_id: str, timeout: float = 30.0) -> str:
    """Cycle `scheduler` until the job reaches a final state; returns it."""
    workspace = scheduler.workspace
    wait_for(
        lambda: JobState(state_of(workspace, job_id)).is_final,
        timeout,
        step=scheduler.cycle,
    )
    return state_of(workspace, job_id)

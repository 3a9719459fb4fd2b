"""Submit a job and, with no server running, run it here to its end.

`submit_and_run` is what `forgeml jobs submit` does with any command. `run_entry_point`
is what `forgeml train|finetune|tune|optimize` do: the job is a domain module run as
`python -m MODULE SPEC_JSON` (`contract.py`), and its outcome comes back as the
`JobResult` it wrote, never from its log.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ForgemlError
from forgeml.scheduler.contract import JOB_CWD_ENV, JobResult, read_result, result_path

if TYPE_CHECKING:
    from forgeml.core.store import JobRecord
    from forgeml.core.workspace import Workspace

Output = Callable[[bytes], None]
DEFAULT_MEMORY_GB = 4.0


def _stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _stderr(data: bytes) -> None:
    # the terminal's stderr itself, as a training process's own output always went
    os.write(2, data)


@dataclass(frozen=True)
class JobOptions:
    """How a forgeml job is scheduled."""

    detach: bool = False
    wait: bool = False
    queue: str = "default"
    priority: str = "normal"
    cpus: float = 1.0
    memory_gb: float | None = None  # default: DEFAULT_MEMORY_GB, or all there is when less
    gpus: int | None = None  # default: one per worker when this machine has enough


def submit_and_run(
    workspace: Workspace,
    fields: dict[str, Any],
    *,
    detach: bool,
    wait: bool,
    model_name: str | None = None,
    output: Output = _stdout,
) -> JobRecord:
    """Record the job; run it in the foreground unless a server runs (or `detach`).

    Returns the job as it stands when this returns (ended when it ran or was waited for).
    """
    from forgeml.scheduler.cluster import local_cluster
    from forgeml.scheduler.foreground import follow, run_in_foreground
    from forgeml.scheduler.jobs import parse_spec, submit
    from forgeml.scheduler.lease import running_server

    fields = {"env": {}} | fields
    fields["env"] = {JOB_CWD_ENV: os.getcwd()} | dict(fields["env"])
    spec = parse_spec({"owner": workspace.actor} | fields)
    server = running_server(workspace.settings)
    local = server is None or server.executor == "local"
    nodes = local_cluster(workspace.settings) if local else []
    executor = server.executor if server else "local"
    job = submit(workspace, spec, nodes=nodes, executor=executor, model_name=model_name)
    if server is None and not detach:
        return run_in_foreground(workspace, job.id, output)
    if wait:
        return follow(workspace, job.id, output)
    return job


def job_resources(workspace: Workspace, options: JobOptions, workers: int) -> dict[str, float]:
    """What one worker of a forgeml job asks for: `options`' figures, memory and GPUs
    defaulted from this machine (`DEFAULT_MEMORY_GB`, one GPU per worker when there are)."""
    memory, gpus = options.memory_gb, options.gpus
    if memory is None or gpus is None:
        from forgeml.scheduler.cluster import local_capacity

        # training uses CUDA when it sees it, as it did before it ran as a job
        capacity = local_capacity(workspace.settings)
        if memory is None:
            memory = min(DEFAULT_MEMORY_GB, capacity.memory_gb / workers)
        if gpus is None:
            gpus = 1 if capacity.gpus >= workers else 0
    return {"cpus": options.cpus, "gpus": gpus, "memory_gb": memory}


def run_entry_point(
    workspace: Workspace,
    module: str,
    spec: dict[str, Any],
    *,
    kind: str,
    name: str,
    workers: int = 1,
    options: JobOptions | None = None,
    output: Output | None = None,
) -> tuple[JobRecord, JobResult | None]:
    """Run `python -m MODULE SPEC_JSON` as a job (or queue it with `options.detach`).

    The job's log goes to `output` as progress (stderr by default: stdout keeps the
    command's own summary).

    Returns:
        The job as it ended (PENDING when queued) and the result its last attempt wrote.

    Raises:
        ForgemlError: the job did not succeed: the job's own error (class and sentence)
            when it wrote one, else how the scheduler saw it end.
    """
    options = options or JobOptions()
    fields = {
        "name": name,
        "kind": kind,
        "command": [sys.executable, "-m", module, json.dumps(spec)],
        "resources": job_resources(workspace, options, workers),
        "workers": workers,
        "queue": options.queue,
        "priority": options.priority,
    }
    job = submit_and_run(
        workspace,
        fields,
        detach=options.detach,
        wait=options.wait,
        model_name=name,
        output=output or _stderr,
    )
    if job.state == "PENDING" or not job.state:
        return job, None
    result = job_result(workspace, job)
    if job.state != "SUCCEEDED":
        if result is not None:
            result.raise_error()
        raise_for(job)
    return job, result


def job_result(workspace: Workspace, job: JobRecord) -> JobResult | None:
    """The result the job's last attempt wrote (None for a plain command)."""
    from forgeml.scheduler._records import job_dir

    if not job.attempts:
        return None
    return read_result(result_path(job_dir(workspace, job.id), job.attempts))


def raise_for(job: JobRecord) -> None:
    """Raise the job's failure as one sentence (exit 1) when it did not succeed."""
    if job.state in ("FAILED", "CANCELLED"):
        first_line = (job.error or f"Job {job.id} ended {job.state}.").splitlines()[0]
        raise ForgemlError(f"{first_line} (job {job.id}; `forgeml jobs show {job.id[:12]}`)")

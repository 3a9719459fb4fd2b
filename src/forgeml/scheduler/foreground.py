"""Run one job in the foreground (no server), and follow a job's log as it runs.

With no `forgeml server` running, `forgeml jobs submit` and `forgeml train` still go through
the scheduler: the job is recorded, then this process runs a one-job scheduler loop over
the local executor (it sees what other attempts use, so two foreground jobs share the
machine as the policy says) and streams the attempt's log until the job ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from forgeml.core.store import JobRecord
from forgeml.scheduler.jobs import cancel, find_job
from forgeml.scheduler.model import JobState
from forgeml.scheduler.service import Scheduler, attempt_log

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

Output = Callable[[bytes], None]
POLL_SECONDS = 0.2


@dataclass
class LogCursor:
    """How far the log of which attempt has been shown."""

    attempt: int = 0
    offset: int = 0

    def pump(self, workspace: Workspace, job: JobRecord, output: Output) -> None:
        """Show what the job's attempts wrote since the last call (earlier attempts finished)."""
        while self.attempt <= job.attempts and job.attempts > 0:
            number = max(self.attempt, 1)
            path = attempt_log(workspace, job.id, number)
            if path.exists():
                with open(path, "rb") as handle:
                    handle.seek(self.offset)
                    data = handle.read()
                if data:
                    output(data)
                    self.offset += len(data)
            if number >= job.attempts:
                self.attempt = number
                return
            self.attempt, self.offset = number + 1, 0


def run_in_foreground(
    workspace: Workspace, job_id: str, output: Output, *, grace_seconds: float = 30.0
) -> JobRecord:
    """Run the job through the local executor in this process until it ends.

    Ctrl-C cancels the job (SIGTERM to it, then kill after `grace_seconds`).
    """
    from forgeml.scheduler.cluster import local_cluster
    from forgeml.scheduler.executors.local import LocalExecutor

    executor = LocalExecutor(gpus=local_cluster(workspace.settings)[0].capacity.gpus)
    scheduler = Scheduler(
        workspace,
        executor,
        nodes=local_cluster(workspace.settings),
        only_jobs={job_id},
        grace_seconds=grace_seconds,
    )
    try:
        return _loop(workspace, job_id, output, scheduler.cycle)
    except KeyboardInterrupt:
        job = find_job(workspace, job_id)
        if not JobState(job.state).is_final:
            cancel(workspace, job_id)
            _loop(workspace, job_id, output, scheduler.cycle)
        raise


def follow(workspace: Workspace, job_id: str, output: Output) -> JobRecord:
    """Stream the job's log while a server runs it; returns the job once it has ended."""
    return _loop(workspace, job_id, output, lambda: None)


def _loop(
    workspace: Workspace, job_id: str, output: Output, step: Callable[[], object]
) -> JobRecord:
    cursor = LogCursor()
    while True:
        step()
        job = find_job(workspace, job_id)
        cursor.pump(workspace, job, output)
        if JobState(job.state).is_final:
            return job
        time.sleep(POLL_SECONDS)

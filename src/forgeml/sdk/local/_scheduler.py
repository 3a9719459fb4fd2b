"""Jobs and queues of the local scheduler, as `forgeml.client.Jobs` and
`forgeml.client.Queues` answer them remotely."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any

from forgeml.core.workspace import open_workspace


class LocalJobs:
    """The local scheduler's jobs, as `forgeml.client.Jobs` answers them remotely."""

    def submit(self, command: list[str], **fields: Any) -> dict[str, Any]:
        """Queue a command job for the server's scheduler (as `jobs submit --detach`)."""
        from forgeml.scheduler.jobs import job_summary
        from forgeml.scheduler.submit import submit_and_run

        # the name the API gives a job without one: its program's
        named = {"name": command[0].rsplit("/", 1)[-1]} if command else {}
        with closing(open_workspace()) as workspace:
            job = submit_and_run(
                workspace, named | fields | {"command": command}, detach=True, wait=False
            )
            return job_summary(job)

    def list(
        self, states: Sequence[str] | None = None, queue: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        from forgeml.scheduler.jobs import job_summary, list_jobs

        with closing(open_workspace()) as workspace:
            found = list_jobs(
                workspace, states=states, queue=queue, limit=limit, project=workspace.project
            )
            return [job_summary(job) for job in found]

    def show(self, ref: str) -> dict[str, Any]:
        from forgeml.scheduler.jobs import job_detail

        with closing(open_workspace()) as workspace:
            return job_detail(workspace, ref)

    def cancel(self, ref: str) -> dict[str, Any]:
        from forgeml.scheduler.jobs import cancel, job_summary

        with closing(open_workspace()) as workspace:
            return job_summary(cancel(workspace, ref))

    def retry(self, ref: str) -> dict[str, Any]:
        from forgeml.scheduler.jobs import job_summary, retry

        with closing(open_workspace()) as workspace:
            return job_summary(retry(workspace, ref))

    def log(self, ref: str, attempt: int | None = None) -> bytes:
        from forgeml.scheduler.jobs import attempt_log

        with closing(open_workspace()) as workspace:
            return attempt_log(workspace, ref, attempt)

    def follow(self, ref: str, output: Callable[[bytes], None]) -> dict[str, Any]:
        from forgeml.scheduler.foreground import follow
        from forgeml.scheduler.jobs import find_job

        with closing(open_workspace()) as workspace:
            ended = follow(workspace, find_job(workspace, ref).id, output)
            return {"job_id": ended.id, "state": ended.state, "attempts": ended.attempts}


class LocalQueues:
    """The local scheduler's queues, as `forgeml.client.Queues` answers them remotely."""

    def list(self) -> list[dict[str, Any]]:
        from forgeml.scheduler.queues import list_queues, queue_summary

        with closing(open_workspace()) as workspace:
            return [queue_summary(q) for q in list_queues(workspace)]

    def show(self, name: str) -> dict[str, Any]:
        from forgeml.scheduler.queues import queue_detail

        with closing(open_workspace()) as workspace:
            return queue_detail(workspace, name)

    def create(self, fields: dict[str, Any]) -> dict[str, Any]:
        from forgeml.scheduler.queues import create_queue, parse_queue, queue_summary

        spec = parse_queue(fields)
        with closing(open_workspace()) as workspace:
            return queue_summary(create_queue(workspace, spec))

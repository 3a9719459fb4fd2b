"""What the command-job route tests read back: a job's recorded spec and the job folders
left under the workspace's home."""

from __future__ import annotations

from typing import Any

from forgeml.core.store import JobRecord
from forgeml.core.workspace import Workspace


def job_spec(workspace: Workspace, job_id: str) -> dict[str, Any]:
    """The spec recorded for `job_id`."""
    with workspace.store.session() as session:
        job = session.get(JobRecord, job_id)
        assert job is not None
        return dict(job.spec)


def job_folders_left(workspace: Workspace) -> list[str]:
    """The command jobs' folders still under the home, by name."""
    commands = workspace.settings.home / "commands"
    return sorted(p.name for p in commands.iterdir()) if commands.exists() else []

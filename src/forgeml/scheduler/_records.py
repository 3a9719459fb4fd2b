"""What the service derives from job rows: times, folders, environment, the policy's view.

Plain functions over `JobRecord`s, shared by the service loop and the foreground runner.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from forgeml.core.store import JobRecord
from forgeml.scheduler.contract import JOB_ATTEMPT_ENV, JOB_DIR_ENV, JOB_ID_ENV
from forgeml.scheduler.model import PendingJob, Resources

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace


def timestamp(moment: datetime) -> float:
    """Seconds since the epoch (SQLite hands back naive datetimes, which are UTC)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def job_dir(workspace: Workspace, job_id: str) -> Path:
    """The job's own folder (`FORGEML_JOB_DIR`): state kept across its attempts."""
    return workspace.settings.home.resolve() / "jobs" / job_id


def attempt_log(workspace: Workspace, job_id: str, number: int) -> Path:
    """Where attempt `number` of the job writes its combined output."""
    return workspace.settings.home.resolve() / "logs" / "jobs" / job_id / f"{number}.log"


def job_environment(
    workspace: Workspace, job_id: str, attempt: int, owner: str, *, forgeml_command: bool = False
) -> dict[str, str]:
    """What every job sees: its ids, folder, and the workspace and tracking it belongs to
    (its project, FORGEML_PROJECT, is set by the scheduler from the job's record).

    `MLFLOW_TRACKING_URI` is the workspace's (any script can log to it), except for forgeml's
    own train/finetune/tune commands when none is set here: they derive the same embedded
    URI from FORGEML_HOME, and setting it would move their MLflow artifacts from
    `<home>/mlartifacts` to `./mlruns` (MLflow's choice when the URI is given).
    """
    settings = workspace.settings
    home = settings.home.resolve()
    env = {
        JOB_ID_ENV: job_id,
        JOB_ATTEMPT_ENV: str(attempt),
        JOB_DIR_ENV: str(job_dir(workspace, job_id)),
        "FORGEML_HOME": str(home),
        "FORGEML_DB_URL": settings.database_url,
        "FORGEML_ARTIFACTS_URL": settings.artifact_root,
        "FORGEML_USER": owner,
    }
    override = os.environ.get("MLFLOW_TRACKING_URI")
    if override or not forgeml_command:
        env["MLFLOW_TRACKING_URI"] = override or f"sqlite:///{home / 'mlflow.db'}"
    return env


def demand_of(job: JobRecord) -> Resources:
    resources = job.spec.get("resources") or {}
    return Resources(
        float(resources.get("cpus", 1.0)),
        int(resources.get("gpus", 0)),
        float(resources.get("memory_gb", 1.0)),
    )


def pending_of(job: JobRecord) -> PendingJob:
    return PendingJob(
        job.id,
        job.queue,
        job.priority,
        demand_of(job),
        int(job.spec.get("workers", 1)),
        timestamp(job.submitted_at),
    )

"""Training runs, recorded in MLflow and in forgeml's store, kept honest by a heartbeat.

A run is one MLflow run (params, curves, files) plus a `runs` row in forgeml's store
(config, dataset version, lease, final metrics). Every change to a run is made in one
forgeml transaction that wraps the MLflow call, so a failure on either side leaves the
old state in forgeml.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

import forgeml
from forgeml.core.code import git_commit
from forgeml.core.errors import ForgemlError, NotFoundError, UsageError
from forgeml.core.ids import validate_name
from forgeml.core.store import DatasetVersion, RunRecord
from forgeml.core.workspace import Workspace
from forgeml.scheduler.contract import JobContext
from forgeml.tracking import _context
from forgeml.tracking._mlflow import (
    MAX_TAG_VALUE_LENGTH,
    artifact_location,
    ensure_experiment,
    json_safe,
    numeric_leaves,
    open_client,
)
from forgeml.tracking.heartbeat import Heartbeat
from forgeml.tracking.logger import MlflowMetricLogger

if TYPE_CHECKING:
    from mlflow import MlflowClient

ENVIRONMENT_ARTIFACT = "environment.json"
# the scheduler job whose process writes the run (absent outside a job); a resumed run
# carries the job that resumed it
JOB_TAG = "forgeml.job"
_HEX = frozenset("0123456789abcdef")
_log = logging.getLogger(__name__)


class RunStatus(StrEnum):
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


@dataclass
class RunHandle:
    """A run this process is writing to: its ids, its MLflow client and its heartbeat."""

    workspace: Workspace
    client: MlflowClient = field(repr=False)
    run_id: str
    name: str
    experiment_id: str
    lease_seconds: int
    heartbeat: Heartbeat | None = field(default=None, repr=False)
    _loggers: list[MlflowMetricLogger] = field(default_factory=list, init=False, repr=False)

    def metric_logger(self, flush_seconds: float = 1.0) -> MlflowMetricLogger:
        """A batched MetricLogger for this run; `finish_run` closes it."""
        logger = MlflowMetricLogger(self.client, self.run_id, flush_seconds=flush_seconds)
        self._loggers.append(logger)
        return logger

    @property
    def artifact_uri(self) -> str:
        """Where MLflow keeps this run's files."""
        return str(self.client.get_run(self.run_id).info.artifact_uri)

    def close_loggers(self) -> None:
        for logger in self._loggers:
            logger.close()


def start_run(
    workspace: Workspace,
    config: Mapping[str, Any],
    name: str,
    dataset_version: DatasetVersion | None,
    parent_run_id: str | None = None,
    lease_seconds: int = 30,
    experiment: str | None = None,
) -> RunHandle:
    """Start a run in MLflow and forgeml, and its heartbeat.

    Args:
        workspace: where the run is recorded.
        config: the resolved config (JSON-serialisable); logged flattened as params.
        name: run name (also the experiment name unless `experiment` is given).
        dataset_version: the training data, logged as the run's dataset input.
        parent_run_id: the HPO study run this trial belongs to.
        lease_seconds: a run whose heartbeat is older than this is reaped as KILLED.
        experiment: MLflow experiment; default `name`.

    Returns:
        The handle to log metrics, models and the outcome to.

    Raises:
        InvalidNameError: `name` or `experiment` is not a plain identifier.
        UsageError: `lease_seconds` is below 1.
        NotFoundError: `parent_run_id` is not a run.
        TrackingUnavailableError: MLflow cannot be reached.
    """
    validate_name(name, "run name")
    experiment = validate_name(experiment or name, "experiment name")
    if lease_seconds < 1:
        raise UsageError(f"lease_seconds must be at least 1 second, got {lease_seconds}.")
    if parent_run_id is not None:
        with workspace.store.session() as session:
            find_run(session, parent_run_id)
    client = open_client(workspace)
    experiment_id = ensure_experiment(client, experiment, artifact_location(workspace.settings))
    run = client.create_run(
        experiment_id, run_name=name, tags=_tags(workspace, dataset_version, parent_run_id)
    )
    run_id = str(run.info.run_id)
    try:
        _log_inputs(workspace, client, run_id, config, dataset_version)
        record = _new_record(workspace, run_id, name, experiment, config, lease_seconds)
        record.dataset_version_id = dataset_version.id if dataset_version else None
        record.parent_run_id = parent_run_id
        with workspace.store.session() as session:
            session.add(record)
            workspace.audit(session, "run.start", run_id, _start_payload(name, dataset_version))
    except BaseException:
        # nothing half-recorded: MLflow keeps the run only in its trash
        client.delete_run(run_id)
        raise
    handle = RunHandle(workspace, client, run_id, name, experiment_id, lease_seconds)
    handle.heartbeat = Heartbeat(workspace.store, run_id, lease_seconds).start()
    return handle


def _tags(
    workspace: Workspace, version: DatasetVersion | None, parent_run_id: str | None
) -> dict[str, str]:
    from mlflow.utils import mlflow_tags

    tags = {mlflow_tags.MLFLOW_USER: workspace.actor, "forgeml.version": forgeml.__version__}
    if commit := git_commit():
        tags[mlflow_tags.MLFLOW_GIT_COMMIT] = commit
    if version is not None:
        tags["forgeml.dataset"] = version.ref
        tags["forgeml.dataset_digest"] = version.digest
    if (job := JobContext.from_environ()) is not None:
        tags[JOB_TAG] = job.job_id
    if parent_run_id is not None:
        # MLflow's own convention: its UI nests the trial under the study run
        tags[mlflow_tags.MLFLOW_PARENT_RUN_ID] = parent_run_id
    return tags


def _log_inputs(
    workspace: Workspace,
    client: MlflowClient,
    run_id: str,
    config: Mapping[str, Any],
    version: DatasetVersion | None,
) -> None:
    from mlflow.entities import Param

    params = [Param(key, value) for key, value in _context.config_params(config).items()]
    client.log_batch(run_id, params=params)
    if version is not None:
        blob_url = workspace.artifacts.url_for(version.digest)
        client.log_inputs(run_id, datasets=[_context.dataset_input(version, blob_url)])
    client.log_dict(run_id, _context.environment(), ENVIRONMENT_ARTIFACT)


def _new_record(
    workspace: Workspace,
    run_id: str,
    name: str,
    experiment: str,
    config: Mapping[str, Any],
    lease_seconds: int,
) -> RunRecord:
    now = datetime.now(UTC)
    return RunRecord(
        id=run_id,
        name=name,
        project=workspace.project,
        experiment=experiment,
        status=RunStatus.RUNNING.value,
        config=json_safe(dict(config)),
        started_at=now,
        heartbeat_at=now,
        lease_seconds=lease_seconds,
        pid=os.getpid(),
        host=socket.gethostname(),
        metrics={},
        created_by=workspace.actor,
    )


def _start_payload(name: str, version: DatasetVersion | None) -> dict[str, Any]:
    return {
        "name": name,
        "dataset": version.ref if version else None,
        "digest": version.digest if version else None,
    }


def finish_run(
    handle: RunHandle,
    status: RunStatus | str,
    metrics: Mapping[str, Any],
    error: str | None = None,
) -> RunRecord:
    """End a run: stop its heartbeat, flush its loggers, record the outcome in both stores.

    Final metrics MLflow does not have yet (e.g. test-split scores) are logged to it too;
    keys the loggers already sent keep their curves untouched.

    Args:
        handle: the run to end.
        status: FINISHED, FAILED or KILLED.
        metrics: the final metrics (JSON-serialisable; nested dicts allowed).
        error: why the run failed, for FAILED/KILLED runs.

    Returns:
        The updated run record.

    Raises:
        UsageError: `status` is not a terminal status.
    """
    final = _terminal_status(status)
    if handle.heartbeat is not None:
        handle.heartbeat.stop()
    handle.close_loggers()
    client, run_id = handle.client, handle.run_id
    _log_missing_metrics(client, run_id, metrics)
    if error:
        client.set_tag(run_id, "forgeml.error", error[:MAX_TAG_VALUE_LENGTH])
    with handle.workspace.store.session() as session:
        record = find_run(session, run_id)
        record.status = final.value
        record.ended_at = datetime.now(UTC)
        record.metrics = json_safe(dict(metrics))
        record.error = error
        handle.workspace.audit(
            session, "run.finish", run_id, {"status": final.value, "error": error}
        )
        client.set_terminated(run_id, final.value)
    _store_previews(handle.workspace, [run_id])
    return record


def _store_previews(workspace: Workspace, run_ids: list[str]) -> None:
    """The ended runs' curve previews (`previews.store_curve_previews`), as forgeml ends a
    run. A preview only spares a chart reading MLflow's table: one that cannot be stored
    is logged and the run's end stands (its charts read MLflow, as for a run ended before
    previews existed)."""
    from forgeml.tracking.previews import store_curve_previews

    try:
        store_curve_previews(workspace, run_ids)
    except (SQLAlchemyError, ForgemlError) as error:
        _log.warning(
            "The curve previews of run(s) %s were not stored (%s); their charts read MLflow.",
            ", ".join(run_ids),
            error,
        )


def log_json_artifact(handle: RunHandle, payload: Mapping[str, Any], artifact_file: str) -> None:
    """Store `payload` as the JSON file `artifact_file` among the run's MLflow artifacts."""
    handle.client.log_dict(handle.run_id, json_safe(dict(payload)), artifact_file)


def read_json_artifact(workspace: Workspace, run_id: str, artifact_file: str) -> Any | None:
    """The JSON file `artifact_file` among run `run_id`'s MLflow artifacts; None when the
    run keeps no such file (`log_json_artifact` wrote none)."""
    import json
    import tempfile

    client = open_client(workspace)
    parent, _, name = artifact_file.rpartition("/")
    if name not in {
        item.path.rpartition("/")[2] for item in client.list_artifacts(run_id, parent or None)
    }:
        return None
    with tempfile.TemporaryDirectory(prefix="forgeml-artifact-") as scratch:
        local = client.download_artifacts(run_id, artifact_file, scratch)
        with open(local, encoding="utf-8") as kept:
            return json.load(kept)


def _terminal_status(status: RunStatus | str) -> RunStatus:
    terminal = [s.value for s in RunStatus if s is not RunStatus.RUNNING]
    if str(status) not in terminal:
        raise UsageError(f"Unknown final run status '{status}': use one of {', '.join(terminal)}.")
    return RunStatus(str(status))


def _log_missing_metrics(client: MlflowClient, run_id: str, metrics: Mapping[str, Any]) -> None:
    from mlflow.entities import Metric

    known = set(client.get_run(run_id).data.metrics)
    now = int(datetime.now(UTC).timestamp() * 1000)
    fresh = [
        Metric(key, value, now, 0)
        for key, value in numeric_leaves(metrics).items()
        if key not in known
    ]
    for start in range(0, len(fresh), 1000):
        client.log_batch(run_id, metrics=fresh[start : start + 1000])


def resume_run(workspace: Workspace, ref: str, lease_seconds: int | None = None) -> RunHandle:
    """Mark a stopped run RUNNING again in this process (for `forgeml train --resume`).

    Raises:
        NotFoundError: no such run.
        UsageError: the run FINISHED, or is still alive in another process.
    """
    reap_expired(workspace)
    client = open_client(workspace)
    with workspace.store.session() as session:
        record = find_run(session, ref)
        if record.status == RunStatus.FINISHED:
            raise UsageError(f"Run {record.id} already FINISHED; there is nothing to resume.")
        if record.status == RunStatus.RUNNING:
            raise UsageError(
                f"Run {record.id} is still running (pid {record.pid} on {record.host}); "
                "stop it before resuming."
            )
        now = datetime.now(UTC)
        record.status, record.ended_at, record.error = RunStatus.RUNNING.value, None, None
        record.heartbeat_at, record.pid, record.host = now, os.getpid(), socket.gethostname()
        record.lease_seconds = lease_seconds or record.lease_seconds
        workspace.audit(session, "run.resume", record.id, {"pid": record.pid})
        client.update_run(record.id, status=RunStatus.RUNNING.value)
        job = JobContext.from_environ()
        client.set_tag(record.id, JOB_TAG, job.job_id if job is not None else "")
    experiment_id = str(client.get_run(record.id).info.experiment_id)
    handle = RunHandle(
        workspace, client, record.id, record.name, experiment_id, record.lease_seconds
    )
    handle.heartbeat = Heartbeat(workspace.store, record.id, record.lease_seconds).start()
    return handle


def attach_run(workspace: Workspace, ref: str) -> RunHandle:
    """A handle on an existing run without taking it over (no heartbeat, status untouched).

    Used to log or register a model of a run that already ended, e.g. the best HPO trial.
    """
    with workspace.store.session() as session:
        record = find_run(session, ref)
    client = open_client(workspace)
    experiment_id = str(client.get_run(record.id).info.experiment_id)
    return RunHandle(workspace, client, record.id, record.name, experiment_id, record.lease_seconds)


def get_run(workspace: Workspace, ref: str) -> RunRecord:
    """The run `ref` names: its id, a unique id prefix (4+ hex digits), or its name (latest).

    Raises:
        NotFoundError: no run matches.
        UsageError: an id prefix matches several runs.
    """
    with workspace.store.session() as session:
        return find_run(session, ref, workspace.project)


def find_run(session: Session, ref: str, project: str | None = None) -> RunRecord:
    """`get_run` inside `session`; a name finds `project`'s latest run first when it has
    one (run names are not unique across projects)."""
    record = session.get(RunRecord, ref)
    if record is not None:
        return record
    if len(ref) >= 4 and set(ref) <= _HEX:
        found = session.scalars(select(RunRecord).where(RunRecord.id.startswith(ref))).all()
        if len(found) > 1:
            raise UsageError(f"Run id prefix '{ref}' matches {len(found)} runs; give more digits.")
        if found:
            return found[0]
    query = select(RunRecord).where(RunRecord.name == ref)
    if project is not None:
        query = query.order_by(case((RunRecord.project == project, 0), else_=1))
    latest = session.scalars(query.order_by(RunRecord.started_at.desc()).limit(1)).first()
    if latest is None:
        raise NotFoundError(f"Run '{ref}' does not exist (see `forgeml runs list`).")
    return latest


def list_runs(
    workspace: Workspace,
    *,
    name: str | None = None,
    status: RunStatus | str | None = None,
    parent_run_id: str | None = None,
    limit: int | None = None,
    project: str | None = None,
) -> list[RunRecord]:
    """Runs, newest first, optionally filtered by name, status, parent (HPO study) or
    project (None: every project's)."""
    query = select(RunRecord).order_by(RunRecord.started_at.desc())
    if project is not None:
        query = query.where(RunRecord.project == project)
    if name is not None:
        query = query.where(RunRecord.name == name)
    if status is not None:
        query = query.where(RunRecord.status == str(status))
    if parent_run_id is not None:
        query = query.where(RunRecord.parent_run_id == parent_run_id)
    if limit is not None:
        query = query.limit(limit)
    with workspace.store.session() as session:
        return list(session.scalars(query))


def reap_expired(workspace: Workspace, now: datetime | None = None) -> list[str]:
    """Mark RUNNING runs whose heartbeat is older than their lease KILLED, in both stores.

    Their process died without a word (SIGKILL, OOM killer, power loss); MLflow alone
    would show them RUNNING forever (mlflow/mlflow#5963, #3932).

    Returns:
        The ids of the runs reaped.
    """
    now = now or datetime.now(UTC)
    # a write even inside `reading()` (a list that reaps first)
    with workspace.store.session(write=True) as session:
        running = session.scalars(
            select(RunRecord).where(RunRecord.status == RunStatus.RUNNING.value)
        ).all()
        expired = [run for run in running if lease_expiry(run) < now]
        if not expired:
            return []
        client = open_client(workspace)
        for run in expired:
            last = _utc(run.heartbeat_at)
            run.status, run.ended_at = RunStatus.KILLED.value, last
            run.error = (
                f"The run's process (pid {run.pid} on {run.host}) stopped sending heartbeats at "
                f"{last.isoformat(timespec='seconds')} and its {run.lease_seconds} s lease expired."
            )
            workspace.audit(session, "run.reap", run.id, {"heartbeat_at": last.isoformat()})
            client.set_terminated(run.id, RunStatus.KILLED.value, int(last.timestamp() * 1000))
        reaped = [run.id for run in expired]
    _store_previews(workspace, reaped)
    return reaped


def lease_expiry(run: RunRecord) -> datetime:
    """When a RUNNING run's lease runs out unless its heartbeat renews it."""
    return _utc(run.heartbeat_at) + timedelta(seconds=run.lease_seconds)


def _utc(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; every stored time is UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run_summary(run: RunRecord) -> dict[str, Any]:
    """A run as `runs list --json` prints it."""
    return {
        "run_id": run.id,
        "name": run.name,
        "status": run.status,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "parent_run_id": run.parent_run_id,
        "metrics": run.metrics or {},
        "error": run.error,
    }


def run_detail(record: RunRecord) -> dict[str, Any]:
    """A run as `runs show --json` prints it: its summary, config and dataset version."""
    version = record.dataset_version
    dataset = version.ref if version is not None else None
    return run_summary(record) | {"config": record.config, "dataset": dataset}

"""Pipeline runs in the store: open one, move its steps on, finish it, list and show them.

A run and all its steps are recorded PENDING in one transaction (with its audit event);
each step's change is one transaction; so is the end of the run (audited too). A run
belongs to the project it was opened in (the workspace's: FORGEML_PROJECT, an API
request's, or a trigger's), and so do its steps' jobs; lists show one project's runs.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from forgeml.core.errors import NotFoundError, UsageError
from forgeml.core.ids import new_id
from forgeml.core.store import PipelineRunRecord, PipelineStepRunRecord

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.pipelines.load import Pipeline

_HEX_PREFIX = re.compile(r"^[0-9a-f]{4,32}$")


class StepState(StrEnum):
    """A step's life in one run: PENDING -> RUNNING -> SUCCEEDED | FAILED, or SKIPPED."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"  # a step it needs did not succeed


def utcnow() -> datetime:
    return datetime.now(UTC)


def open_run(workspace: Workspace, pipeline: Pipeline) -> str:
    """Record a RUNNING run of `pipeline` with every step PENDING; its id."""
    run_id = new_id()
    with workspace.store.session() as session:
        session.add(
            PipelineRunRecord(
                id=run_id,
                name=pipeline.name,
                project=workspace.project,
                file=str(pipeline.file),
                spec=pipeline.spec.model_dump(mode="json"),
                state="RUNNING",
                created_by=workspace.actor,
            )
        )
        session.flush()
        for position, name in enumerate(pipeline.order):
            session.add(
                PipelineStepRunRecord(
                    id=new_id(),
                    run_id=run_id,
                    name=name,
                    kind=pipeline.kinds[name],
                    position=position,
                    state=StepState.PENDING,
                    cached=False,
                    outputs={},
                )
            )
        workspace.audit(
            session, "pipeline.run.start", f"pipeline:{run_id}", {"name": pipeline.name}
        )
    return run_id


def step_record(session: Session, run_id: str, name: str) -> PipelineStepRunRecord:
    return session.scalars(
        select(PipelineStepRunRecord).where(
            PipelineStepRunRecord.run_id == run_id, PipelineStepRunRecord.name == name
        )
    ).one()


def update_step(session: Session, run_id: str, name: str, **fields: Any) -> PipelineStepRunRecord:
    """Set `fields` on step `name` of run `run_id`, in the caller's transaction."""
    record = step_record(session, run_id, name)
    for key, value in fields.items():
        setattr(record, key, value)
    return record


def finish_run(workspace: Workspace, run_id: str, state: str, error: str | None) -> None:
    """Record how the run ended (audited)."""
    with workspace.store.session() as session:
        record = session.get(PipelineRunRecord, run_id)
        if record is None:
            raise NotFoundError(f"Pipeline run {run_id} no longer exists.")
        record.state, record.error, record.finished_at = state, error, utcnow()
        workspace.audit(session, "pipeline.run.finish", f"pipeline:{run_id}", {"state": state})


def find_run(workspace: Workspace, ref: str) -> PipelineRunRecord:
    """The run `ref` names: its id, an id prefix (4+ hex digits), or a pipeline name (latest,
    the workspace project's first: pipeline names are not unique across projects).

    Raises:
        NotFoundError: no run matches.
        UsageError: an id prefix matches more than one run.
    """
    with workspace.store.session() as session:
        return get_run(session, ref, workspace.project)


def get_run(session: Session, ref: str, project: str) -> PipelineRunRecord:
    """`find_run` in the caller's session, a name's latest run of `project` first.

    Raises:
        NotFoundError: no run matches.
        UsageError: an id prefix matches more than one run.
    """
    found = session.get(PipelineRunRecord, ref)
    if found is not None:
        return found
    matches: list[PipelineRunRecord] = []
    if _HEX_PREFIX.match(ref):
        matches = list(
            session.scalars(
                select(PipelineRunRecord).where(PipelineRunRecord.id.startswith(ref)).limit(2)
            )
        )
    if len(matches) > 1:
        raise UsageError(f"Run id prefix '{ref}' is ambiguous; give more digits.")
    if not matches:
        own_first = case((PipelineRunRecord.project == project, 0), else_=1)
        matches = list(
            session.scalars(
                select(PipelineRunRecord)
                .where(PipelineRunRecord.name == ref)
                .order_by(own_first, PipelineRunRecord.created_at.desc())
                .limit(1)
            )
        )
    if not matches:
        raise NotFoundError(f"No pipeline run '{ref}' (see `forgeml pipelines list`).")
    return matches[0]


def list_runs(workspace: Workspace, limit: int = 100) -> list[PipelineRunRecord]:
    """The workspace project's newest `limit` runs, newest first (with their steps)."""
    with workspace.store.session() as session:
        return list(
            session.scalars(
                select(PipelineRunRecord)
                .where(PipelineRunRecord.project == workspace.project)
                .order_by(PipelineRunRecord.created_at.desc())
                .limit(limit)
            )
        )


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return round((end - start).total_seconds(), 3) if start and end else None


def step_summary(step: PipelineStepRunRecord) -> dict[str, Any]:
    return {
        "name": step.name,
        "kind": step.kind,
        "state": step.state,
        "cached": step.cached,
        "job_id": step.job_id,
        "cache_key": step.cache_key,
        "started_at": step.started_at,
        "finished_at": step.finished_at,
        "seconds": _seconds(step.started_at, step.finished_at),
        "outputs": step.outputs,
        "error": step.error,
    }


def run_summary(run: PipelineRunRecord, *, steps: bool = True) -> dict[str, Any]:
    """The run as JSON-ready data (with its steps unless `steps` is False)."""
    summary: dict[str, Any] = {
        "id": run.id,
        "name": run.name,
        "project": run.project,
        "file": run.file,
        "state": run.state,
        "created_at": run.created_at,
        "created_by": run.created_by,
        "finished_at": run.finished_at,
        "seconds": _seconds(run.created_at, run.finished_at),
        "cached_steps": sum(1 for step in run.steps if step.cached),
        "total_steps": len(run.steps),
        "error": run.error,
    }
    if steps:
        summary["steps"] = [step_summary(step) for step in run.steps]
    return summary

"""Triggers: a pipeline run by itself on a cron schedule, a new dataset version, an alert
that fires or a model promoted.

`evaluate_triggers` is what `forgeml server` calls every cycle. Each event fires at most
once ever: the firing row (unique per trigger and event) and the trigger's new cursor are
written in one transaction, so a repeated or concurrent evaluation finds nothing new.
Only then is the firing's job submitted and its id recorded. A firing left without a job
(the process died in between) is submitted by the next evaluation, after checking that
no job of its name exists already, so a restart neither repeats nor loses an event.

A trigger belongs to the project it was added in (the workspace's); its firings' jobs are
submitted in that project, so the pipeline and every step of it run there
(FORGEML_PROJECT of the job). A dataset or promotion trigger watches a dataset or model of
its own project only, an alert trigger its own project's alerts. Lists show the workspace
project's triggers and firings.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import exc, select
from sqlalchemy.orm import Session

from forgeml.core.errors import AlreadyExistsError, ForgemlError, NotFoundError, UsageError
from forgeml.core.ids import new_id, validate_name
from forgeml.core.store import (
    JobRecord,
    PipelineFiringRecord,
    PipelineTriggerRecord,
    dataset_project,
    model_project,
)
from forgeml.pipelines.load import load_pipeline
from forgeml.pipelines.trigger_kinds import SOURCES, TriggerKind

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

log = logging.getLogger(__name__)

# A long downtime does not start a flood: the oldest events first, this many per trigger
# per evaluation; the rest follow in the next cycles.
MAX_EVENTS_PER_EVALUATION = 10
RUN_JOB_MODULE = "forgeml.pipelines.run_job"

SubmitJob = Callable[["Workspace", dict[str, Any]], str]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Firing:
    """One event a trigger fired for, and its job (None until submitted)."""

    id: str
    trigger: str
    event: str
    fired_at: datetime
    job_id: str | None


def add_trigger(
    workspace: Workspace,
    name: str,
    file: str | Path,
    overrides: Sequence[str] = (),
    *,
    cron: str | None = None,
    dataset: str | None = None,
    alert: str | None = None,
    promoted: str | None = None,
    now: datetime | None = None,
) -> PipelineTriggerRecord:
    """Record a trigger that runs the pipeline `file` (with `overrides`) on each event.

    A cron trigger fires for the slots after `now` (no back-fill); a dataset trigger for
    the versions after the latest one there is now; an alert trigger for the alerts that
    start firing from now on (`RULE[,RULE][{label=value}]`); a promotion trigger for the
    promotions of a model (`NAME` or `NAME@ALIAS`) from now on.

    Raises:
        UsageError: not exactly one of `cron`, `dataset`, `alert` and `promoted`, or a bad
            override.
        InvalidNameError: `name` is not a plain name.
        ConfigError: the pipeline file is invalid, or `cron` is not a cron expression.
        NotFoundError: the file or the dataset does not exist.
        AlreadyExistsError: a trigger is named `name` already (in any project).
        OtherProjectError: the dataset or model watched belongs to another project.
    """
    validate_name(name, "trigger name")
    kind, subject = _watched(
        {
            TriggerKind.CRON: cron,
            TriggerKind.DATASET: dataset,
            TriggerKind.ALERT: alert,
            TriggerKind.PROMOTED: promoted,
        }
    )
    pipeline = load_pipeline(file, overrides)  # nothing is recorded when it is invalid
    with workspace.store.session() as session:
        taken = session.scalar(
            select(PipelineTriggerRecord).where(PipelineTriggerRecord.name == name)
        )
        if taken is not None and taken.project != workspace.project:
            raise AlreadyExistsError(
                f"A trigger called {name!r} exists already, in the project "
                f"{taken.project!r}; pick another name."
            )
        if taken is not None:
            raise AlreadyExistsError(
                f"Trigger '{name}' exists already (see `forgeml pipelines trigger list`)."
            )
        _check_watched(workspace, session, kind, subject)
        cursor = SOURCES[kind].start(session, subject, now or utcnow())
        trigger = PipelineTriggerRecord(
            id=new_id(),
            name=name,
            project=workspace.project,
            file=str(pipeline.file),
            overrides=list(overrides),
            kind=kind.value,
            subject=subject,
            cursor=cursor,
            created_by=workspace.actor,
        )
        session.add(trigger)
        workspace.audit(
            session,
            "pipeline.trigger.add",
            f"trigger:{trigger.id}",
            {"name": name, "file": trigger.file, "kind": kind.value, "subject": subject},
        )
    return trigger


def _watched(subjects: dict[TriggerKind, str | None]) -> tuple[TriggerKind, str]:
    """The one kind given a subject."""
    given = [(kind, subject) for kind, subject in subjects.items() if subject is not None]
    if len(given) != 1:
        raise UsageError(
            "A trigger takes exactly one of --cron EXPR, --on-dataset NAME, --on-alert RULE "
            "and --on-promoted MODEL."
        )
    return given[0]


def _check_watched(workspace: Workspace, session: Session, kind: TriggerKind, subject: str) -> None:
    """Refuse a dataset or model of another project (names are unique across projects)."""
    if kind == TriggerKind.DATASET:
        owner = dataset_project(session, subject)
        if owner is not None:
            workspace.check_own("Dataset", subject, owner)
    elif kind == TriggerKind.PROMOTED:
        owner = model_project(session, subject)
        if owner is not None:
            workspace.check_own("Model", subject.partition("@")[0], owner)


def list_triggers(workspace: Workspace) -> list[PipelineTriggerRecord]:
    """The workspace project's triggers, by name."""
    with workspace.store.session() as session:
        return list(
            session.scalars(
                select(PipelineTriggerRecord)
                .where(PipelineTriggerRecord.project == workspace.project)
                .order_by(PipelineTriggerRecord.name)
            )
        )


def trigger_summary(trigger: PipelineTriggerRecord) -> dict[str, Any]:
    """The trigger as JSON-ready data."""
    return {
        "name": trigger.name,
        "project": trigger.project,
        "kind": trigger.kind,
        "on": trigger.subject,
        "file": trigger.file,
        "overrides": trigger.overrides,
        "cursor": trigger.cursor,
        "created_at": trigger.created_at,
        "created_by": trigger.created_by,
    }


def _find(workspace: Workspace, session: Session, name: str) -> PipelineTriggerRecord:
    """Trigger `name`, of the workspace's project (OtherProjectError for another's)."""
    trigger = session.scalar(
        select(PipelineTriggerRecord).where(PipelineTriggerRecord.name == name)
    )
    if trigger is None:
        raise NotFoundError(f"There is no trigger '{name}' (see `forgeml pipelines trigger list`).")
    workspace.check_own("Trigger", name, trigger.project)
    return trigger


def remove_trigger(workspace: Workspace, name: str) -> None:
    """Remove trigger `name` and its firings (audited); jobs already submitted go on.

    Raises:
        NotFoundError: there is no such trigger.
        OtherProjectError: it belongs to another project.
    """
    with workspace.store.session() as session:
        trigger = _find(workspace, session, name)
        for firing in session.scalars(
            select(PipelineFiringRecord).where(PipelineFiringRecord.trigger_id == trigger.id)
        ):
            session.delete(firing)
        session.flush()
        session.delete(trigger)
        workspace.audit(session, "pipeline.trigger.remove", f"trigger:{trigger.id}", {"name": name})


def list_firings(workspace: Workspace, name: str | None = None, limit: int = 100) -> list[Firing]:
    """The newest `limit` firings (of trigger `name`, or of all the workspace project's),
    newest first.

    Raises:
        NotFoundError: there is no trigger `name`.
        OtherProjectError: trigger `name` belongs to another project.
    """
    with workspace.store.session() as session:
        query = (
            select(PipelineFiringRecord, PipelineTriggerRecord.name)
            .join(
                PipelineTriggerRecord, PipelineTriggerRecord.id == PipelineFiringRecord.trigger_id
            )
            .where(PipelineTriggerRecord.project == workspace.project)
        )
        if name is not None:
            trigger_id = _find(workspace, session, name).id
            query = query.where(PipelineFiringRecord.trigger_id == trigger_id)
        order = (PipelineFiringRecord.fired_at.desc(), PipelineFiringRecord.event.desc())
        rows = session.execute(query.order_by(*order).limit(limit)).all()
        return [_firing(record, trigger) for record, trigger in rows]


def _firing(record: PipelineFiringRecord, trigger: str) -> Firing:
    return Firing(record.id, trigger, record.event, record.fired_at, record.job_id)


def evaluate_triggers(
    workspace: Workspace, now: datetime | None = None, *, submit: SubmitJob | None = None
) -> list[Firing]:
    """Fire every trigger's events due at `now`, then submit each firing still without a job.

    Args:
        workspace: where the triggers, firings and jobs are recorded.
        now: the time to evaluate at (default: the clock's).
        submit: records a job from its fields and returns its id (default: `submit_run_job`).

    Returns:
        The firings whose job this evaluation submitted (or found submitted), oldest first;
        a firing whose submission failed with a ForgemlError is kept for the next one.
    """
    now = now or utcnow()
    with workspace.store.session() as session:
        trigger_ids = list(session.scalars(select(PipelineTriggerRecord.id)))
    for trigger_id in trigger_ids:
        try:
            _record_due(workspace, trigger_id, now)
        except ForgemlError as error:  # one broken trigger (its dataset gone) stops no other
            log.warning("trigger %s: %s", trigger_id, error)
    with workspace.store.session() as session:
        waiting = session.execute(
            select(PipelineFiringRecord.id)
            .where(PipelineFiringRecord.job_id.is_(None))
            .order_by(PipelineFiringRecord.fired_at, PipelineFiringRecord.event)
        ).scalars()
        waiting_ids = list(waiting)
    fired = [_submit(workspace, firing_id, submit or submit_run_job) for firing_id in waiting_ids]
    return [firing for firing in fired if firing is not None]


def _record_due(workspace: Workspace, trigger_id: str, now: datetime) -> None:
    """Record the trigger's due events and move its cursor past them, in one transaction."""
    try:
        with workspace.store.session() as session:
            trigger = session.get(PipelineTriggerRecord, trigger_id)
            if trigger is None:  # removed since the evaluation began
                return
            source = SOURCES[TriggerKind(trigger.kind)]
            events = source.due(
                session,
                trigger.subject,
                trigger.cursor,
                now,
                MAX_EVENTS_PER_EVALUATION,
                trigger.project,
            )
            for event in events:
                known = session.scalar(
                    select(PipelineFiringRecord.id).where(
                        PipelineFiringRecord.trigger_id == trigger.id,
                        PipelineFiringRecord.event == event.key,
                    )
                )
                if known is None:
                    firing_id = new_id()
                    session.add(
                        PipelineFiringRecord(id=firing_id, trigger_id=trigger.id, event=event.key)
                    )
                    workspace.audit(
                        session,
                        "pipeline.trigger.fire",
                        f"trigger:{trigger.id}",
                        {"name": trigger.name, "event": event.key, "firing": firing_id},
                    )
                trigger.cursor = event.cursor
    except exc.IntegrityError:
        # another evaluator recorded the same event first: it is fired, once
        log.info("trigger %s: its events were recorded by another evaluation", trigger_id)


def _job_name(trigger: str, firing_id: str) -> str:
    """The job's name, which says which firing it runs (found again after a crash)."""
    return f"{trigger}@{firing_id}"


def _submit(workspace: Workspace, firing_id: str, submit: SubmitJob) -> Firing | None:
    """Submit the firing's job unless one exists already; the firing, or None if it failed."""
    with workspace.store.session() as session:
        firing = session.get(PipelineFiringRecord, firing_id)
        trigger = session.get(PipelineTriggerRecord, firing.trigger_id) if firing else None
        if firing is None or trigger is None or firing.job_id is not None:
            return None
        name = _job_name(trigger.name, firing.id)
        job_id = session.scalar(select(JobRecord.id).where(JobRecord.name == name))
        fields = _job_fields(trigger, firing, name)
        if job_id is None and trigger.kind == TriggerKind.ALERT.value:
            job_id = _active_run(session, trigger.id)
            if job_id is not None:
                log.info(
                    "trigger %s: %s joins the run already going (job %s)",
                    trigger.name,
                    firing.event,
                    job_id,
                )
    if job_id is None:
        try:  # in the trigger's project: its pipeline and steps run there
            job_id = submit(workspace.in_project(trigger.project), fields)
        except ForgemlError as error:
            log.warning("trigger %s: event %s: %s", trigger.name, firing.event, error)
            return None
    with workspace.store.session() as session:
        record = session.get(PipelineFiringRecord, firing_id)
        if record is None:  # its trigger was removed meanwhile; the job runs anyway
            return None
        record.job_id = job_id
        return _firing(record, trigger.name)


def _active_run(session: Session, trigger_id: str) -> str | None:
    """The job of an earlier firing of the trigger still pending or running, if any.

    An alert trigger runs one pipeline at a time: alerts that fire while its run goes on
    (the same drift seen again, now on the canary's answers) are handled by that run, and
    their firings name its job, instead of starting a second retraining beside it.
    """
    from forgeml.scheduler.model import FINAL_STATES

    return session.scalar(
        select(JobRecord.id)
        .join(PipelineFiringRecord, PipelineFiringRecord.job_id == JobRecord.id)
        .where(
            PipelineFiringRecord.trigger_id == trigger_id,
            JobRecord.state.not_in([state.value for state in FINAL_STATES]),
        )
        .limit(1)
    )


def _job_fields(
    trigger: PipelineTriggerRecord, firing: PipelineFiringRecord, name: str
) -> dict[str, Any]:
    spec = {
        "file": trigger.file,
        "overrides": trigger.overrides,
        "trigger": trigger.name,
        "event": firing.event,
    }
    return {
        "name": name,
        "kind": "command",
        "command": [sys.executable, "-m", RUN_JOB_MODULE, json.dumps(spec)],
        # it waits for its steps' jobs: holding a core would starve them on a small machine
        "resources": {"cpus": 0, "memory_gb": 0.5},
        "owner": trigger.created_by,
    }


def submit_run_job(workspace: Workspace, fields: dict[str, Any]) -> str:
    """Record the job PENDING for the scheduler (`forgeml server`) to run; its id."""
    from forgeml.scheduler.submit import submit_and_run

    return submit_and_run(workspace, fields, detach=True, wait=False).id


def serve_triggers(
    workspace: Workspace,
    interval: float,
    stop: threading.Event,
    *,
    clock: Callable[[], datetime] = utcnow,
) -> None:
    """Evaluate the triggers every `interval` seconds until `stop` is set (the server's)."""
    while not stop.is_set():
        try:
            evaluate_triggers(workspace, clock())
        except Exception:  # a bad evaluation is logged; the next one retries what is due
            log.exception("evaluating the pipeline triggers failed")
        stop.wait(interval)

"""What the loop did for a policy, in order: the alert that fired, the firing, each step
of the pipeline run it started (retrain, gate, canary) and how each ended."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import select

from forgeml.core.store import AlertRecord, PipelineRunRecord
from forgeml.monitor.loop._apply import TRIGGER_PREFIX

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.pipelines.triggers import Firing


@dataclass(frozen=True)
class TimelineEvent:
    """One moment of the loop: when, what, and the detail (a reason, a model, an error)."""

    at: datetime
    what: str
    detail: str


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def loop_timeline(workspace: Workspace, policy: str) -> list[TimelineEvent]:
    """Every firing of policy `policy` and what followed it, oldest first.

    Raises:
        NotFoundError: no such policy is applied.
    """
    from forgeml.pipelines.triggers import list_firings

    firings = sorted(list_firings(workspace, f"{TRIGGER_PREFIX}{policy}"), key=lambda f: f.fired_at)
    events: list[TimelineEvent] = []
    with workspace.store.session() as session:
        runs = list(
            session.scalars(
                select(PipelineRunRecord)
                .where(PipelineRunRecord.name == f"{TRIGGER_PREFIX}{policy}")
                .order_by(PipelineRunRecord.created_at)
            )
        )
        starts: list[Firing] = []  # the first firing of each job: the loops
        for firing in firings:
            if firing.event.startswith("alert:"):
                alert = session.get(AlertRecord, firing.event.removeprefix("alert:"))
                if alert is not None and alert.fired_at is not None:
                    summary = alert.annotations.get("summary", "")
                    events.append(
                        TimelineEvent(_utc(alert.fired_at), f"alert {alert.rule} fired", summary)
                    )
            job = firing.job_id[:12] if firing.job_id else "(not yet submitted)"
            joined = firing.job_id is not None and any(f.job_id == firing.job_id for f in starts)
            what = "joined the running loop" if joined else "loop started"
            events.append(TimelineEvent(_utc(firing.fired_at), what, f"job {job}"))
            if not joined:
                starts.append(firing)
        for index, firing in enumerate(starts):
            until = starts[index + 1].fired_at if index + 1 < len(starts) else None
            run = next(
                (
                    r
                    for r in runs
                    if _utc(r.created_at) >= _utc(firing.fired_at)
                    and (until is None or _utc(r.created_at) < _utc(until))
                ),
                None,
            )
            if run is not None:
                events += _steps(run)
    return sorted(events, key=lambda e: e.at)


def _steps(run: PipelineRunRecord) -> list[TimelineEvent]:
    found = []
    for step in run.steps:
        if step.started_at is not None:
            found.append(TimelineEvent(_utc(step.started_at), f"{step.name} started", step.kind))
        if step.finished_at is None:
            continue
        outputs = step.outputs or {}
        detail = step.error or ""
        if step.state == "SUCCEEDED":
            detail = {
                "retrain": f"challenger {outputs.get('model')}",
                "gate": _gate_detail(outputs),
                "canary": f"{outputs.get('decision')} {outputs.get('model')}: "
                f"{outputs.get('reason')}",
            }.get(step.name, "")
        found.append(
            TimelineEvent(_utc(step.finished_at), f"{step.name} {step.state.lower()}", detail)
        )
    return found


def _gate_detail(outputs: dict[str, object]) -> str:
    def shown(value: object) -> str:
        return f"{value:.4f}" if isinstance(value, float) else "-"

    champion = outputs.get("champion") or "no champion"
    return (
        f"{outputs.get('challenger')} {shown(outputs.get('challenger_value'))} beats "
        f"{champion} {shown(outputs.get('champion_value'))}"
    )

"""What a trigger watches: a small interface per kind of event, and the registry of kinds.

A kind turns its trigger's subject (a cron expression, a dataset's name) and cursor (the
last event handled) into the events due now, oldest first. Each event has a key, unique
for the trigger (what `pipeline_firings` records once), and the cursor that follows it.
An alert trigger follows the alerts' `fire_seq` (every alert that starts firing gets the
next number, whether forgeml's evaluator or a real Alertmanager raised it) and fires on its
own project's alerts only; a promotion
trigger follows the audit log's sequence of `model.promote` events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forgeml.core.errors import ConfigError, NotFoundError
from forgeml.core.store import AlertRecord, AuditEvent, Dataset, DatasetVersion


class TriggerKind(StrEnum):
    """The events a trigger can start a pipeline on."""

    CRON = "cron"  # every slot of a cron schedule
    DATASET = "dataset"  # every new version of a dataset
    ALERT = "alert"  # every alert of the named rules (and labels) that starts firing
    PROMOTED = "promoted"  # every promotion of a model (to any alias, or the one named)


@dataclass(frozen=True)
class Event:
    """One event due: its key (unique for its trigger) and the trigger's cursor after it."""

    key: str
    cursor: str


class EventSource(Protocol):
    """How one kind of trigger finds its events."""

    def start(self, session: Session, subject: str, now: datetime) -> str:
        """The cursor of a new trigger on `subject`: nothing before `now` fires.

        Raises:
            ForgemlError: `subject` is not valid for this kind (one sentence).
        """
        ...

    def due(
        self, session: Session, subject: str, cursor: str, now: datetime, limit: int, project: str
    ) -> list[Event]:
        """At most `limit` events after `cursor` up to `now`, oldest first, for a trigger of
        `project` (a kind whose events belong to a project, an alert, finds that project's
        only)."""
        ...


class CronSource:
    """Every slot of the cron expression (UTC) after the cursor, the last slot handled."""

    def start(self, session: Session, subject: str, now: datetime) -> str:
        from croniter import croniter

        if not croniter.is_valid(subject):
            raise ConfigError(
                f"'{subject}' is not a cron expression (five fields: minute hour "
                "day-of-month month day-of-week, e.g. '*/5 * * * *')."
            )
        return _utc(now).isoformat()

    def due(
        self, session: Session, subject: str, cursor: str, now: datetime, limit: int, project: str
    ) -> list[Event]:
        from croniter import croniter

        slots = croniter(subject, datetime.fromisoformat(cursor))
        events: list[Event] = []
        while len(events) < limit:
            slot = slots.get_next(datetime)
            if slot > _utc(now):
                break
            events.append(Event(slot.isoformat(), slot.isoformat()))
        return events


class DatasetSource:
    """Every version of the dataset numbered above the cursor, the last version seen."""

    def start(self, session: Session, subject: str, now: datetime) -> str:
        from forgeml.data.catalog import versions_of

        versions = versions_of(session, subject)  # raises NotFoundError for an unknown one
        return str(versions[-1].version if versions else 0)

    def due(
        self, session: Session, subject: str, cursor: str, now: datetime, limit: int, project: str
    ) -> list[Event]:
        # the server asks every cycle: read only the versions past the cursor
        dataset = session.scalar(select(Dataset).where(Dataset.name == subject))
        if dataset is None:
            raise NotFoundError(f"Dataset '{subject}' of a trigger no longer exists.")
        numbers = session.scalars(
            select(DatasetVersion.version)
            .where(DatasetVersion.dataset_id == dataset.id, DatasetVersion.version > int(cursor))
            .order_by(DatasetVersion.version)
            .limit(limit)
        )
        return [Event(f"{subject}@v{number}", str(number)) for number in numbers]


_RULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"?([^",]*)"?\s*$')


def parse_alert_subject(subject: str) -> tuple[list[str], dict[str, str]]:
    """`RULE[,RULE...][{label=value,...}]` as its rule names and label matchers.

    Raises:
        ConfigError: not of that form.
    """
    head, brace, tail = subject.partition("{")
    rules = [rule.strip() for rule in head.split(",") if rule.strip()]
    labels: dict[str, str] = {}
    if brace:
        if not tail.endswith("}"):
            raise ConfigError(f"'{subject}': the label matchers must end with '}}'.")
        for item in filter(None, (part.strip() for part in tail[:-1].split(","))):
            match = _LABEL.match(item)
            if match is None:
                raise ConfigError(f"'{subject}': '{item}' is not label=value.")
            labels[match.group(1)] = match.group(2)
    if not rules or not all(_RULE.match(rule) for rule in rules):
        raise ConfigError(
            f"'{subject}' does not name alert rules: give RULE[,RULE...][{{label=value,...}}], "
            "e.g. 'ForgemlDriftDetected{deployment=adult}'."
        )
    return rules, labels


class AlertSource:
    """Every alert of the subject's rules whose labels match that starts firing after the
    cursor (the last `fire_seq` handled), of the trigger's project (an alert belongs to the
    project of the deployment, model or dataset its labels name, else to `default`)."""

    def start(self, session: Session, subject: str, now: datetime) -> str:
        parse_alert_subject(subject)
        return str(session.scalar(select(func.max(AlertRecord.fire_seq))) or 0)

    def due(
        self, session: Session, subject: str, cursor: str, now: datetime, limit: int, project: str
    ) -> list[Event]:
        rules, labels = parse_alert_subject(subject)
        found = session.scalars(
            select(AlertRecord)
            .where(
                AlertRecord.fire_seq > int(cursor),
                AlertRecord.rule.in_(rules),
                AlertRecord.project == project,
            )
            .order_by(AlertRecord.fire_seq)
        )
        events = []
        for alert in found:
            if all(alert.labels.get(k) == v for k, v in labels.items()):
                events.append(Event(f"alert:{alert.id}", str(alert.fire_seq)))
                if len(events) == limit:
                    break
        return events


_PROMOTIONS = ("model.promote", "model.promote.forced")


class PromotedSource:
    """Every promotion of the model `NAME` (or to the alias of `NAME@ALIAS`) recorded in
    the audit log after the cursor (the last event's sequence number)."""

    def start(self, session: Session, subject: str, now: datetime) -> str:
        from forgeml.core.ids import validate_name

        validate_name(subject.partition("@")[0], "model name")
        return str(session.scalar(select(func.max(AuditEvent.seq))) or 0)

    def due(
        self, session: Session, subject: str, cursor: str, now: datetime, limit: int, project: str
    ) -> list[Event]:
        name, _, alias = subject.partition("@")
        found = session.scalars(
            select(AuditEvent)
            .where(
                AuditEvent.seq > int(cursor),
                AuditEvent.action.in_(_PROMOTIONS),
                AuditEvent.object_ref.startswith(f"{name}@v"),
            )
            .order_by(AuditEvent.seq)
        )
        events = []
        for event in found:
            if not alias or event.payload.get("alias") == alias:
                key = f"{event.object_ref}@{event.payload.get('alias')}#{event.seq}"
                events.append(Event(key, str(event.seq)))
                if len(events) == limit:
                    break
        return events


SOURCES: dict[TriggerKind, EventSource] = {
    TriggerKind.CRON: CronSource(),
    TriggerKind.DATASET: DatasetSource(),
    TriggerKind.ALERT: AlertSource(),
    TriggerKind.PROMOTED: PromotedSource(),
}


def _utc(moment: datetime) -> datetime:
    """`moment` as an aware UTC time (a naive one is taken to be UTC already)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)

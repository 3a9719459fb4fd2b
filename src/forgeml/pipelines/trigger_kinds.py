"""What a trigger watches: a small interface per kind of event, and the registry of kinds.

A kind turns its trigger's subject (a cron expression, a dataset's name) and cursor (the
last event handled) into the events due now, oldest first. Each event has a key, unique
for the trigger (what `pipeline_firings` records once), and the cursor that follows it.
Alerts firing and models promoted are kinds still to come: one class each, registered in
`SOURCES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from forgeml.core.errors import ConfigError, NotFoundError
from forgeml.core.store import Dataset, DatasetVersion


class TriggerKind(StrEnum):
    """The events a trigger can start a pipeline on."""

    CRON = "cron"  # every slot of a cron schedule
    DATASET = "dataset"  # every new version of a dataset


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
        self, session: Session, subject: str, cursor: str, now: datetime, limit: int
    ) -> list[Event]:
        """At most `limit` events after `cursor` up to `now`, oldest first."""
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
        self, session: Session, subject: str, cursor: str, now: datetime, limit: int
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
        self, session: Session, subject: str, cursor: str, now: datetime, limit: int
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


SOURCES: dict[TriggerKind, EventSource] = {
    TriggerKind.CRON: CronSource(),
    TriggerKind.DATASET: DatasetSource(),
}


def _utc(moment: datetime) -> datetime:
    """`moment` as an aware UTC time (a naive one is taken to be UTC already)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)

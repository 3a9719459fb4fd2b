"""The audit log: every mutation appends an event whose hash covers the previous one.

Editing or deleting a row breaks the chain at that row, which `verify` reports; removing
the newest rows is caught against a signed checkpoint kept outside the table
(`core/audit_anchor.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from forgeml.core.audit_anchor import Checkpoint, check_against
from forgeml.core.errors import AuditChainBrokenError
from forgeml.core.ids import json_digest
from forgeml.core.store import AuditEvent

GENESIS_HASH = "0" * 64


def _event_hash(event: AuditEvent) -> str:
    return json_digest(
        {
            "seq": event.seq,
            "at": _normalise_time(event.at).isoformat(),
            "actor": event.actor,
            "action": event.action,
            "object_ref": event.object_ref,
            "payload_digest": event.payload_digest,
            "prev_hash": event.prev_hash,
        }
    )


def _normalise_time(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; every stored time is UTC.
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def append(
    session: Session, actor: str, action: str, object_ref: str, payload: dict[str, Any]
) -> AuditEvent:
    """Append one event in the caller's transaction (which must hold the write lock)."""
    last = session.execute(
        select(AuditEvent.seq, AuditEvent.hash).order_by(AuditEvent.seq.desc()).limit(1)
    ).first()
    seq, prev_hash = (last[0] + 1, last[1]) if last else (1, GENESIS_HASH)
    event = AuditEvent(
        seq=seq,
        at=datetime.now(UTC),
        actor=actor,
        action=action,
        object_ref=object_ref,
        payload=payload,
        payload_digest=json_digest(payload),
        prev_hash=prev_hash,
    )
    event.hash = _event_hash(event)
    session.add(event)
    session.flush()
    return event


@dataclass(frozen=True)
class VerifyResult:
    events: int
    head: str


def verify(session: Session, checkpoint: Checkpoint | None = None) -> VerifyResult:
    """Check the whole chain, and that it still holds the signed `checkpoint`'s head.

    Raises:
        AuditChainBrokenError: naming the first event that was edited, the gap left by
            a deleted one, or the newest events missing or replaced since `checkpoint`.
    """
    expected_prev, expected_seq, count = GENESIS_HASH, 1, 0
    hash_at_checkpoint = None
    for event in session.scalars(select(AuditEvent).order_by(AuditEvent.seq)):
        if event.seq != expected_seq:
            raise AuditChainBrokenError(
                f"Audit log broken at event {expected_seq}: it was deleted "
                f"(the next event present is {event.seq}).",
                expected_seq,
            )
        if event.prev_hash != expected_prev:
            raise AuditChainBrokenError(
                f"Audit log broken at event {event.seq}: it does not follow event "
                f"{event.seq - 1} (an earlier event was edited or removed).",
                event.seq,
            )
        if json_digest(event.payload) != event.payload_digest or _event_hash(event) != event.hash:
            raise AuditChainBrokenError(
                f"Audit log broken at event {event.seq}: its contents were edited "
                f"({event.action} {event.object_ref}).",
                event.seq,
            )
        expected_prev, expected_seq, count = event.hash, event.seq + 1, count + 1
        if checkpoint is not None and event.seq == checkpoint.seq:
            hash_at_checkpoint = event.hash
    if checkpoint is not None:
        check_against(checkpoint, count, hash_at_checkpoint)
    return VerifyResult(events=count, head=expected_prev)


def event_summary(event: AuditEvent) -> dict[str, Any]:
    """An event as `audit log --json` prints it."""
    return {
        "seq": event.seq,
        "at": event.at,
        "actor": event.actor,
        "action": event.action,
        "object": event.object_ref,
        "payload": event.payload,
        "payload_digest": event.payload_digest,
        "hash": event.hash,
    }

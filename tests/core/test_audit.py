from __future__ import annotations

import itertools

import pytest
from sqlalchemy import delete, update

from forgeml.core import audit
from forgeml.core.errors import AuditChainBrokenError
from forgeml.core.store import AuditEvent, open_store


@pytest.fixture
def store(backend_url: str):  # type: ignore[no-untyped-def]
    store = open_store(backend_url)
    with store.session() as session:
        for index in range(5):
            audit.append(session, "alice", "data.version.create", f"d@v{index + 1}", {"i": index})
    yield store
    store.dispose()


def test_events_chain_and_verify(store) -> None:  # type: ignore[no-untyped-def]
    with store.session() as session:
        result = audit.verify(session)
        events = session.query(AuditEvent).order_by(AuditEvent.seq).all()
    assert result.events == 5
    assert events[0].prev_hash == audit.GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(events))


def test_edited_payload_is_named(store) -> None:  # type: ignore[no-untyped-def]
    with store.session() as session:
        session.execute(update(AuditEvent).where(AuditEvent.seq == 3).values(payload={"i": 99}))
    with store.session() as session, pytest.raises(AuditChainBrokenError, match="event 3"):
        audit.verify(session)


def test_edited_actor_is_named(store) -> None:  # type: ignore[no-untyped-def]
    with store.session() as session:
        session.execute(update(AuditEvent).where(AuditEvent.seq == 2).values(actor="mallory"))
    with store.session() as session, pytest.raises(AuditChainBrokenError) as caught:
        audit.verify(session)
    assert caught.value.seq == 2


def test_deleted_event_is_named(store) -> None:  # type: ignore[no-untyped-def]
    with store.session() as session:
        session.execute(delete(AuditEvent).where(AuditEvent.seq == 4))
    with store.session() as session, pytest.raises(AuditChainBrokenError, match="event 4"):
        audit.verify(session)

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError

from forgeml.core.store import AuditEvent, QueueRecord, Store, reading
from forgeml.core.workspace import Workspace


def _queue(name: str) -> QueueRecord:
    return QueueRecord(name=name, weight=1, capability=None, reclaimable=True, created_by="t")


@contextmanager
def _long_write(store: Store) -> Iterator[threading.Thread]:
    """A write session that holds the writers' lock, an insert pending, until the block ends."""
    holding, release = threading.Event(), threading.Event()

    def write() -> None:
        with store.session() as session:
            session.add(_queue("pending"))
            session.flush()
            holding.set()
            release.wait(30)

    writer = threading.Thread(target=write)
    writer.start()
    assert holding.wait(30), "the writer never took its lock"
    try:
        yield writer
    finally:
        release.set()
        writer.join(30)


def _count_queues(store: Store) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(QueueRecord)) or 0)


def test_a_long_write_does_not_block_a_read(any_workspace: Workspace) -> None:
    store = any_workspace.store
    with store.session() as session:
        session.add(_queue("committed"))
    waiting_writer: list[int] = []
    with _long_write(store) as writer:
        # a second writer waits for the lock; the reads below do not
        blocked = threading.Thread(target=lambda: waiting_writer.append(_count_queues(store)))
        blocked.start()
        with reading():
            assert _count_queues(store) == 1  # the last commit, not the pending insert
        with store.read_session() as session:
            assert session.scalars(select(QueueRecord.name)).all() == ["committed"]
        assert writer.is_alive() and blocked.is_alive() and waiting_writer == []
    blocked.join(30)
    assert waiting_writer == [2]


def test_a_read_session_refuses_writes(any_workspace: Workspace) -> None:
    store = any_workspace.store
    with pytest.raises(DBAPIError), store.read_session() as session:
        session.add(_queue("sneaked"))
    with reading(), pytest.raises(DBAPIError), store.session() as session:
        session.add(_queue("sneaked"))
    assert _count_queues(store) == 0


def test_a_write_asked_for_inside_reading_writes(any_workspace: Workspace) -> None:
    store = any_workspace.store
    with reading(), store.session(write=True) as session:
        session.add(_queue("reaped"))
        any_workspace.audit(session, "queue.create", "queue:reaped", {})
    with store.read_session() as session:
        assert session.scalar(select(func.count()).select_from(AuditEvent)) == 1
    assert _count_queues(store) == 1
